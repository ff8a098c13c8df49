// One backend's answer: the views of the output dtype, the cast path, the error, the numerics.
import { renderCastPath, renderCastSteps } from "./castpath.js";
import { h, s } from "./dom.js";
import { chip } from "./dtype.js";
import { kindColor, verdictTone } from "./palette.js";
import { renderQuantization } from "./quantization.js";
import { renderTrace } from "./trace.js";

const VERDICT_TEXT = {
  "as-documented": "as documented",
  deviates: "deviates from the docs",
  "declared-mismatch": "declared ≠ observed",
  undocumented: "no documented rule",
  error: "error",
  diverges: "backends diverge",
  pending: "probing…",
  "values-wrong": "values wrong",
  unsupported: "not supported here",
};

/**
 * A verdict badge. A result's badge shows its `shown_verdict` (ProbeResult.shown_verdict,
 * computed once in Python: `values-wrong` where the dtype is as documented but the values were
 * found wrong), never a bare "as documented" next to wrong numbers.
 */
export function verdictBadge(verdict, testid) {
  return h(
    "span",
    { class: ["dx-badge", `dx-v-${verdict}`], style: { "--dx-tone": verdictTone(verdict) }, testid, title: verdict },
    VERDICT_TEXT[verdict] ?? verdict,
  );
}

/** The observed outcome: the output dtype chip, or the error type. */
export function outcomeChip(result, testid) {
  if (!result || result.status === "pending") {
    return h("span", { class: "dx-chip dx-k-pending", style: { "--dx-kind": kindColor("none") }, testid }, "…");
  }
  if (result.status === "ok") return chip(result.output_dtype, { testid });
  return h(
    "span",
    { class: "dx-chip dx-k-error", style: { "--dx-kind": kindColor("error") }, testid, title: result.error?.message ?? result.status },
    result.error?.type ?? result.status,
  );
}

function view(label, value, { observed, testid }) {
  const differs = value != null && observed != null && value !== observed;
  return h(
    "div",
    { class: ["dx-view", differs && "dx-view-differs"], title: differs ? `${label} ${value}, observed ${observed}` : null },
    h("span", { class: "dx-view-label" }, label),
    value == null ? h("span", { class: "dx-muted", testid }, "none") : chip(value, { testid }),
  );
}

function views(result) {
  const observed = result.status === "ok" ? result.output_dtype : null;
  return h(
    "div",
    { class: "dx-views" },
    h("div", { class: "dx-view dx-view-observed" }, h("span", { class: "dx-view-label" }, "observed"), outcomeChip(result, "output-dtype")),
    view("declared", result.declared_dtype, { observed, testid: "declared-dtype" }),
    view("documented", result.documented_dtype, { observed, testid: "documented-dtype" }),
    verdictBadge(result.shown_verdict ?? result.verdict, "verdict"),
  );
}

/**
 * What the tool chose because the user gave none (ProbeResult.supplied: the sample, default
 * kwargs, the policy, the shape, the input dtype), on one small line, so a user tells their
 * question from the tool's filling-in at a glance. Nothing when every part was given.
 */
export function suppliedLine(supplied) {
  if (!supplied?.length) return null;
  return h(
    "div",
    { class: "dx-muted dx-supplied", testid: "supplied" },
    "supplied by dtype-explorer: ",
    supplied.map((item, i) => [
      i ? "; " : null,
      h("span", { title: item.why || null, "data-part": item.part }, `${item.part} ${item.value}`),
    ]),
  );
}

function errorBox(result) {
  const error = result.error;
  if (error.where === "not supported here") {
    return h("div", { class: "dx-unsupported-box", testid: "unsupported" }, h("strong", {}, "not supported here: "), error.message);
  }
  const long = error.message.includes("\n");
  const message = h("pre", { class: "dx-error-message", testid: "error-message" }, error.message);
  return h(
    "div",
    { class: "dx-error-box", testid: "probe-error" },
    h("div", { class: "dx-error-head" }, h("strong", { testid: "error-type" }, error.type), error.where ? h("span", { class: "dx-muted" }, ` raised in ${error.where}`) : null),
    // The sentence the Python side made (ProbeResult.headline): Keras's own words first.
    h("div", { class: "dx-error-headline", testid: "error-headline" }, result.headline),
    long ? h("details", { class: "dx-section" }, h("summary", {}, "the whole message"), message) : message,
  );
}

/** The training step of mode="fit" (ProbeResult.fit): loss, optimizer, loss scaling, each
 *  gradient's dtype and inf/NaN, and Keras's warnings. */
