// @ts-check
// The model view's graph: an audit's ModelGraph (the `audit` trait's `graph`) laid out by elkjs
// (ELK's layered algorithm, bundled: nothing is fetched) and drawn as SVG. Layers are nodes
// filled with their compute dtype's colour, edges are coloured and labelled with the dtype of
// the tensor they carry, a finding marks its layer. A block (a nested model, a layer with
// sublayers) holding more than COLLAPSE_ABOVE nodes starts collapsed: its edges are drawn at
// the block, and a click on its ▸ opens it. A click on a node selects it (`onSelect(path)`).
// Every dtype comes from the record; this module only lays it out.
import ELK from "elkjs/lib/elk.bundled.js";
import { s } from "./dom.js";
import { dtypeKind } from "./dtype.js";
import { PALETTE, kindColor, textOn } from "./palette.js";

/** A block holding more nodes than this starts collapsed. */
export const COLLAPSE_ABOVE = 8;
const NODE_H = 38;
const HEADER_H = 24;
const LABEL_H = 14;
const TITLE_W = 7.2;
const SUB_W = 6.1;
const PAD = 10;
const BADGE_R = 8;
const SEVERITIES = ["error", "warning", "info"];
const ROOT_ID = "\u0000root";

const LAYOUT = {
  "elk.algorithm": "layered",
  "elk.direction": "DOWN",
  "elk.hierarchyHandling": "INCLUDE_CHILDREN",
  "elk.json.shapeCoords": "ROOT",
  "elk.json.edgeCoords": "ROOT",
  "elk.edgeLabels.inline": "true",
  "elk.spacing.nodeNode": "18",
  "elk.spacing.edgeLabel": "2",
  "elk.layered.spacing.nodeNodeBetweenLayers": "30",
  "elk.layered.spacing.edgeNodeBetweenLayers": "12",
  "elk.layered.nodePlacement.strategy": "NETWORK_SIMPLEX",
  "elk.padding": "[top=8,left=8,bottom=8,right=8]",
};

let engine = null;
/** One ELK for the page (it runs in this thread: anywidget loads one file, no worker). */
function elk() {
  engine ??= new ELK();
  return engine;
}

/**
 * The graph as a tree: nodes by path, each parent's children in the model's order, and how
 * many nodes each block holds.
 * @param {{nodes: any[], edges: any[]}} graph
 */
export function graphTree(graph) {
  const nodes = new Map(graph.nodes.map((n) => [n.path, n]));
  const children = new Map([["", []]]);
  for (const node of graph.nodes) {
    const parent = nodes.has(node.parent) ? node.parent : "";
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(node.path);
  }
  const size = new Map();
  const count = (path) => {
    let n = 0;
    for (const child of children.get(path) ?? []) n += 1 + count(child);
    size.set(path, n);
    return n;
  };
  count("");
  return { graph, nodes, children, size };
}

/** The blocks that start collapsed: those holding more than `limit` nodes. */
export function initialCollapsed(tree, limit = COLLAPSE_ABOVE) {
  return new Set([...tree.size].filter(([path, n]) => path && n > limit).map(([path]) => path));
}

/** The node drawn for `path`: itself, or its outermost collapsed block. */
export function shownAs(tree, collapsed, path) {
  const chain = [];
  for (let p = path; p && tree.nodes.has(p); p = tree.nodes.get(p).parent) chain.unshift(p);
  return chain.slice(0, -1).find((block) => collapsed.has(block)) ?? path;
}

/** The edges between drawn nodes: each edge of the record lifted to the nodes drawn for its
 *  ends, those inside a collapsed block dropped (a shared layer feeding itself kept), parallel
 *  ones merged with their dtypes listed once. */
export function shownEdges(tree, collapsed) {
  const merged = new Map();
  for (const edge of tree.graph.edges) {
    const source = shownAs(tree, collapsed, edge.source);
    const target = shownAs(tree, collapsed, edge.target);
    if (source === target && edge.source !== edge.target) continue;
    const key = `${source}\u0000${target}`;
    const found = merged.get(key) ?? { source, target, dtypes: [], calls: 0 };
    if (!found.dtypes.includes(edge.dtype)) found.dtypes.push(edge.dtype);
    found.calls += 1;
    merged.set(key, found);
  }
  return [...merged.values()];
}

/** Each finding under the node of its path (or the deepest node its path is inside); those
 *  of the model itself under "". */
export function findingsByNode(tree, findings) {
  const found = new Map();
  for (const finding of findings ?? []) {
    let path = finding.path ?? "";
    while (path && !tree.nodes.has(path)) path = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
    if (!found.has(path)) found.set(path, []);
    found.get(path).push(finding);
  }
  return found;
}

