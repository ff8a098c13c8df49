// @ts-check
// Light or dark: which theme the page around the widget is in, and a watch that follows it.
// The colours of each theme are the palette's (palette.json "themes", laid out as the --dx-*
// variables by palette.js themeProperties); this module only decides which one applies.
import { PALETTE } from "./palette.js";

/** The opaque background colour at or above `el`, crossing shadow roots (marimo renders a
 *  widget in one), as [r, g, b] in 0..1; null where every one is transparent. */
function backgroundAround(el) {
  /** @type {Element | null} */
  let node = el;
  while (node) {
    const view = node.ownerDocument?.defaultView;
    const rgba = view ? parseColor(view.getComputedStyle(node).backgroundColor) : null;
    if (rgba && rgba[3] >= 0.5) return rgba.slice(0, 3);
    const root = node.getRootNode?.();
    node = node.parentElement ?? (root && "host" in root ? /** @type {ShadowRoot} */ (root).host : null);
  }
  return null;
}

/** `rgb(...)`, `rgba(...)` or `color(srgb ...)` (what getComputedStyle returns) as [r, g, b, a]
 *  in 0..1, or null. */
export function parseColor(text) {
  const found = /^(rgba?|color)\((.*)\)$/.exec(String(text ?? "").trim());
  if (!found) return null;
  const srgb = found[1] === "color";
  const parts = found[2].replace(/^srgb\s+/, "").split(/[\s,/]+/).filter(Boolean).map(Number);
  if (parts.length < 3 || parts.some(Number.isNaN)) return null;
  const [r, g, b] = parts.slice(0, 3).map((c) => (srgb ? c : c / 255));
  return [r, g, b, parts[3] ?? 1];
}

/** The WCAG relative luminance of [r, g, b] in 0..1. */
export function luminance([r, g, b]) {
  const linear = (c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
  return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
}

/**
 * "dark" or "light", by what the page says, first that answers:
 * 1. a host's mark on <html> or <body> (palette.json "theme_signals": JupyterLab's
 *    data-jp-theme-light, VS Code's vscode-dark, marimo's dark class, Colab's theme attribute);
 * 2. the `color-scheme` the widget inherits (marimo sets it, shadow roots pass it on);
 * 3. the luminance of the first opaque background around the widget;
 * 4. the system's preference (`prefers-color-scheme`).
 * @param {Element} el
 * @returns {"light" | "dark"}
 */
export function pageTheme(el) {
  const doc = el.ownerDocument;
  for (const theme of /** @type {const} */ (["dark", "light"])) {
    for (const selector of PALETTE.theme_signals[theme]) {
      if (doc.documentElement?.matches(selector) || doc.body?.matches(selector)) return theme;
    }
  }
  const view = doc.defaultView;
  const scheme = el.isConnected && view ? view.getComputedStyle(el).colorScheme.trim() : "";
  if (scheme === "dark" || scheme === "only dark") return "dark";
  if (scheme === "light" || scheme === "only light") return "light";
  const background = el.isConnected ? backgroundAround(el.parentElement ?? el) : null;
  // dark where white text reads better on it than black: (1 + 0.05) / (L + 0.05) > (L + 0.05) / 0.05
  if (background) return luminance(background) < 0.179 ? "dark" : "light";
  return view?.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

/** Attributes by which hosts switch themes (JupyterLab, VS Code, marimo, Colab, plain pages). */
const WATCHED = ["class", "style", "theme", "data-theme", "data-jp-theme-light", "data-jp-theme-name", "data-vscode-theme-kind"];

/**
 * Call `onChange(theme)` now and whenever the page's theme changes (a host's mark, the system's
 * preference, or the widget being attached where the page has another background).
 * @param {Element} el
 * @param {(theme: "light" | "dark") => void} onChange
 * @returns {() => void} stops watching
 */
export function watchTheme(el, onChange) {
  let current = null;
  const check = () => {
    const theme = pageTheme(el);
    if (theme !== current) onChange((current = theme));
  };
  check();
  const doc = el.ownerDocument;
  const view = doc.defaultView;
  const observer = typeof MutationObserver === "function" ? new MutationObserver(check) : null;
  for (const node of [doc.documentElement, doc.body]) {
    if (node) observer?.observe(node, { attributes: true, attributeFilter: WATCHED });
  }
  const media = view?.matchMedia?.("(prefers-color-scheme: dark)");
  media?.addEventListener?.("change", check);
  // once the host has attached the widget, what it inherits is known
  const frame = view?.requestAnimationFrame?.(check);
  return () => {
    observer?.disconnect();
    media?.removeEventListener?.("change", check);
    if (frame != null) view?.cancelAnimationFrame?.(frame);
  };
}
