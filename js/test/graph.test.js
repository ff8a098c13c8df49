import { describe, expect, it } from "vitest";
import { App } from "../src/app.js";
import { setDtypeFamilies } from "../src/dtype.js";
import { COLLAPSE_ABOVE, graphTree, initialCollapsed, shownEdges } from "../src/graph.js";
import { ModelView } from "../src/model.js";
import { PALETTE } from "../src/palette.js";
import { allByTestId, byTestId, fixture } from "./helpers.js";

// Real audits (fixtures/generate.py): the `audit` trait the widget publishes for them.
const towers = fixture("audit-shared-nested");
const gpt2 = fixture("audit-gpt2-tiny");
const state = fixture("widget-state");
setDtypeFamilies(state.dtype_families);

/** The palette's colour for a dtype, as the widget's dtype chips take it. */
function paletteColour(dtype) {
  const family = state.dtype_families[dtype];
  return PALETTE.dtype_kinds[family === "float" ? dtype : family] ?? PALETTE.dtype_kinds.other;
}

async function mount(audit) {
  const view = new ModelView();
  document.body.replaceChildren(view.el);
  await view.update(audit);
  return view;
}

const nodes = (view) => allByTestId(view.el, "graph-node");
const node = (view, path) => nodes(view).find((n) => n.getAttribute("data-path") === path);

