import { describe, expect, it } from "vitest";
import { castPathModel, layout, renderCastPath, renderCastSteps, wrapLabel } from "../src/castpath.js";
import { fixture } from "./helpers.js";

const dense = fixture("dense-float64-mixed").results.jax;
const conv = fixture("conv1d-uint8").results;
const add = fixture("add-int8-float16").results.jax;

describe("cast-path model", () => {
  it("makes a lane per input and per variable", () => {
    const model = castPathModel(dense);
    const variables = Object.keys(dense.variables);
    expect(model.lanes.map((l) => l.label)).toEqual(["input", ...variables]);
    const input = model.lanes[0];
    expect(input.nodes.map((n) => n.caption)).toEqual(["input", "converted", "autocast"]);
    expect(input.nodes.map((n) => n.dtype)).toEqual(
      dense.cast_path.filter((s) => ["input", "converted", "autocast"].includes(s.stage)).map((s) => s.dtype),
    );
  });

  it("labels each edge with the step's note and marks dtype changes", () => {
    const model = castPathModel(dense);
    const autocast = dense.cast_path.find((s) => s.stage === "autocast");
    const edge = model.lanes[0].edges.at(-1);
    expect(edge.note).toBe(autocast.note);
    expect(edge.changed).toBe(autocast.changed);
    const [name, variable] = Object.entries(dense.variables)[0];
    const lane = model.lanes.find((l) => l.label === name);
    expect(lane.nodes.map((n) => n.dtype)).toEqual([variable.stored, variable.read]);
    expect(lane.edges[0].changed).toBe(variable.stored !== variable.read);
  });

  it("numbers the inputs of a multi-input op", () => {
    const model = castPathModel(add);
    expect(model.lanes.map((l) => l.label)).toEqual(["input 0", "input 1"]);
    expect(model.outputs.map((n) => n.dtype)).toEqual([add.output_dtype]);
  });

  it("ends in the error where the call raised", () => {
    const failed = Object.values(conv).find((r) => r.status === "error");
    const model = castPathModel(failed);
    expect(model.outputs).toHaveLength(1);
    expect(model.outputs[0]).toMatchObject({ error: true, dtype: failed.error.type, caption: "raised" });
  });

  it("lays out columns left to right without overlap", () => {
    const geo = layout(castPathModel(dense));
    const xs = Object.keys(geo.x).map(Number).sort((a, b) => a - b).map((c) => [geo.x[c], geo.colWidth[c]]);
    for (let i = 1; i < xs.length; i++) expect(xs[i][0]).toBeGreaterThan(xs[i - 1][0] + xs[i - 1][1]);
    expect(geo.width).toBeGreaterThan(xs.at(-1)[0]);
    expect(geo.laneY).toHaveLength(castPathModel(dense).lanes.length);
  });
});

describe("a target run inside a model", () => {
  const inModel = fixture("dense-float64-model").results.jax;

  it("puts Model.__call__'s conversion in a column of its own, between converted and autocast", () => {
    const model = castPathModel(inModel);
    const input = model.lanes.find((lane) => lane.kind === "input");
    expect(input.nodes.map((n) => n.caption)).toContain("model");
    const geo = layout(model);
    const cols = input.nodes.map((n) => n.col);
    const xs = cols.map((c) => geo.x[c]);
    expect(xs.every((x) => Number.isFinite(x))).toBe(true);
    expect([...xs].sort((a, b) => a - b)).toEqual(xs);
    const svg = renderCastPath(inModel);
    expect(svg.querySelector('[data-stage="model"]')).not.toBeNull();
  });
});

describe("cast-path SVG", () => {
  it("draws chips, red edges where the dtype changed, and the notes", () => {
    const svg = renderCastPath(dense);
    expect(svg.tagName).toBe("svg");
    expect(svg.getAttribute("data-testid")).toBe("cast-path");
    const nodes = [...svg.querySelectorAll(".dx-node")];
    const output = nodes.find((n) => n.dataset.stage === "output");
    expect(output.dataset.dtype).toBe(dense.output_dtype);
    const changed = [...svg.querySelectorAll(".dx-edge.dx-changed")].map((e) => e.dataset.note);
    for (const step of dense.cast_path.filter((s) => s.changed && s.stage !== "input")) {
      expect(changed).toContain(step.note);
    }
    const kept = [...svg.querySelectorAll(".dx-edge:not(.dx-changed)")].map((e) => e.dataset.note);
    for (const step of dense.cast_path.filter((s) => !s.changed && s.stage === "autocast")) {
      expect(kept).toContain(step.note);
    }
    expect(svg.querySelector(".dx-call-text").textContent).toBe("Dense");
  });

  it("shows the raised error type in place of the output", () => {
    const failed = Object.values(conv).find((r) => r.status === "error");
    const svg = renderCastPath(failed);
    expect(svg.querySelector(".dx-call-failed")).not.toBeNull();
    const raised = svg.querySelector('.dx-node[data-stage="raised"]');
    expect(raised.dataset.dtype).toBe(failed.error.type);
    expect(raised.classList.contains("dx-k-error")).toBe(true);
  });

  it("gives unique arrow markers to each diagram", () => {
    const a = renderCastPath(dense).querySelector("marker").id;
    const b = renderCastPath(dense).querySelector("marker").id;
    expect(a).not.toBe(b);
  });

  it("lists the steps as text too", () => {
    const list = renderCastSteps(dense);
    expect(list.querySelectorAll("li")).toHaveLength(dense.cast_path.length);
    expect(list.textContent).toContain(dense.cast_path[2].note);
  });
});

describe("edge labels", () => {
  it("puts the dtype change on its own line and wraps the reason", () => {
    const lines = wrapLabel("float64 -> float32: float input autocast to the layer's input dtype");
    expect(lines[0]).toBe("float64 -> float32:");
    expect(lines.slice(1).join(" ")).toBe("float input autocast to the layer's input dtype");
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(22);
  });

  it("caps the number of lines with an ellipsis", () => {
    const lines = wrapLabel("word ".repeat(60));
    expect(lines).toHaveLength(4);
    expect(lines[3].endsWith("…")).toBe(true);
  });

  it("draws nothing for an empty note", () => {
    expect(wrapLabel("")).toEqual([]);
  });
});
