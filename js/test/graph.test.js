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

  it("lays nodes out without overlap (elkjs)", async () => {
    const view = await mount(towers);
    const boxes = nodes(view)
      .filter((n) => !n.getAttribute("data-block"))
      .map((n) => n.querySelector("rect"))
      .map((r) => ["x", "y", "width", "height"].map((k) => Number(r.getAttribute(k))));
    for (let i = 0; i < boxes.length; i++)
      for (let j = i + 1; j < boxes.length; j++) {
        const [a, b] = [boxes[i], boxes[j]];
        const apart = a[0] + a[2] <= b[0] || b[0] + b[2] <= a[0] || a[1] + a[3] <= b[1] || b[1] + b[3] <= a[1];
        expect(apart).toBe(true);
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
