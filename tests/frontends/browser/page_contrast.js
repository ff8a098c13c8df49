// Read by page_contrast.py: evaluated in the page on one element, it measures the WCAG
// contrast of every visible text under it against the colour actually behind that text.
(root) => {
  const parse = (text) => {
    const m = /^(rgba?|color)\((.*)\)$/.exec(String(text || "").trim());
    if (!m) return null;
    const srgb = m[1] === "color";
    const p = m[2].replace(/^srgb\s+/, "").split(/[\s,/]+/).filter(Boolean).map(Number);
    if (p.length < 3 || p.some(Number.isNaN)) return null;
    return [...p.slice(0, 3).map((c) => (srgb ? c * 255 : c)), p[3] ?? 1];
  };
  // `top` drawn over the opaque `bottom`
  const over = (top, bottom) =>
    [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat(1);
  const up = (el) => el.parentElement ?? el.getRootNode()?.host ?? null;
  const behind = (el) => {
    const layers = [];
    for (let node = el; node; node = up(node)) {
      const c = parse(getComputedStyle(node).backgroundColor);
      if (c && c[3] > 0) layers.push(c);
      if (c && c[3] >= 1) break;
    }
    return layers.reduceRight((below, layer) => over(layer, below), [255, 255, 255, 1]);
  };
  const lum = (c) => {
    const linear = (v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    const [r, g, b] = c.slice(0, 3).map((v) => linear(v / 255));
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const shown = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  const owns = (el) => [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  const out = [];
  for (const el of [root, ...root.querySelectorAll("*")]) {
    if (!owns(el) || !shown(el) || el.closest("option, title, style, script")) continue;
    let fg, bg;
    if (el instanceof SVGElement) {
      const svg = el.ownerSVGElement ?? el;
      bg = behind(svg);
      const chip = el.previousElementSibling;
      const fill = chip && chip.tagName === "rect" ? parse(getComputedStyle(chip).fill) : null;
      if (fill) bg = over(fill, bg);
      fg = parse(getComputedStyle(el).fill);
    } else {
      bg = behind(el);
      fg = parse(getComputedStyle(el).color);
    }
    if (!fg) continue;
    fg = over(fg, bg);
    const classes = String(el.getAttribute("class") || "").split(" ").join(".");
    out.push({
      what: `${el.tagName.toLowerCase()}.${classes}`,
      text: el.textContent.trim().slice(0, 40),
      fg: fg.slice(0, 3).map(Math.round),
      bg: bg.slice(0, 3).map(Math.round),
      ratio: Math.round(ratio(fg, bg) * 100) / 100,
    });
  }
  return out;
}
