// Inside the call: the op trace of one probe (ProbeResult.trace), as a list.
//
// Every fact comes from the Python side: which step changed a dtype (`change`, `conversions`),
// which step first made inf/NaN from finite values (`first_nonfinite`), each step's warnings
// worded once (`flags`, TraceStep.flags, as the text and the cards show them), and, across backends,
// where the traces part (the `trace_divergence` trait, from ProbeSet.first_divergence).
import { h } from "./dom.js";
import { chip } from "./dtype.js";
import { verdictTone } from "./palette.js";

const CHANGES = new Set(["promoted", "cast", "changed"]);

/** Whether a step changed a dtype (mirrors TraceStep.changes_dtype, read from its fields). */
export function changesDtype(step) {
  return CHANGES.has(step.change) || (step.conversions ?? []).length > 0;
}

/** The steps of the call itself (those run while building the layer left out). */
export function callSteps(result) {
  return (result?.trace ?? []).filter((s) => (s.phase ?? "call") === "call");
}

function sourceLink(src) {
  if (!src) return null;
  const path = src.file.replace(/\\/g, "/");
  const cut = path.indexOf("/keras/src/");
  const short = `${cut >= 0 ? path.slice(cut + 1) : path}:${src.line}`;
  const where = src.url
    ? h("a", { href: src.url, target: "_blank", rel: "noopener", testid: "trace-source", title: `open ${short} at the installed Keras version` }, short)
    : h("span", { testid: "trace-source", title: src.file }, short);
  return h("div", { class: "dx-trace-src" }, where, src.text ? h("code", {}, ` ${src.text}`) : null);
}

function stepItem(step, { parted, position }) {
  const changed = changesDtype(step);
  const said = (step.note || step.change) + ((step.conversions ?? []).length ? ` (${step.conversions.join(", ")})` : "");
  const flags = (step.flags ?? []).map((f) => f.text);
  const outs = step.error
    ? h("span", { class: "dx-trace-raised", title: step.error }, `raised ${step.error.split(":")[0]}`)
    : (step.outputs ?? []).map((t) => chip(t.dtype));
  return h(
    "li",
    {
      class: ["dx-trace-step", changed && "dx-changed", step.first_nonfinite && "dx-trace-first-nonfinite", parted && "dx-trace-part"],
      style: parted ? { "--dx-part": verdictTone("diverges") } : null,
      testid: "trace-step",
      "data-index": step.index,
      "data-op": step.op,
    },
    h(
      "div",
      { class: "dx-trace-head" },
      h("code", { class: "dx-trace-op", title: `op ${step.index} of the whole trace, build included` }, `${position}. ${step.op}`),
      " ",
      (step.inputs ?? []).map((t) => chip(t.dtype)),
      " → ",
      outs,
      " ",
      h("span", { class: "dx-trace-change" }, step.error ? "" : said),
      flags.length ? h("strong", { class: "dx-trace-flag", testid: "trace-flag" }, ` ${flags.join("; ")}`) : null,
      parted ? h("strong", { class: "dx-trace-part-flag", testid: "trace-part" }, " traces part here") : null,
    ),
    sourceLink(step.source),
  );
}

/** The trace of `result` on `backend` as a folded list; `part` (the trace_divergence trait)
 *  marks the step where this backend's trace parts from the others'. */
export function renderTrace(backend, result, { part } = {}) {
  const steps = callSteps(result);
  if (!steps.length) return null;
  const partIndex = part?.steps?.[backend];
  const first = steps.find((s) => s.first_nonfinite);
  const built = (result.trace ?? []).length - steps.length;
  const summary = [
    `inside the call: ${steps.length} op${steps.length === 1 ? "" : "s"}`,
    built ? ` (and ${built} while building the layer, not listed)` : "",
    first ? ` · first inf/NaN at op ${steps.indexOf(first) + 1}, ${first.op}` : "",
    partIndex != null ? ` · traces part at ${part.op}` : "",
  ].join("");
  return h(
    "details",
    { class: "dx-section dx-trace", testid: "trace" },
    h("summary", {}, summary),
    h(
      "ol",
      { class: "dx-trace-list" },
      steps.map((step, i) => stepItem(step, { parted: partIndex != null && step.index === partIndex, position: i + 1 })),
    ),
  );
}

/** One line under the comparison: the op where the backends' traces part, and what each did. */
export function renderTracePart(part) {
  if (!part?.op) return null;
  return h(
    "div",
    { class: "dx-banner dx-banner-trace", testid: "trace-divergence", style: { "--dx-part": verdictTone("diverges") } },
    // The sentence the Python side made (TraceDivergence.message); the op stays findable.
    h("span", { "data-op": part.op }, part.message ?? `The backends' op traces first differ at ${part.op}.`),
  );
}