describe("the model graph", () => {
  it("draws every layer once, filled with its compute dtype's colour from the palette", async () => {
    const view = await mount(towers);
    const drawn = nodes(view).map((n) => n.getAttribute("data-path"));
    expect(drawn.sort()).toEqual(towers.graph.nodes.map((n) => n.path).sort()); // nothing collapsed
    expect(new Set(drawn).size).toBe(drawn.length);
    for (const record of towers.graph.nodes.filter((n) => n.kind === "layer" && !graphTree(towers.graph).children.get(n.path)?.length)) {
      const el = node(view, record.path);
      expect(el.getAttribute("data-dtype")).toBe(record.compute_dtype);
      expect(el.getAttribute("data-fill")).toBe(paletteColour(record.compute_dtype));
      expect(el.style.getPropertyValue("--dx-fill")).toBe(paletteColour(record.compute_dtype));
    }
    // the shared layer is one node with an edge for each call, each labelled with its dtype
    const shared = towers.graph.nodes.find((n) => n.name === "shared");
    expect(shared.calls).toBe(2);
    const edges = allByTestId(view.el, "graph-edge");
    const into = edges.filter((e) => e.getAttribute("data-target") === shared.path);
    expect(into.map((e) => e.getAttribute("data-source")).sort()).toEqual(
      towers.graph.edges.filter((e) => e.target === shared.path).map((e) => e.source).sort(),
    );
    for (const edge of edges) {
      const record = towers.graph.edges.find((e) => e.source === edge.getAttribute("data-source") && e.target === edge.getAttribute("data-target"));
      expect(edge.getAttribute("data-dtype")).toBe(record.dtype);
      expect(edge.style.getPropertyValue("--dx-line")).toBe(paletteColour(record.dtype));
      expect(edge.querySelector("text").textContent).toBe(record.dtype);
    }
  });

  it("marks a finding on its layer", async () => {
    const view = await mount(towers);
    for (const finding of towers.findings) {
      const badge = byTestId(node(view, finding.path), "graph-finding");
      expect(badge.getAttribute("data-severity")).toBe(finding.severity);
    }
    expect(allByTestId(view.el, "graph-finding")).toHaveLength(new Set(towers.findings.map((f) => f.path)).size);
  });

  it("selects a layer's rows when its node is clicked, and its node when a row is", async () => {
    const view = await mount(towers);
    const shared = towers.graph.nodes.find((n) => n.name === "shared").path;
    node(view, shared).dispatchEvent(new MouseEvent("click", { bubbles: true }));
    const selected = view.el.querySelectorAll("tr.dx-row-selected");
    expect([...selected].map((r) => [r.getAttribute("data-path"), r.getAttribute("data-call")])).toEqual([
      [shared, "0"],
      [shared, "1"],
    ]);
    expect(node(view, shared).classList.contains("dx-graph-selected")).toBe(true);
    expect(byTestId(view.el, "model-detail").textContent).toContain(shared);
    const head = allByTestId(view.el, "model-row").find((r) => r.getAttribute("data-path").endsWith("/head"));
    head.click();
    expect(node(view, head.getAttribute("data-path")).classList.contains("dx-graph-selected")).toBe(true);
    expect(node(view, shared).classList.contains("dx-graph-selected")).toBe(false);
  });

  it("draws a keras-hub backbone with its transformer blocks collapsed, and opens one on a click", async () => {
    const tree = graphTree(gpt2.graph);
    const blocks = gpt2.graph.nodes.filter((n) => n.layer_class === "TransformerDecoder").map((n) => n.path);
    expect(blocks).toHaveLength(2);
    expect([...initialCollapsed(tree)].sort()).toEqual(blocks.filter((b) => tree.size.get(b) > COLLAPSE_ABOVE).sort());
    const view = await mount(gpt2);
    for (const block of blocks) expect(node(view, block).getAttribute("data-block")).toBe("collapsed");
    const inside = (block) => nodes(view).filter((n) => n.getAttribute("data-path").startsWith(`${block}/`));
    expect(inside(blocks[0])).toHaveLength(0);
    const before = nodes(view).length;
    // an edge into a layer inside a collapsed block is drawn at the block
    const lifted = shownEdges(tree, initialCollapsed(tree));
    expect(lifted.some((e) => e.target === blocks[1] && e.source === blocks[0])).toBe(true);
    byTestId(node(view, blocks[0]), "graph-toggle").dispatchEvent(new MouseEvent("click", { bubbles: true }));
    await view.ready;
    expect(node(view, blocks[0]).getAttribute("data-block")).toBe("open");
    expect(inside(blocks[0]).length).toBe(tree.size.get(blocks[0]));
    expect(nodes(view).length).toBe(before + tree.size.get(blocks[0]));
    expect(node(view, blocks[1]).getAttribute("data-block")).toBe("collapsed");
    // a click on the toggle opened the block without selecting it
    expect(view.el.querySelectorAll(".dx-graph-selected")).toHaveLength(0);
  });

  it("lays nodes out without overlap, each open block around its nodes below its title (dagre)", async () => {
    for (const audit of [towers, gpt2]) {
      const view = await mount(audit);
      // open every block: the nested model's, and a keras-hub backbone's transformer blocks
      for (const block of [...view.collapsed]) {
        byTestId(node(view, block), "graph-toggle").dispatchEvent(new MouseEvent("click", { bubbles: true }));
        await view.ready;
      }
      expect(nodes(view)).toHaveLength(audit.graph.nodes.length);
      const rects = new Map(nodes(view).map((n) => [n.getAttribute("data-path"), n.querySelector("rect")]));
      const box = (path) => ["x", "y", "width", "height"].map((k) => Number(rects.get(path).getAttribute(k)));
      const leaves = nodes(view).filter((n) => !n.getAttribute("data-block")).map((n) => n.getAttribute("data-path"));
      const apart = (a, b) => a[0] + a[2] <= b[0] || b[0] + b[2] <= a[0] || a[1] + a[3] <= b[1] || b[1] + b[3] <= a[1];
      for (const path of leaves) expect(box(path).every(Number.isFinite)).toBe(true);
      for (let i = 0; i < leaves.length; i++) for (let j = i + 1; j < leaves.length; j++) expect(apart(box(leaves[i]), box(leaves[j]))).toBe(true);
      // a block's nodes lie inside it, under its title row
      for (const record of audit.graph.nodes.filter((n) => n.parent && audit.graph.nodes.some((p) => p.path === n.parent))) {
        const [outer, inner] = [box(record.parent), box(record.path)];
        expect(inner[0] >= outer[0] && inner[0] + inner[2] <= outer[0] + outer[2]).toBe(true);
        expect(inner[1] >= outer[1] + 24 && inner[1] + inner[3] <= outer[1] + outer[3]).toBe(true);
      }
      // an edge's dtype label is clear of every node; an edge into an open block ends on its border
      for (const edge of allByTestId(view.el, "graph-edge")) {
        const rect = edge.querySelector("rect");
        const label = ["x", "y", "width", "height"].map((k) => Number(rect.getAttribute(k)));
        for (const path of leaves) expect(apart(label, box(path)), `${edge.getAttribute("data-dtype")} over ${path}`).toBe(true);
        const target = edge.getAttribute("data-target");
        if (!view.tree.children.get(target)?.length || edge.getAttribute("data-source").startsWith(`${target}/`)) continue;
        const end = edge.querySelector("polyline").getAttribute("points").split(" ").at(-1).split(",").map(Number);
        const [x, y, w, h] = box(target);
        const onBorder = [Math.abs(end[0] - x), Math.abs(end[0] - x - w), Math.abs(end[1] - y), Math.abs(end[1] - y - h)].some((d) => d < 0.5);
        expect(onBorder, `${edge.getAttribute("data-source")} -> ${target} ends at ${end}`).toBe(true);
      }
    }
  });
});

describe("the explorer with an audit", () => {
  it("opens on the model view and can switch to the probe views", async () => {
    const el = document.createElement("div");
    document.body.replaceChildren(el);
    const app = new App(el, { send: () => {} });
    app.update({ ...state, results: {}, verdict: "", promotion: {}, error: "", timings: {}, audit: towers });
    await app.model.ready;
    const root = byTestId(el, "explorer");
    expect(root.dataset.view).toBe("model");
    expect(byTestId(el, "view-model").hasAttribute("hidden")).toBe(false);
    expect(byTestId(el, "model-summary").textContent).toBe(towers.summary);
    expect(nodes(app.model)).toHaveLength(towers.graph.nodes.length);
    byTestId(el, "view-compact").click();
    expect(root.dataset.view).toBe("compact");
    // an explorer without an audit has no model view to switch to
    app.update({ ...app.state, audit: {} });
    expect(byTestId(el, "view-model").hasAttribute("hidden")).toBe(true);
  });
});
