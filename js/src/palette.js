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

/** The colour of a comparison column's status (`ok`, `error`, `unsupported`, `pending`). */
export function markColor(status) {
  return palette.statuses[status] ?? palette.ui.muted;
}

/** The glyph that marks a verdict, status or class (`✓`, `≠`, `✕`, ...), or "". */
export function mark(name) {
  return palette.marks[name] ?? "";
}

/** The text colour the palette draws on a fill colour (WCAG AA, tested in Python). */
export function textOn(fill) {
  return palette.text_on[fill] ?? palette.ui.foreground;
}
