import { describe, expect, it } from "vitest";
import { App } from "../src/app.js";
import { CopyCode } from "../src/copycode.js";
import { byTestId, fixture } from "./helpers.js";

const state = fixture("widget-state");
const conv = fixture("conv1d-uint8");

function mount(options = {}) {
  const el = document.createElement("div");
  document.body.replaceChildren(el);
  const app = new App(el, { send: () => {}, ...options });
  const base = { ...state, results: {}, verdict: "", promotion: {}, error: "", timings: {}, code: {} };
  app.update(base);
  return { app, el, base };
}

const answered = (base) => ({ ...base, results: conv.results, verdict: conv.verdict, comparison: conv.comparison, code: conv.code });

describe("copy as code", () => {
  it("the fixture's code is the kernel's: the dx call and a raw-Keras script of the question", () => {
    expect(conv.code.dx).toContain("dx.probe(");
    expect(conv.code.dx).toContain("'Conv1D'");
    expect(conv.code.script).toContain('os.environ["KERAS_BACKEND"]');
    expect(conv.code.script).toContain("keras.layers.Conv1D(");
    expect(conv.code.clipboard).toContain(conv.code.dx);
    expect(conv.code.clipboard).toContain(conv.code.script);
  });

  it("is disabled until an answer brings code, then copies it to the clipboard", async () => {
    const written = [];
    const { app, el, base } = mount({ clipboard: { writeText: async (text) => written.push(text) } });
    const button = byTestId(el, "copy-code");
    expect(button.disabled).toBe(true);
    app.update(answered(base));
    expect(button.disabled).toBe(false);
    await app.copyCode.copy();
    expect(written).toEqual([conv.code.clipboard]);
    expect(byTestId(el, "copy-said").textContent).toContain("copied");
    expect(byTestId(el, "copy-text")).toBeNull();
  });

  it("without a clipboard, shows the code in a text area to copy from", async () => {
    const { app, el, base } = mount({ clipboard: null });
    app.update(answered(base));
    byTestId(el, "copy-code").click();
    await new Promise((resolve) => setTimeout(resolve, 0));
    const area = byTestId(el, "copy-text");
    expect(area).not.toBeNull();
    expect(area.value).toBe(conv.code.clipboard);
    expect(byTestId(el, "copy-fallback").textContent).toContain("no clipboard here");
  });

  it("where the clipboard refuses, shows the text area and says why", async () => {
    const copy = new CopyCode({ clipboard: { writeText: async () => { throw new Error("denied"); } } });
    copy.update(conv.code);
    await copy.copy();
    expect(copy.fallback.querySelector("textarea").value).toBe(conv.code.clipboard);
    expect(copy.said.textContent).toContain("the clipboard refused (denied)");
  });

  it("a new answer clears what the last copy said; no code disables the button again", async () => {
    const copy = new CopyCode({ clipboard: null });
    copy.update(conv.code);
    await copy.copy();
    expect(copy.fallback.children.length).toBeGreaterThan(0);
    copy.update({ ...conv.code, clipboard: "other" });
    expect(copy.fallback.children.length).toBe(0);
    copy.update({});
    expect(copy.button.disabled).toBe(true);
  });

  it("names what to fill in first", async () => {
    const written = [];
    const copy = new CopyCode({ clipboard: { writeText: async (t) => written.push(t) } });
    copy.update({ ...conv.code, fill_in: ["MyLayer: your layer class"] });
    await copy.copy();
    expect(copy.said.textContent).toContain("fill in first: MyLayer: your layer class");
  });
});
