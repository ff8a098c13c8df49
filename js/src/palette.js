// The one palette, shared with the Python cards and figures: dtype_explorer/views/palette.json.
// Dtype colours are for dtypes only; verdicts, statuses and classes have their own (neutral,
// amber, red) and a mark each.
import palette from "../../dtype_explorer/views/palette.json";

export const PALETTE = palette;

/** The colour of a dtype kind (`float16`, `int`, ..., `error`, `none`). */
export function kindColor(kind) {
  if (kind === "error") return palette.ui.error;
  return palette.dtype_kinds[kind] ?? palette.dtype_kinds.other;
}

/** The colour of a verdict (`as-documented`, `deviates`, ..., `pending`). */
export function verdictColor(verdict) {
  return palette.verdicts[verdict] ?? palette.ui.muted;
}

/** The CSS custom properties of a theme ("light" or "dark"), set on the widget's root: each
 *  role of the page as `--dx-<role>` (the host's own variable where palette.json "theme_hosts"
 *  names one: JupyterLab's, VS Code's; else the theme's colour), and each verdict's and status's
 *  colour as drawn on that theme's background, `--dx-verdicts-<name>`, `--dx-statuses-<name>`. */
export function themeProperties(theme) {
  const properties = {};
  for (const [role, colour] of Object.entries(palette.themes[theme])) {
    const hosts = palette.theme_hosts[role] ?? [];
    properties[`--dx-${role}`] = hosts.reduceRight((fallback, name) => `var(${name}, ${fallback})`, colour);
  }
  const tones = theme === "dark" ? palette.on_dark : palette;
  for (const section of ["verdicts", "statuses"]) {
    for (const name of Object.keys(palette[section])) properties[`--dx-${section}-${name}`] = tones[section][name];
  }
  return properties;
}

/** A verdict's colour as text and edge in the widget, in the page's theme (a CSS variable). */
export function verdictTone(verdict) {
  return verdict in palette.verdicts ? `var(--dx-verdicts-${verdict})` : "var(--dx-fg2)";
}

/** A comparison column's status colour (`ok`, `error`, `unsupported`, `pending`), in the
 *  page's theme (a CSS variable). */
export function statusTone(status) {
  return status in palette.statuses ? `var(--dx-statuses-${status})` : "var(--dx-fg2)";
}

/** The glyph that marks a verdict, status or class (`✓`, `≠`, `✕`, ...), or "". */
export function mark(name) {
  return palette.marks[name] ?? "";
}

/** The text colour the palette draws on a fill colour (WCAG AA, tested in Python). */
export function textOn(fill) {
  return palette.text_on[fill] ?? palette.ui.foreground;
}