export function renderFit(fit) {
  if (!fit) return null;
  const scaling = !fit.loss_scaling
    ? "off"
    : fit.loss_scale != null && fit.loss_scale_after != null
      ? `on: ${fit.loss_scale} before the step, ${fit.loss_scale_after} after`
      : "on";
  return h(
    "section",
    { class: "dx-section dx-fit", testid: "fit" },
    h("h4", {}, "training step"),
    h(
      "table",
      { class: "dx-vars" },
      h("tr", {}, h("th", {}, "loss"), h("td", { testid: "fit-loss" }, fit.loss, fit.loss_value != null ? ` = ${fmt(fit.loss_value)}` : "")),
      h("tr", {}, h("th", {}, "optimizer"), h("td", { testid: "fit-optimizer" }, h("code", {}, fit.optimizer))),
      h("tr", {}, h("th", {}, "loss scaling"), h("td", { testid: "fit-scaling" }, scaling)),
      fit.execution ? h("tr", {}, h("th", {}, "ran as"), h("td", {}, fit.execution)) : null,
    ),
    fit.gradients?.length
      ? h(
          "table",
          { class: "dx-vars", testid: "fit-gradients" },
          h("tr", {}, h("th", {}, "gradient of"), h("th", {}, "dtype"), h("th", {}, "variable"), h("th", {}, "inf/NaN")),
          fit.gradients.map((g) =>
            h(
              "tr",
              { testid: `gradient-${g.name}` },
              h("td", {}, h("code", {}, g.name)),
              h("td", {}, chip(g.dtype)),
              h("td", {}, chip(g.variable_dtype)),
              h("td", { class: g.nonfinite ? "dx-bad" : null }, g.nonfinite == null ? "not reported" : g.nonfinite ? `${g.nonfinite} values` : "none"),
            ),
          ),
        )
      : null,
    h(
      "div",
      { class: "dx-muted", testid: "fit-warnings" },
      fit.warnings?.length ? ["Keras warned: ", fit.warnings.join("; ")] : "Keras warned nothing during the step.",
    ),
  );
}

function fmt(x) {
  if (x == null) return "—";
  if (x === 0) return "0";
  return Math.abs(x) >= 1e4 || Math.abs(x) < 1e-3 ? x.toExponential(2) : x.toPrecision(4);
}

function numerics(n) {
  if (!n) return null;
  if (!n.output_count) return null; // nothing came out to look at (the call raised)
  const bad = n.nonfinite_from_finite > 0;
  const items = [
    h(
      "li",
      { class: bad ? "dx-bad" : null, testid: "numerics-overflow" },
      bad
        ? `${n.nonfinite_from_finite} of ${n.output_count} output values overflowed to inf/NaN from finite inputs`
        : `all ${n.output_count} output values are finite: no overflow, no NaN`,
    ),
    n.max_abs_output != null ? h("li", {}, `max |output| ${fmt(n.max_abs_output)}`) : null,
    n.max_rel_error != null
      ? h("li", { testid: "numerics-error" }, `error against the ${n.reference_dtype} run: ${fmt(n.max_rel_error)}`)
      : null,
    n.note ? h("li", { class: "dx-muted" }, n.note) : null,
  ];
  return h("section", { class: "dx-section" }, h("h4", {}, "numerics"), h("ul", { class: "dx-list" }, items));
}

function variables(vars) {
  const entries = Object.entries(vars ?? {});
  if (!entries.length) return null;
  return h(
    "section",
    { class: "dx-section" },
    h("h4", {}, "variables"),
    h(
      "table",
      { class: "dx-vars" },
      h("tr", {}, h("th", {}, "variable"), h("th", {}, "stored"), h("th", {}, "read in call()")),
      entries.map(([name, v]) =>
        h(
          "tr",
          {},
          h("td", {}, h("code", {}, name)),
          h("td", {}, chip(v.stored)),
          h("td", {}, v.read ? chip(v.read, { extra: v.read !== v.stored && "dx-chip-changed" }) : h("span", { class: "dx-muted" }, "not read")),
        ),
      ),
    ),
  );
}

function basis(lines) {
  if (!lines?.length) return null;
  return h(
    "section",
    { class: "dx-section" },
    h("h4", {}, "why (documented rules)"),
    h("ul", { class: "dx-list dx-basis", testid: "basis" }, lines.map((line) => h("li", {}, line))),
  );
}

/**
 * Every expectation side by side (ProbeResult.expectations): who says which dtype and why. The
 * one the verdict uses (`expected_by`) is marked, the ones naming another dtype
 * (`disagreeing`, computed in Python) are flagged, Keras's rules disagreeing is a banner, and
 * several outputs get a verdict each (`output_verdicts`).
 */
