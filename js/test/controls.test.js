import { beforeEach, describe, expect, it, vi } from "vitest";
import { Controls, ENGINE_HELP, PRECISION_HELP, QUANTIZE_HELP, filterCatalog, parseJson, reengine, retarget, shapeCount } from "../src/controls.js";
import { byTestId, fixture } from "./helpers.js";

const state = fixture("widget-state");

function mount(shown = state) {
  const sent = [];
  const controls = new Controls({ onRequest: (r) => sent.push(r) });
  document.body.replaceChildren(controls.el);
  controls.update(shown);
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
    // one shape syntax everywhere (dtype_explorer/shapes.py reads it in the kernel)
    for (const one of ["2x8x3", "(2, 8, 3)", "[2,8,3]", "(8,)"]) expect(shapeCount(one)).toBe(1);
    for (const two of ["2x4, 2x4", "(2, 4), (2, 4)", "[[2, 4], [2, 4]]", "[2, 4], [2, 4]"]) expect(shapeCount(two)).toBe(2);
    expect(shapeCount("2x")).toBeNull();
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

  it("offers the installed Keras and every created engine, and sends the one chosen", () => {
    // widget-state.json was published by a real DtypeExplorer with keras==3.11.3 created
    const { el, sent } = mount();
    const select = byTestId(el, "engine");
    const options = [...select.querySelectorAll("option")];
    expect(options.map((o) => o.textContent)).toEqual(state.engines.map((c) => c.label));
    expect(options[0].value).toBe("");
    expect(state.engines[0].engine).toBeNull();
    expect(options[0].textContent).toBe(`installed Keras ${state.engines[0].keras}`);
    expect(options.map((o) => o.value)).toContain("keras==3.11.3");
    expect(select.value).toBe("");
    change(select, "keras==3.11.3");
    expect(sent.at(-1).engine).toBe("keras==3.11.3");
    expect(sent.at(-1).backends).toEqual(state.request.backends);
    change(select, "");
    expect(sent.at(-1).engine).toBeNull();
  });

  it("says how to create an engine, and never asks the kernel to", () => {
    const { el } = mount();
    expect(ENGINE_HELP).toContain('dx.engines.create("keras==3.11.3")');
    expect(byTestId(el, "engine").title).toBe(ENGINE_HELP);
    expect(byTestId(el, "engine-help").title).toBe(ENGINE_HELP);
  });

  it("keeps a Keras 2 engine to the backends it runs on", () => {
    const keras2 = { engine: "tf_keras==2.21.0", keras: "2.21.0", label: "Keras 2, tf_keras 2.21.0 (engine)", backends: ["tensorflow"] };
    const all = { ...state, engines: [...state.engines, keras2], request: { ...state.request, backends: state.available_backends } };
    const { el, sent } = mount(all);
    change(byTestId(el, "engine"), keras2.engine);
    expect(sent.at(-1)).toMatchObject({ engine: keras2.engine, backends: ["tensorflow"] });
    for (const b of state.available_backends) expect(byTestId(el, `backend-${b}`).disabled).toBe(b !== "tensorflow");
    change(byTestId(el, "engine"), "");
    expect(sent.at(-1).engine).toBeNull();
    for (const b of state.available_backends) expect(byTestId(el, `backend-${b}`).disabled).toBe(false);
  });

  it("chooses the engine's own backends when none of the chosen ones fit", () => {
    const engines = [{ engine: null, backends: null }, { engine: "tf_keras==2.21.0", backends: ["tensorflow"] }];
    const request = { engine: null, backends: ["jax"] };
    expect(reengine(request, "tf_keras==2.21.0", engines, ["jax", "tensorflow"]).backends).toEqual(["tensorflow"]);
    expect(reengine(request, null, engines, ["jax", "tensorflow"])).toEqual({ engine: null, backends: ["jax"] });
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

describe("matmul precision picker", () => {
  it("offers the kernel's precisions after 'as set' and sends the one chosen", () => {
    const { el, sent } = mount();
    const select = byTestId(el, "precision");
    expect([...select.options].map((o) => o.value)).toEqual(["", ...state.precisions]);
    expect(select.value).toBe("");
    expect(select.title).toBe(PRECISION_HELP);
    change(select, "highest");
    expect(sent.at(-1).precision).toBe("highest");
    change(select, "");
    expect(sent.at(-1).precision).toBeNull();
  });

  it("shows the precision of the request it was given", () => {
    const { el } = mount({ ...state, request: { ...state.request, precision: "tf32" } });
    expect(byTestId(el, "precision").value).toBe("tf32");
  });
});

describe("quantize picker", () => {
  it("offers 'none' then the kernel's quantization modes and sends the one chosen", () => {
    const { el, sent } = mount();
    const select = byTestId(el, "quantize");
    expect(state.quantize_modes).toEqual(expect.arrayContaining(["int8", "int4", "float8"]));
    expect([...select.options].map((o) => o.value)).toEqual(["", ...state.quantize_modes]);
    expect(select.options[0].textContent).toBe("none");
    expect(select.value).toBe("");
    expect(select.title).toBe(QUANTIZE_HELP);
    change(select, "int8");
    expect(sent.at(-1).quantize).toBe("int8");
    expect(sent.at(-1).target).toBe(state.request.target);
    change(select, "");
    expect(sent.at(-1).quantize).toBeNull();
  });

  it("shows the quantize mode of the request it was given", () => {
    const { el } = mount({ ...state, request: { ...state.request, quantize: "float8" } });
    expect(byTestId(el, "quantize").value).toBe("float8");
  });
});