/** The findings a drawn node shows: its own, and a collapsed block's those of its nodes. */
function shownFindings(tree, collapsed, byNode, path) {
  const own = byNode.get(path) ?? [];
  if (!collapsed.has(path)) return own;
  const inside = [...byNode].filter(([p]) => p.startsWith(`${path}/`)).flatMap(([, f]) => f);
  return [...own, ...inside];
}

/** The dtype a node is coloured by: a layer's compute dtype, else what it returned. */
export function nodeDtype(node) {
  return (node.kind === "layer" && node.compute_dtype) || node.output_dtypes?.[0] || "";
}

function nodeText(tree, collapsed, node) {
  const dtype = nodeDtype(node);
  const inside = collapsed.has(node.path) ? ` · ${tree.size.get(node.path)} inside` : "";
  const what = node.kind === "input" ? "input" : node.layer_class;
  const calls = node.calls > 1 ? ` · ${node.calls} calls` : node.calls === 0 && node.kind === "layer" ? " · not called" : "";
  return { title: node.name, sub: `${what} · ${dtype || "—"}${calls}${inside}` };
}

/** ELK's input: drawn nodes sized to their text, open blocks holding theirs, the edges
 *  labelled with their dtypes. */
export function elkGraph(tree, collapsed) {
  const build = (path) => {
    const node = tree.nodes.get(path);
    const { title, sub } = nodeText(tree, collapsed, node);
    const width = Math.ceil(Math.max(title.length * TITLE_W, sub.length * SUB_W) + 2 * PAD + 2 * BADGE_R);
    const kids = tree.children.get(path) ?? [];
    if (!kids.length || collapsed.has(path)) return { id: path, width, height: NODE_H };
    return {
      id: path,
      children: kids.map(build),
      layoutOptions: {
        "elk.padding": `[top=${HEADER_H + 8},left=10,bottom=10,right=10]`,
        "elk.nodeSize.constraints": "MINIMUM_SIZE",
        "elk.nodeSize.minimum": `(${width + 16}, ${HEADER_H + 20})`,
      },
    };
  };
  const edges = shownEdges(tree, collapsed).map((edge, i) => {
    const text = edge.dtypes.join(" | ");
    return {
      id: `e${i}`,
      sources: [edge.source],
      targets: [edge.target],
      labels: [{ text, width: Math.ceil(text.length * SUB_W) + 6, height: LABEL_H }],
      dx: edge,
    };
  });
  return { id: ROOT_ID, layoutOptions: LAYOUT, children: (tree.children.get("") ?? []).map(build), edges };
}

/** The laid-out graph (positions from ELK, in the root's coordinates). */
export async function layOut(tree, collapsed) {
  const input = elkGraph(tree, collapsed);
  const extra = new Map(input.edges.map((e) => [e.id, e.dx]));
  for (const e of input.edges) delete e.dx;
  const out = await elk().layout(input);
  const boxes = [];
  const walk = (n) => {
    for (const child of n.children ?? []) {
      boxes.push({ path: child.id, x: child.x, y: child.y, width: child.width, height: child.height, open: Boolean(child.children?.length) });
      walk(child);
    }
  };
  walk(out);
  const edges = (out.edges ?? []).map((e) => ({ ...extra.get(e.id), sections: e.sections ?? [], label: e.labels?.[0] }));
  return { width: out.width ?? 0, height: out.height ?? 0, boxes, edges };
}

function points(section) {
  return [section.startPoint, ...(section.bendPoints ?? []), section.endPoint];
}

function arrow(section) {
  const p = points(section);
  const [a, b] = [p.at(-2), p.at(-1)];
  const angle = Math.atan2(b.y - a.y, b.x - a.x);
  const at = (r, t) => `${(b.x - r * Math.cos(angle + t)).toFixed(1)},${(b.y - r * Math.sin(angle + t)).toFixed(1)}`;
  return `${b.x},${b.y} ${at(7, 0.45)} ${at(7, -0.45)}`;
}

function drawEdge(edge) {
  const colour = kindColor(dtypeKind(edge.dtypes[0]));
  const label = edge.label;
  return s(
    "g",
    { class: "dx-graph-edge", testid: "graph-edge", "data-source": edge.source, "data-target": edge.target, "data-dtype": edge.dtypes.join(" | "), style: { "--dx-line": colour } },
    edge.sections.map((section) => [
      s("polyline", { points: points(section).map((p) => `${p.x},${p.y}`).join(" ") }),
      s("polygon", { points: arrow(section) }),
    ]),
    label && label.x !== undefined
      ? [
          s("rect", { class: "dx-graph-label-bg", x: label.x - 1, y: label.y, width: label.width + 2, height: label.height, rx: 3 }),
          s("text", { class: "dx-graph-label", x: label.x + label.width / 2, y: label.y + label.height - 3.5 }, label.text),
        ]
      : null,
  );
}