export function renderExpectations(result) {
  const expectations = result?.expectations ?? [];
  if (!expectations.length) return null;
  const odd = new Set(result.disagreeing ?? []);
  const outputs = result.output_verdicts?.length > 1 ? result.output_verdicts : [];
  return h(
    "details",
    { class: "dx-section dx-expectations", testid: "expectations", open: odd.size > 0 || Boolean(result.rules_disagreement) },
    h(
      "summary",
      {},
      "expectations",
      h(
        "span",
        { class: "dx-muted" },
        odd.size
          ? ` · ${odd.size} of ${expectations.length} name another dtype`
          : result.status !== "ok"
            ? ` · what ${expectations.length} rules expected (no answer to compare with: ${result.outcome ?? result.status})`
            : ` · all ${expectations.length} name the same dtype`,
      ),
    ),
    h(
      "table",
      { class: "dx-vars" },
      h("tr", {}, h("th", {}, "who"), h("th", {}, "dtype"), h("th", {}, "why")),
      expectations.map((x) =>
        h(
          "tr",
          { testid: `expectation-${x.source}`, "data-disagrees": odd.has(x.source) ? "true" : null, "data-verdict-uses": x.source === result.expected_by ? "true" : null },
          h("td", {}, x.name ?? x.source, x.source === result.expected_by ? h("strong", { class: "dx-uses" }, " (verdict)") : null),
          h("td", {}, x.dtype ? chip(x.dtype, { extra: odd.has(x.source) && "dx-chip-changed", title: odd.has(x.source) ? `${x.dtype}: not what the verdict expects` : x.dtype }) : h("span", { class: "dx-muted", testid: `expectation-said-${x.source}`, title: x.why ?? x.error ?? x.basis }, x.shown ?? (x.error ? "raises" : "—"))),
          h("td", { class: "dx-muted" }, x.why ?? x.error ?? x.basis),
        ),
      ),
    ),
    result.rules_disagreement ? h("div", { class: "dx-banner dx-banner-diverges", testid: "rules-disagree" }, result.rules_disagreement) : null,
    outputs.length
      ? h(
          "table",
          { class: "dx-vars", testid: "output-verdicts" },
          h("tr", {}, h("th", {}, "output"), h("th", {}, "observed"), h("th", {}, "verdict")),
          outputs.map((verdict, i) => h("tr", {}, h("td", {}, `#${i}`), h("td", {}, chip(result.output_dtypes?.[i])), h("td", {}, verdictBadge(verdict)))),
        )
      : null,
  );
}

/** Which Keras answered (`versions.keras`; Keras 2 names its tf_keras release). */
export function kerasLabel(result) {
  const v = result?.versions ?? {};
  if (v.tf_keras) return `Keras 2 (tf_keras ${v.tf_keras})`;
  return v.keras ? `Keras ${v.keras}` : null;
}

function timing(result, roundTripMs) {
  const parts = [];
  if (result.cached) parts.push("cached");
  if (result.timings?.total_ms != null) parts.push(`probe ${Math.round(result.timings.total_ms)} ms`);
  if (roundTripMs != null) parts.push(`answered in ${Math.round(roundTripMs)} ms`);
  return parts.length ? h("span", { class: "dx-muted dx-timing" }, parts.join(" · ")) : null;
}

/** The cast-path diagram, whose call box opens the trace list below it. */
function diagramWithTrace(backend, result, part) {
  const diagram = result.cast_path?.length || result.error ? h("div", { class: "dx-diagram" }, renderCastPath(result)) : null;
  const trace = renderTrace(backend, result, { part });
  const call = diagram?.querySelector(".dx-call");
  if (call && trace) {
    call.setAttribute("data-testid", "call-box");
    call.setAttribute("role", "button");
    call.append(s("title", {}, "open the ops inside the call"));
    call.addEventListener("click", () => {
      trace.open = !trace.open;
    });
    if (part?.steps?.[backend] != null || trace.querySelector(".dx-trace-first-nonfinite")) trace.open = true;
  }
  return [diagram, trace];
}

/** The card of one backend: pending, or its full answer. `part` is the trace_divergence trait. */
export function renderResultCard(backend, result, { roundTripMs, part } = {}) {
  const status = result?.status ?? "pending";
  const head = h(
    "header",
    { class: "dx-answer-head" },
    h("span", { class: "dx-backend" }, backend),
    result?.device && status !== "pending" ? h("span", { class: "dx-device" }, result.device) : null,
    status !== "pending" && kerasLabel(result)
      ? h("span", { class: "dx-device dx-keras", testid: "keras-version", title: result.versions.engine ? `engine ${result.versions.engine}` : "the installed Keras" }, kerasLabel(result))
      : null,
    status === "pending" ? h("span", { class: "dx-spinner", "aria-label": "pending" }) : null,
    status !== "pending" ? timing(result, roundTripMs) : null,
  );
  if (status === "pending") {
    return h(
      "article",
      { class: "dx-answer dx-pending", testid: `result-${backend}`, "data-status": "pending", "aria-busy": "true" },
      head,
      h("div", { class: "dx-pending-body" }, `probing on ${backend}…`),
    );
  }
  return h(
    "article",
    {
      class: ["dx-answer", `dx-status-${status}`],
      style: { "--dx-tone": status === "ok" ? verdictTone(result.shown_verdict ?? result.verdict) : kindColor("error") },
      testid: `result-${backend}`,
      "data-status": status,
      "data-verdict": result.shown_verdict ?? result.verdict,
      "data-probe-ms": result.timings?.total_ms,
      "data-round-trip-ms": roundTripMs,
    },
    head,
    suppliedLine(result.supplied),
    views(result),
    diagramWithTrace(backend, result, part),
    result.error ? errorBox(result) : null,
    renderQuantization(result.quantization),
    renderFit(result.fit),
    result.cast_path?.length
      ? h("details", { class: "dx-section" }, h("summary", {}, "cast path as text"), renderCastSteps(result))
      : null,
    renderExpectations(result),
    numerics(result.numerics),
    variables(result.variables),
    basis(result.basis),
  );
}
