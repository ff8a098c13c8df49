// The cast path of one probe result, drawn as an SVG diagram.
//
// Each input is a lane: input -> [asked] -> converted -> [model] -> autocast -> (call), the model column
// when the target ran inside a functional model (Model.__call__'s conversion). Each variable is a lane:
// stored -> read in call -> (call). The call box feeds the output(s), or the error it raised.
// Edges carry the step's note (what happened and why); an edge is red where the dtype changed.
import { h, s } from "./dom.js";
import { dtypeKind } from "./dtype.js";
import { kindColor } from "./palette.js";

const COLUMN = { input: 0, asked: 0.5, converted: 1, model: 1.5, autocast: 2 };
const CALL = 3;
const OUTPUT = 4;
const CHIP_H = 24;
const CAPTION_H = 15;
const LINE_H = 12;
const LANE_GAP = 12;
const LABEL_CHARS = 22;
const LABEL_LINES = 4;
const PAD = 10;

let uid = 0;

/** Width of a chip holding `text` (monospace, 11px). */
export function chipWidth(text) {
  return Math.max(58, Math.ceil(String(text).length * 6.8 + 18));
}

/** Wrap a note into at most LABEL_LINES lines of about LABEL_CHARS characters. */
export function wrapLabel(note, width = LABEL_CHARS, maxLines = LABEL_LINES) {
  if (!note) return [];
  const lines = [];
  // "float64 -> float32: why" reads best with the dtype change on its own line.
  const cut = note.indexOf(": ");
  const parts = cut > 0 && cut <= width + 8 ? [note.slice(0, cut + 1), note.slice(cut + 2)] : [note];
  for (const part of parts) {
    let line = "";
    for (const word of part.split(/\s+/).filter(Boolean)) {
      if (line && (line + " " + word).length > width) {
        lines.push(line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    if (line) lines.push(line);
  }
  if (lines.length > maxLines) {
    const kept = lines.slice(0, maxLines);
    kept[maxLines - 1] = kept[maxLines - 1].replace(/.{0,1}$/, "…");
    return kept;
  }
  return lines;
}

function labelWidth(lines) {
  return lines.reduce((w, line) => Math.max(w, line.length * 5.9), 0);
}

/** The lanes, nodes and edges of a result's cast path (no geometry). */
export function castPathModel(result) {
  const inputs = new Map();
  const variables = new Map();
  const outputs = [];
  for (const step of result.cast_path ?? []) {
    if (step.stage === "variables") {
      const key = step.name ?? `variable ${variables.size}`;
      if (!variables.has(key)) variables.set(key, []);
      variables.get(key).push(step);
    } else if (step.stage === "output") outputs.push(step);
    else {
      const key = step.index ?? 0;
      if (!inputs.has(key)) inputs.set(key, []);
      inputs.get(key).push(step);
    }
  }
  const lanes = [];
  const many = inputs.size > 1;
  for (const [index, steps] of [...inputs].sort((a, b) => a[0] - b[0])) {
    lanes.push({
      kind: "input",
      label: many ? `input ${index}` : "input",
      nodes: steps.map((step) => ({ col: COLUMN[step.stage], dtype: step.dtype, caption: step.stage, step })),
    });
  }
  for (const [name, steps] of variables) {
    const stored = result.variables?.[name]?.stored;
    const nodes = [];
    if (steps.length === 1 && stored) nodes.push({ col: COLUMN.converted, dtype: stored, caption: "stored" });
    steps.slice(-2).forEach((step, i, kept) => {
      const read = i === kept.length - 1;
      nodes.push({ col: read ? COLUMN.autocast : COLUMN.converted, dtype: step.dtype, caption: read ? "read in call" : "stored", step });
    });
    lanes.push({ kind: "variable", label: name, nodes });
  }
  for (const lane of lanes) {
    lane.edges = lane.nodes.slice(1).map((node, i) => edge(lane.nodes[i], node, node.step?.note ?? ""));
  }
  const failed = result.status !== "ok" && result.status !== "pending";
  const ends = failed
    ? [{ col: OUTPUT, dtype: result.error?.type ?? result.status, caption: "raised", error: true }]
    : outputs
        .sort((a, b) => (a.index ?? 0) - (b.index ?? 0))
        .map((step) => ({
          col: OUTPUT,
          dtype: step.dtype,
          caption: outputs.length > 1 ? `output ${step.index ?? 0}` : "output",
          step,
        }));
  const outEdges = ends.map((node) =>
    node.error
      ? { label: wrapLabel(result.error?.where ? `raised in ${result.error.where}` : "raised"), note: "raised", changed: true, error: true }
      : { label: wrapLabel(node.step.note), note: node.step.note ?? "", changed: Boolean(node.step.changed) },
  );
  return { lanes, outputs: ends, outEdges, target: result.spec?.target ?? "call" };
}

function edge(from, to, note) {
  return { from, to, note, label: wrapLabel(note), changed: Boolean(to.step?.changed) || from.dtype !== to.dtype };
}

/** Column x positions and lane y positions for a cast-path model. */
export function layout(model) {
  const used = new Set([CALL, OUTPUT]);
  const colWidth = {};
  const gapAfter = {};
  const grow = (col, w) => (colWidth[col] = Math.max(colWidth[col] ?? 0, w));
  for (const lane of model.lanes) for (const node of lane.nodes) used.add(node.col), grow(node.col, chipWidth(node.dtype));
  grow(CALL, Math.max(84, model.target.length * 7.4 + 28));
  for (const node of model.outputs) grow(OUTPUT, chipWidth(node.dtype));
  for (const lane of model.lanes)
    for (const e of lane.edges) gapAfter[e.from.col] = Math.max(gapAfter[e.from.col] ?? 0, labelWidth(e.label));
  gapAfter[CALL] = Math.max(0, ...model.outEdges.map((e) => labelWidth(e.label)));
  const cols = [...used].sort((a, b) => a - b);
  const x = {};
  const laneLabels = Math.max(0, ...model.lanes.map((lane) => lane.label.length));
  let cursor = PAD + Math.max(36, laneLabels * 6.2 + 10);
  for (const col of cols) {
    x[col] = cursor;
    cursor += colWidth[col] + Math.min(Math.max(gapAfter[col] ?? 0, 24) + 16, LABEL_CHARS * 5.9 + 16);
  }
  const width = x[OUTPUT] + colWidth[OUTPUT] + PAD;
  const rows = Math.max(model.lanes.length, model.outputs.length, 1);
  const laneY = [];
  let y = PAD;
  for (let i = 0; i < rows; i++) {
    const lane = model.lanes[i];
    const out = model.outEdges[i];
    const lines = Math.max(0, ...(lane?.edges ?? []).map((e) => e.label.length), out?.label.length ?? 0);
    laneY.push(y + CAPTION_H);
    y += CAPTION_H + Math.max(CHIP_H, CHIP_H / 2 + 6 + lines * LINE_H) + LANE_GAP;
  }
  return { x, colWidth, laneY, width: Math.ceil(width), height: Math.ceil(y - LANE_GAP + PAD) };
}

function chipNode(node, x, y, width) {
  const kind = node.error ? "error" : dtypeKind(node.dtype);
  return s(
    "g",
    {
      class: ["dx-node", `dx-k-${kind}`],
      style: { "--dx-kind": kindColor(kind) },
      "data-stage": node.caption,
      "data-dtype": node.dtype,
    },
    s("title", {}, node.step?.note ? `${node.dtype}: ${node.step.note}` : node.dtype),
    s("text", { class: "dx-caption", x: x + width / 2, y: y - 4, "text-anchor": "middle" }, node.caption),
    s("rect", { class: "dx-chip-rect", x, y, width, height: CHIP_H, rx: 6 }),
    s("text", { class: "dx-chip-text", x: x + width / 2, y: y + CHIP_H / 2 + 4, "text-anchor": "middle" }, node.dtype),
  );
}

function edgeNode(e, x1, x2, y, marker, labelX = x1) {
  const cy = y + CHIP_H / 2;
  return s(
    "g",
    { class: ["dx-edge", e.changed && "dx-changed", e.error && "dx-raised"], "data-note": e.note },
    s("title", {}, e.note),
    s("line", { x1, y1: cy, x2: x2 - 2, y2: cy, "marker-end": `url(#${marker})` }),
    e.label.map((line, i) =>
      s("text", { class: ["dx-edge-label", i === 0 && line.endsWith(":") && "dx-edge-head"], x: labelX + 5, y: cy + 14 + i * LINE_H }, line),
    ),
  );
}

/** The SVG diagram of a result's cast path. */
export function renderCastPath(result) {
  const model = castPathModel(result);
  const geo = layout(model);
  const id = `dx-arrow-${++uid}`;
  const callTop = geo.laneY[0];
  const callBottom = geo.laneY[geo.laneY.length - 1] + CHIP_H;
  const callX = geo.x[CALL];
  const failed = model.outputs.some((n) => n.error);
  const parts = [
    s(
      "defs",
      {},
      ["", "-red"].map((suffix) =>
        s(
          "marker",
          {
            id: id + suffix,
            viewBox: "0 0 10 10",
            refX: 9,
            refY: 5,
            markerWidth: 9,
            markerHeight: 9,
            markerUnits: "userSpaceOnUse",
            orient: "auto",
          },
          s("path", { d: "M0,0 L10,5 L0,10 z", class: suffix ? "dx-arrow dx-arrow-red" : "dx-arrow" }),
        ),
      ),
    ),
  ];
  const markerFor = (e) => (e.changed ? `${id}-red` : id);
  model.lanes.forEach((lane, i) => {
    const y = geo.laneY[i];
    parts.push(s("text", { class: ["dx-lane-label", `dx-lane-${lane.kind}`], x: PAD, y: y + CHIP_H / 2 + 4 }, lane.label));
    lane.edges.forEach((e) => {
      const start = geo.x[e.from.col];
      parts.push(edgeNode(e, start + chipWidth(e.from.dtype), geo.x[e.to.col], y, markerFor(e), start + geo.colWidth[e.from.col]));
    });
    const last = lane.nodes[lane.nodes.length - 1];
    if (last) {
      const from = geo.x[last.col] + chipWidth(last.dtype);
      parts.push(edgeNode({ label: [], note: "", changed: false }, from, callX, y, id));
    }
    lane.nodes.forEach((node) => parts.push(chipNode(node, geo.x[node.col], y, chipWidth(node.dtype))));
  });
  model.outputs.forEach((node, i) => {
    const y = geo.laneY[i];
    const e = model.outEdges[i];
    parts.push(edgeNode(e, callX + geo.colWidth[CALL], geo.x[OUTPUT], y, markerFor(e)));
    parts.push(chipNode(node, geo.x[OUTPUT], y, chipWidth(node.dtype)));
  });
  parts.push(
    s(
      "g",
      { class: ["dx-call", failed && "dx-call-failed"] },
      s("rect", { x: callX, y: callTop - 4, width: geo.colWidth[CALL], height: callBottom - callTop + 8, rx: 8 }),
      s("text", { class: "dx-caption", x: callX + geo.colWidth[CALL] / 2, y: callTop - 8, "text-anchor": "middle" }, "call"),
      s(
        "text",
        { class: "dx-call-text", x: callX + geo.colWidth[CALL] / 2, y: (callTop + callBottom) / 2 + 4, "text-anchor": "middle" },
        model.target,
      ),
    ),
  );
  return s(
    "svg",
    {
      class: "dx-castpath",
      testid: "cast-path",
      // One scale everywhere: a chip is as wide in every card and column (a narrow column
      // scrolls the diagram; it never shrinks or stretches it).
      width: geo.width,
      height: geo.height,
      viewBox: `0 0 ${geo.width} ${geo.height}`,
      role: "img",
      "aria-label": `cast path of ${model.target}`,
    },
    parts,
  );
}

/** The cast path as text, one line per step (for the page's reader and for tests). */
export function renderCastSteps(result) {
  const steps = result.cast_path ?? [];
  return h(
    "ol",
    { class: "dx-steps", testid: "cast-steps" },
    steps.map((step) =>
      h(
        "li",
        { class: step.changed && "dx-changed", "data-stage": step.stage },
        h("span", { class: "dx-step-stage" }, step.stage + (step.name ? ` ${step.name}` : step.index != null && step.stage !== "variables" ? ` ${step.index}` : "")),
        h("code", {}, step.dtype),
        step.note ? h("span", { class: "dx-step-note" }, step.note) : null,
      ),
    ),
  );
}
