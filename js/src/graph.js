// @ts-check
// The model view's graph: an audit's ModelGraph (the `audit` trait's `graph`) laid out by dagre
// (@dagrejs/dagre's layered layout of a compound graph, MIT, bundled: nothing is fetched) and
// drawn as SVG. Layers are nodes filled with their compute dtype's colour, edges are coloured
// and labelled with the dtype of the tensor they carry, a finding marks its layer. A block (a
// nested model, a layer with sublayers) holding more than COLLAPSE_ABOVE nodes starts
// collapsed: its edges are drawn at the block, and a click on its ▸ opens it. A click on a node
// selects it (`onSelect(path)`). Every dtype comes from the record; this module only lays it out.
import { graphlib, layout } from "@dagrejs/dagre";
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

/** dagre's options for the whole graph: top to bottom, room for the edges' dtype labels. */
const LAYOUT = { rankdir: "TB", nodesep: 18, edgesep: 10, ranksep: 30, marginx: 8, marginy: 8 };
/** Layout-only nodes of an open block: its head holds its title row, its tail closes it
 *  (dagre takes no edge on a compound node: the edges into a block go to its head, those out
 *  of it leave from its tail). */
const HEAD = "\u0000head:";
const TAIL = "\u0000tail:";

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

/** The size of a drawn node: wide enough for its text and its badge. */
function nodeSize(tree, collapsed, path) {
  const { title, sub } = nodeText(tree, collapsed, tree.nodes.get(path));
  return Math.ceil(Math.max(title.length * TITLE_W, sub.length * SUB_W) + 2 * PAD + 2 * BADGE_R);
}

/** Whether `path` is drawn as an open block (it holds nodes and is not collapsed). */
function isOpen(tree, collapsed, path) {
  return (tree.children.get(path) ?? []).length > 0 && !collapsed.has(path);
}

/** The node dagre lays an edge's end out at: the drawn node, or an open block's head (the
 *  edge's target) or tail (its source). */
function endNode(tree, collapsed, path, source) {
  return isOpen(tree, collapsed, path) ? (source ? TAIL : HEAD) + path : path;
}

/** Whether `path` is `block` or inside it. */
const within = (path, block) => path === block || path.startsWith(`${block}/`);

/** dagre's input: a compound graph of the drawn nodes sized to their text, each open block
 *  the parent of its nodes, its head and its tail (layout-only edges from the head to those of
 *  its nodes that nothing inside it feeds, and to the tail from those that feed nothing
 *  inside it, keep them on top and at the bottom), the edges labelled with their dtypes. */
export function dagreGraph(tree, collapsed) {
  const g = new graphlib.Graph({ compound: true, multigraph: true });
  g.setGraph({ ...LAYOUT });
  const put = (id, label, parent) => {
    g.setNode(id, label);
    if (parent) g.setParent(id, parent);
  };
  const add = (path, parent) => {
    const width = nodeSize(tree, collapsed, path);
    if (!isOpen(tree, collapsed, path)) return put(path, { width, height: NODE_H }, parent);
    put(path, {}, parent);
    put(HEAD + path, { width: width + 16, height: HEADER_H }, path);
    put(TAIL + path, { width: 0, height: 0 }, path);
    for (const child of tree.children.get(path)) {
      add(child, path);
      const block = isOpen(tree, collapsed, child);
      const fed = edges.some((e) => within(e.target, child) && within(e.source, path) && !within(e.source, child));
      const feeds = edges.some((e) => within(e.source, child) && within(e.target, path) && !within(e.target, child));
      if (block || !fed) g.setEdge(HEAD + path, endNode(tree, collapsed, child, false), { weight: 0, layoutOnly: true }, HEAD + child);
      if (block || !feeds) g.setEdge(endNode(tree, collapsed, child, true), TAIL + path, { weight: 0, layoutOnly: true }, TAIL + child);
    }
  };
  const edges = shownEdges(tree, collapsed);
  for (const path of tree.children.get("") ?? []) add(path, "");
  edges.forEach((edge, i) => {
    const text = edge.dtypes.join(" | ");
    const source = endNode(tree, collapsed, edge.source, true);
    const target = endNode(tree, collapsed, edge.target, false);
    g.setEdge(source, target, { width: Math.ceil(text.length * SUB_W) + 6, height: LABEL_H, labelpos: "c", text, dx: edge }, `e${i}`);
  });
  return g;
}

/** Whether point `p` lies inside `box`. */
function inside(box, p) {
  return p.x > box.x && p.x < box.x + box.width && p.y > box.y && p.y < box.y + box.height;
}

/** The point where the segment from `a` (outside `box`, or on its border) to `b` (inside)
 *  enters it: the latest of where it enters its span on each axis. */
function crossing(box, a, b) {
  let t = 0;
  for (const [from, to, lo, hi] of [
    [a.x, b.x, box.x, box.x + box.width],
    [a.y, b.y, box.y, box.y + box.height],
  ]) {
    if (from < lo) t = Math.max(t, (lo - from) / (to - from));
    if (from > hi) t = Math.max(t, (from - hi) / (from - to));
  }
  return { x: a.x + t * (b.x - a.x), y: a.y + t * (b.y - a.y) };
}

/** An edge's points ended at the border of the open block it goes into (it was laid out to
 *  the block's head), unless it starts inside that block. */
function clipInto(box, pts) {
  if (!box || inside(box, pts[0])) return pts;
  const i = pts.findIndex((p) => inside(box, p));
  return i > 0 ? [...pts.slice(0, i), crossing(box, pts[i - 1], pts[i])] : pts;
}

/** The laid-out graph: boxes by their top-left corner, each edge's points and the box of its
 *  dtype label (dagre runs in this thread, synchronously). */
export function layOut(tree, collapsed) {
  const g = dagreGraph(tree, collapsed);
  layout(g);
  const boxes = g
    .nodes()
    .filter((id) => !id.startsWith(HEAD) && !id.startsWith(TAIL))
    .map((id) => {
      const n = g.node(id);
      return { path: id, x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height, open: isOpen(tree, collapsed, id) };
    });
  const byPath = new Map(boxes.map((b) => [b.path, b]));
  const open = (path) => (isOpen(tree, collapsed, path) ? byPath.get(path) : undefined);
  const edges = g
    .edges()
    .map((e) => g.edge(e))
    .filter((e) => !e.layoutOnly)
    .map((e) => {
      const { dx, points: laid, x, y, width, height, text } = e;
      const points = clipInto(open(dx.target), clipInto(open(dx.source), [...laid].reverse()).reverse());
      const label = x === undefined ? undefined : { text, x: x - width / 2, y: y - height / 2, width, height };
      return { ...dx, points, label };
    });
  const { width, height } = g.graph();
  return { width: width ?? 0, height: height ?? 0, boxes, edges };
}

function arrow(p) {
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
    s("polyline", { points: edge.points.map((p) => `${p.x},${p.y}`).join(" ") }),
    edge.points.length > 1 ? s("polygon", { points: arrow(edge.points) }) : null,
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
