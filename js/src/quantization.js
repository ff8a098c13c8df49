// A quantized layer's answer (ProbeResult.quantization): its summary, the variables it stores
// and its compute path, all computed on the record (records/_quantize_layer.py); laid out here.
import { h } from "./dom.js";
import { chip } from "./dtype.js";

/** The quantization section of a result card, or null for a float layer. */
export function renderQuantization(q) {
  if (!q) return null;
  const rows = (q.variables ?? []).map((v) =>
    h(
      "tr",
      {},
      h("td", {}, h("code", {}, v.name)),
      h("td", {}, chip(v.dtype)),
      h("td", {}, (v.shape ?? []).join("x")),
      h("td", {}, String(v.bytes)),
      h("td", { class: "dx-muted" }, v.packed ? "int4 packed" : ""),
    ),
  );
  return h(
    "section",
    { class: "dx-section", testid: "quantization", "data-mode": q.mode },
    h("h4", {}, "quantization"),
    h("div", { class: "dx-muted", testid: "quantization-summary" }, q.summary),
    rows.length
      ? h(
          "table",
          { class: "dx-vars" },
          h("tr", {}, ["variable", "dtype", "shape", "bytes", ""].map((c) => h("th", {}, c))),
          rows,
        )
      : null,
    q.steps?.length
      ? h("ol", { class: "dx-list", testid: "quantization-steps" }, q.steps.map((step) => h("li", {}, step)))
      : null,
  );
}