function badge(box, findings) {
  if (!findings.length) return null;
  const worst = SEVERITIES.find((sev) => findings.some((f) => f.severity === sev)) ?? "info";
  const fill = PALETTE.severities[worst];
  const title = findings.map((f) => `${f.severity}: ${f.kind}: ${f.message}`).join("\n");
  return s(
    "g",
    { class: "dx-graph-badge", testid: "graph-finding", "data-severity": worst, style: { "--dx-fill": fill, "--dx-ink": textOn(fill) } },
    s("title", {}, title),
    s("circle", { cx: box.x + box.width - BADGE_R - 3, cy: box.y + BADGE_R + 3, r: BADGE_R }),
    s("text", { x: box.x + box.width - BADGE_R - 3, y: box.y + BADGE_R + 7 }, String(findings.length)),
  );
}

function drawNode(tree, collapsed, byNode, box, { onSelect, onToggle }) {
  const node = tree.nodes.get(box.path);
  const dtype = nodeDtype(node);
  const colour = kindColor(dtypeKind(dtype));
  const block = (tree.children.get(box.path) ?? []).length > 0;
  const { title, sub } = nodeText(tree, collapsed, node);
  const filled = !box.open && node.kind !== "op";
  const fill = filled ? colour : PALETTE.ui.background2;
  const toggle = block
    ? s(
        "text",
        {
          class: "dx-graph-toggle",
          testid: "graph-toggle",
          role: "button",
          "aria-label": `${box.open ? "collapse" : "expand"} ${node.name}`,
          x: box.x + 6,
          y: box.y + (box.open ? 16 : 15),
          onclick: (event) => {
            event.stopPropagation();
            onToggle(box.path);
          },
        },
        box.open ? "▾" : "▸",
      )
    : null;
  const left = box.x + (block ? 18 : PAD);
  return s(
    "g",
    {
      class: ["dx-graph-node", `dx-graph-${node.kind}`, box.open ? "dx-graph-open" : null, block && !box.open ? "dx-graph-collapsed" : null],
      testid: "graph-node",
      role: "button",
      tabindex: "0",
      "data-path": node.path,
      "data-kind": node.kind,
      "data-dtype": dtype,
      "data-fill": fill,
      "data-block": block ? (box.open ? "open" : "collapsed") : null,
      style: { "--dx-fill": fill, "--dx-line": colour, "--dx-ink": filled ? textOn(fill) : PALETTE.ui.foreground },
      onclick: () => onSelect(node.path),
      onkeydown: (event) => {
        if (event.key === "Enter" || event.key === " ") onSelect(node.path);
      },
    },
    s("title", {}, `${node.path}\n${node.layer_class}: compute ${node.compute_dtype || "—"}, variables ${node.variable_dtype || "—"}`),
    s("rect", { x: box.x, y: box.y, width: box.width, height: box.height, rx: node.kind === "input" ? NODE_H / 2 : 6 }),
    s("text", { class: "dx-graph-title", x: left, y: box.y + 15 }, title),
    box.open ? s("text", { class: "dx-graph-sub", x: left + title.length * TITLE_W + 8, y: box.y + 15 }, sub) : s("text", { class: "dx-graph-sub", x: left, y: box.y + 30 }, sub),
    toggle,
    badge(box, shownFindings(tree, collapsed, byNode, box.path)),
  );
}

/** The SVG of a laid-out graph: open blocks first (behind), then the edges, then the nodes. */
export function drawGraph(tree, collapsed, laid, findings, handlers) {
  const byNode = findingsByNode(tree, findings);
  const draw = (box) => drawNode(tree, collapsed, byNode, box, handlers);
  return s(
    "svg",
    {
      class: "dx-graph-svg",
      testid: "graph-svg",
      width: Math.ceil(laid.width),
      height: Math.ceil(laid.height),
      viewBox: `0 0 ${Math.ceil(laid.width)} ${Math.ceil(laid.height)}`,
      role: "group",
      "aria-label": "model graph",
    },
    laid.boxes.filter((b) => b.open).map(draw),
    laid.edges.map(drawEdge),
    laid.boxes.filter((b) => !b.open).map(draw),
  );
}
