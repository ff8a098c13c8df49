// The one palette, shared with the Python cards and figures: dtype_explorer/views/palette.json.
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
