import { describe, expect, it } from "vitest";
import { App } from "../src/app.js";
import { REQUEST_KEYS } from "../src/contract.js";
import { byTestId, fixture } from "./helpers.js";

const state = fixture("widget-state");
const conv = fixture("conv1d-uint8");

function mount() {
  const sent = [];
  const el = document.createElement("div");
  document.body.replaceChildren(el);
  let clock = 1000;
  const app = new App(el, { send: (r) => sent.push(r), now: () => clock });
  app.update({ ...state, results: {}, verdict: "", promotion: {}, error: "", timings: {} });
  return { app, el, sent, tick: (ms) => (clock += ms) };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

describe("explorer app", () => {
  it("numbers each request it sends", () => {
    const { el, sent } = mount();
    const select = byTestId(el, "target");
    select.value = "Conv1D";
    select.dispatchEvent(new Event("change"));
    expect(sent).toHaveLength(1);
    expect(sent[0].nonce).toBeGreaterThan(state.request_id);
    // the request holds the contract's keys (widget_contract.json "request"), and only them
    expect(Object.keys(sent[0]).sort()).toEqual([...REQUEST_KEYS].sort());
  });

  it("shows pending backends, then each answer with the divergence", () => {
    const { app, el, sent, tick } = mount();
    const select = byTestId(el, "target");
    select.value = "Conv1D";
    select.dispatchEvent(new Event("change"));
    const nonce = sent[0].nonce;
    const backends = Object.keys(conv.results);
    const pending = Object.fromEntries(backends.map((b) => [b, { status: "pending" }]));
    const base = { ...state, request: sent[0], request_id: nonce, error: "", promotion: {}, timings: {} };
    app.update({ ...base, results: pending, verdict: "" });
    expect(el.querySelectorAll('[data-status="pending"]')).toHaveLength(backends.length);
    expect(byTestId(el, "status").textContent).toContain("probing on");
    tick(25);
    app.update({ ...base, results: conv.results, verdict: conv.verdict, promotion: conv.promotion });
    expect(el.querySelectorAll('[data-status="pending"]')).toHaveLength(0);
    expect(byTestId(el, "divergence")).not.toBeNull();
    expect(byTestId(byTestId(el, "result-jax"), "output-dtype").textContent).toBe(conv.results.jax.output_dtype);
    expect(byTestId(el, "promotion")).not.toBeNull();
    expect(byTestId(el, "status").textContent).toBe("done");
  });

  it("times a change to its rendered answer", async () => {
    const { app, el, sent, tick } = mount();
    byTestId(el, "run").click();
    const nonce = sent[0].nonce;
    const base = { ...state, request: state.request, request_id: nonce, error: "", promotion: {}, timings: {}, verdict: "" };
    tick(5);
    app.update({ ...base, results: { jax: { status: "pending" } } });
    tick(40);
    app.update({ ...base, results: { jax: conv.results.jax } });
    await settle();
    expect(Number(byTestId(el, "result-jax").dataset.latencyMs)).toBe(45);
    expect(Number(byTestId(el, "explorer").dataset.ackMs)).toBe(5);
  });

  it("ignores answers to older requests when timing", async () => {
    const { app, el, sent } = mount();
    byTestId(el, "run").click();
    const base = { ...state, request_id: sent[0].nonce - 1, error: "", promotion: {}, timings: {}, verdict: "" };
    app.update({ ...base, results: { jax: conv.results.jax } });
    await settle();
    expect(byTestId(el, "result-jax").dataset.latencyMs).toBeUndefined();
  });

  it("shows the Python side's validation message", () => {
    const { app, el } = mount();
    app.update({ ...state, results: {}, error: "kwargs is not valid JSON", promotion: {}, timings: {}, verdict: "" });
    expect(byTestId(el, "error").textContent).toContain("kwargs is not valid JSON");
    app.update({ ...state, results: {}, error: "", promotion: {}, timings: {}, verdict: "" });
    expect(byTestId(el, "error")).toBeNull();
  });
});
