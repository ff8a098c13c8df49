import { beforeEach, describe, expect, it, vi } from "vitest";
import { Controls, filterCatalog, parseJson, retarget, shapeCount } from "../src/controls.js";
import { byTestId, fixture } from "./helpers.js";

const state = fixture("widget-state");

function mount() {
  const sent = [];
  const controls = new Controls({ onRequest: (r) => sent.push(r) });
  document.body.replaceChildren(controls.el);
  controls.update(state);
  return { controls, sent, el: controls.el };
}

function change(el, value) {
  el.value = value;
  el.dispatchEvent(new Event("change", { bubbles: true }));
}

describe("control helpers", () => {
  it("parses JSON without evaluating anything", () => {
    expect(parseJson('{"units": 4}')).toEqual({ ok: true, value: { units: 4 } });
    expect(parseJson("{units: 4}").ok).toBe(false);
    expect(parseJson("alert(1)").ok).toBe(false);
  });

  it("counts the inputs a shape text describes", () => {
    expect(shapeCount("[[2, 4], [2, 4]]")).toBe(2);
    expect(shapeCount("[2, 4]")).toBe(1);
    expect(shapeCount("[[2")).toBeNull();
  });

  it("filters targets by name or group, case-insensitively", () => {
    const found = filterCatalog(state.catalog, "conv1d");
    expect(found.flatMap(([, names]) => names)).toContain("Conv1D");
    expect(found.flatMap(([, names]) => names)).not.toContain("Dense");
    const group = filterCatalog(state.catalog, "pooling");
    expect(group.map(([g]) => g)).toContain("pooling");
  });

  it("resets kwargs and shapes on a new target but keeps a fitting input dtype", () => {
    const request = { ...state.request, input_dtypes: ["uint8"] };
    const next = retarget(request, "Conv1D", state.defaults);
    expect(JSON.parse(next.kwargs)).toEqual(state.defaults.Conv1D.kwargs);
    expect(JSON.parse(next.shape)).toEqual(state.defaults.Conv1D.shapes);
    expect(next.input_dtypes).toEqual(["uint8"]);
    const embedding = retarget(request, "Embedding", state.defaults);
    expect(embedding.input_dtypes).toEqual(state.defaults.Embedding.input_dtypes);
  });
});

describe("control panel", () => {
  beforeEach(() => vi.useRealTimers());

  it("offers every catalog target in groups", () => {
    const { el } = mount();
    const select = byTestId(el, "target");
    const groups = [...select.querySelectorAll("optgroup")].map((g) => g.label);
    expect(groups).toEqual(Object.keys(state.catalog));
    expect(select.value).toBe(state.request.target);
    expect(select.querySelectorAll("option")).toHaveLength(Object.values(state.catalog).flat().length);
  });

  it("sends a request with the new target's defaults", () => {
    const { el, sent } = mount();
    change(byTestId(el, "target"), "Conv1D");
    expect(sent).toHaveLength(1);
    expect(sent[0].target).toBe("Conv1D");
    expect(JSON.parse(sent[0].kwargs)).toEqual(state.defaults.Conv1D.kwargs);
    expect(byTestId(el, "kwargs").value).toBe(sent[0].kwargs);
    expect(byTestId(el, "kwargs-hint").textContent).toContain(JSON.stringify(state.defaults.Conv1D.kwargs));
    expect("nonce" in sent[0]).toBe(false);
  });

  it("sends input dtype, preset, policy and backend changes", () => {
    const { el, sent } = mount();
    change(byTestId(el, "input-dtype-0"), "uint8");
    change(byTestId(el, "preset"), "image");
    change(byTestId(el, "policy"), "mixed_bfloat16");
    const box = byTestId(el, `backend-${state.available_backends[0]}`);
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change"));
    expect(sent.map((r) => r.input_dtypes[0])).toEqual(["uint8", "uint8", "uint8", "uint8"]);
    expect(sent.at(-1).preset).toBe("image");
    expect(sent.at(-1).policy).toBe("mixed_bfloat16");
    expect(sent.at(-1).backends).not.toContain(state.available_backends[0]);
  });

  it("offers the modes the kernel publishes and sends the one chosen", () => {
    const { el, sent } = mount();
    const select = byTestId(el, "mode");
    expect([...select.querySelectorAll("option")].map((o) => o.value)).toEqual(state.modes);
    expect(select.value).toBe(state.request.mode);
    change(select, "predict");
    expect(sent.at(-1).mode).toBe("predict");
  });

  it("searches targets and picks the first match on Enter", () => {
    const { el, sent } = mount();
    const search = byTestId(el, "target-search");
    search.value = "conv1dtr";
    search.dispatchEvent(new Event("input"));
    const shown = [...byTestId(el, "target").querySelectorAll("option")].map((o) => o.value);
    expect(shown).toContain("Conv1DTranspose");
    expect(shown).not.toContain("Conv2D");
    search.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    expect(sent.at(-1).target).toBe("Conv1DTranspose");
  });

  it("hints at malformed JSON while typing and still lets Python judge it", () => {
    const { el, sent } = mount();
    const kwargs = byTestId(el, "kwargs");
    kwargs.value = '{"units": ';
    kwargs.dispatchEvent(new Event("input"));
    expect(byTestId(el, "kwargs-hint").className).toContain("dx-hint-bad");
    expect(sent).toHaveLength(0);
    kwargs.dispatchEvent(new Event("change"));
    expect(sent.at(-1).kwargs).toBe('{"units": ');
  });

  it("sends valid JSON once typing pauses, and only once", async () => {
    vi.useFakeTimers();
    const { el, sent } = mount();
    const kwargs = byTestId(el, "kwargs");
    kwargs.value = '{"units": 7}';
    kwargs.dispatchEvent(new Event("input"));
    expect(sent).toHaveLength(0);
    vi.advanceTimersByTime(1000);
    expect(sent).toHaveLength(1);
    kwargs.dispatchEvent(new Event("change"));
    expect(sent).toHaveLength(1);
  });

  it("makes one dtype picker per input of the shape", () => {
    const { el, sent } = mount();
    change(byTestId(el, "target"), "ops.add");
    const count = state.defaults["ops.add"].shapes.length;
    expect(el.querySelectorAll('[data-testid^="input-dtype-"]')).toHaveLength(count);
    change(byTestId(el, `input-dtype-${count - 1}`), "float16");
    expect(sent.at(-1).input_dtypes).toHaveLength(count);
    expect(sent.at(-1).input_dtypes.at(-1)).toBe("float16");
  });

  it("re-runs the same request on demand", () => {
    const { el, sent } = mount();
    byTestId(el, "run").click();
    byTestId(el, "run").click();
    expect(sent).toHaveLength(2);
    expect(sent[0]).toEqual(sent[1]);
  });
});
