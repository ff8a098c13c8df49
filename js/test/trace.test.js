import { describe, expect, it } from "vitest";
import { App } from "../src/app.js";
import { renderResultCard } from "../src/result.js";
import { callSteps, renderTrace, renderTracePart } from "../src/trace.js";
import { allByTestId, byTestId, fixture } from "./helpers.js";

const conv = fixture("conv1d-uint8");
const softmax = fixture("softmax-large-mixed").results.jax;
const part = conv.trace_divergence;

describe("op trace", () => {
  it("lists the call's ops (build steps left out) with their source lines", () => {
    const jax = conv.results.jax;
    const list = renderTrace("jax", jax);
    const items = allByTestId(list, "trace-step");
    expect(items.map((li) => li.dataset.op)).toEqual(callSteps(jax).map((s) => s.op));
    expect(items.length).toBeLessThan(jax.trace.length);
    const convItem = items.find((li) => li.dataset.op === "ops.nn.conv");
    const step = jax.trace.find((s) => s.op === "ops.nn.conv");
    const link = byTestId(convItem, "trace-source");
    expect(link.tagName).toBe("A");
    expect(link.getAttribute("href")).toBe(step.source.url);
    expect(link.getAttribute("href")).toMatch(/keras-team\/keras\/blob\/v[\d.]+\/keras\/src\/layers\/convolutional\/conv1d\.py#L\d+$/);
    expect(link.getAttribute("target")).toBe("_blank");
  });

  it("colours the steps that change a dtype like changed cast-path edges", () => {
    const items = allByTestId(renderTrace("jax", conv.results.jax), "trace-step");
    const changed = items.filter((li) => li.classList.contains("dx-changed")).map((li) => li.dataset.op);
    const expected = callSteps(conv.results.jax)
      .filter((s) => ["promoted", "cast", "changed"].includes(s.change) || s.conversions?.length)
      .map((s) => s.op);
    expect(changed).toEqual(expected);
    expect(changed).toContain("ops.nn.conv");
  });

  it("makes the first non-finite step stand out, and opens the trace for it", () => {
    const first = softmax.trace.find((s) => s.first_nonfinite);
    expect(first).toBeDefined();
    const card = renderResultCard("jax", softmax);
    const marked = card.querySelectorAll(".dx-trace-first-nonfinite");
    expect(marked).toHaveLength(1);
    expect(marked[0].dataset.index).toBe(String(first.index));
    expect(byTestId(marked[0], "trace-flag").textContent).toContain("first inf/NaN");
    expect(byTestId(card, "trace").open).toBe(true);
    expect(byTestId(card, "trace").querySelector("summary").textContent).toContain(`first inf/NaN at op ${callSteps(softmax).indexOf(first) + 1}, ${first.op}`);
  });

  it("opens from the call box of the cast path", () => {
    const card = renderResultCard("jax", conv.results.jax);
    const trace = byTestId(card, "trace");
    expect(trace.open).toBe(false);
    byTestId(card, "call-box").dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(trace.open).toBe(true);
  });

  it("marks where each backend's trace parts, as the Python side published it", () => {
    expect(part.op).toBe("ops.nn.conv");
    for (const backend of Object.keys(conv.results)) {
      const card = renderResultCard(backend, conv.results[backend], { part });
      const marked = allByTestId(card, "trace-part");
      expect(marked).toHaveLength(1);
      const li = marked[0].closest("li");
      expect(li.dataset.op).toBe(part.op);
      expect(li.dataset.index).toBe(String(part.steps[backend]));
      expect(byTestId(card, "trace").open).toBe(true);
    }
    const banner = renderTracePart(part);
    expect(banner.textContent).toBe(part.message); // the Python side's sentence, as it is
    expect(banner.textContent).toContain("first differ at ops.nn.conv");
    expect(banner.textContent).not.toMatch(/\babsent\b/);
    expect(renderTracePart({})).toBeNull();
  });

  it("shows the trace divergence in the app from the trait", () => {
    const el = document.createElement("div");
    document.body.replaceChildren(el);
    const app = new App(el, { send: () => {}, now: () => 0 });
    const state = fixture("widget-state");
    app.update({ ...state, results: conv.results, verdict: conv.verdict, trace_divergence: part, promotion: {}, error: "", timings: {} });
    expect(byTestId(el, "trace-divergence").textContent).toContain("ops.nn.conv");
    expect(allByTestId(el, "trace-part")).toHaveLength(Object.keys(conv.results).length);
  });
});
