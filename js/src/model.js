// @ts-check
// The model view of an audit (the `audit` trait: frontends/_model_view.py): its summary, the
// model's graph (graph.js) beside the audit's table. A click on a layer selects it: its node
// is outlined and its rows (a shared layer has one per call) are marked and scrolled to; a
// click on a row selects its layer. Nothing here computes a dtype.
import { h, replaceChildren } from "./dom.js";
import { chip } from "./dtype.js";
import { drawGraph, graphTree, initialCollapsed, layOut, shownAs } from "./graph.js";
import { PALETTE } from "./palette.js";

const DTYPE_COLUMNS = new Set(["given", "received", "output"]);

export class ModelView {
  constructor() {
    this.audit = null;
    this.tree = null;
    this.collapsed = new Set();
    this.selected = "";
    /** Resolves once the graph drawn last is on the page (tests and the browser wait on it). */
    this.ready = Promise.resolve();
    this.generation = 0;
    this.summaryEl = h("div", { class: "dx-model-summary", testid: "model-summary" });
    this.findingsEl = h("ul", { class: "dx-model-findings", testid: "model-findings" });
    this.graphEl = h("div", { class: "dx-graph", testid: "model-graph" });
    this.detailEl = h("div", { class: "dx-model-detail", testid: "model-detail", "aria-live": "polite" });
    this.tableEl = h("div", { class: "dx-model-table" });
    this.notesEl = h("ul", { class: "dx-model-notes", testid: "model-notes" });
    this.el = h("section", { class: "dx-model", testid: "model-view" }, this.summaryEl, this.findingsEl, this.graphEl, this.detailEl, this.tableEl, this.notesEl);
  }

  /** Show `audit` (a new one is drawn afresh; the same one keeps its state). */
  update(audit) {
    if (audit === this.audit) return this.ready;
    this.audit = audit;
    this.selected = "";
    const graph = audit?.graph;
    this.tree = graph ? graphTree(graph) : null;
    this.collapsed = this.tree ? initialCollapsed(this.tree) : new Set();
    this.el.dataset.nodes = String(graph?.nodes?.length ?? 0);
    replaceChildren(this.summaryEl, audit?.summary ?? "");
    replaceChildren(
      this.findingsEl,
      (audit?.findings ?? []).map((f) =>
        h("li", { "data-severity": f.severity, "data-path": f.path, style: { "--dx-sev": PALETTE.severities[f.severity] } }, h("strong", {}, `${f.severity} · ${f.kind}`), ` ${f.path}: ${f.message}`),
      ),
    );
    replaceChildren(this.notesEl, (audit?.notes ?? []).map((note) => h("li", {}, note)));
    this.renderTable();
    this.renderDetail();
    return this.redraw();
  }

  /** Lay the graph out again (a block opened or closed) and draw it. */
  redraw() {
    const generation = ++this.generation;
    if (!this.tree) {
      replaceChildren(this.graphEl, h("p", { class: "dx-muted" }, "No graph: the audit drew none (its notes say why)."));
      return (this.ready = Promise.resolve());
    }
    this.graphEl.dataset.state = "laying-out";
    // dagre lays out synchronously; a promise keeps `ready` and a layout's failure one path
    this.ready = Promise.resolve().then(() => layOut(this.tree, this.collapsed)).then(
      (laid) => {
        if (generation !== this.generation) return;
        const svg = drawGraph(this.tree, this.collapsed, laid, this.audit.findings, {
          onSelect: (path) => this.select(path),
          onToggle: (path) => this.toggle(path),
        });
        replaceChildren(this.graphEl, svg);
        this.graphEl.dataset.state = "drawn";
        this.markSelected();
      },
      (error) => {
        if (generation !== this.generation) return;
        replaceChildren(this.graphEl, h("p", { class: "dx-banner dx-banner-error", role: "alert" }, `The graph could not be laid out: ${error?.message ?? error}`));
        this.graphEl.dataset.state = "failed";
      },
    );
    return this.ready;
  }

  /** Open a collapsed block, or close an open one. */
  toggle(path) {
    if (this.collapsed.has(path)) this.collapsed.delete(path);
    else this.collapsed.add(path);
    return this.redraw();
  }

  /** Select a layer: its node outlined (or the collapsed block it is in), its rows marked. */
  select(path) {
    this.selected = path;
    this.markSelected();
    this.renderDetail();
    const first = this.tableEl.querySelector("tr.dx-row-selected");
    if (first && typeof first.scrollIntoView === "function") first.scrollIntoView({ block: "nearest" });
  }

  markSelected() {
    const shown = this.tree && this.selected ? shownAs(this.tree, this.collapsed, this.selected) : "";
    for (const node of this.graphEl.querySelectorAll(".dx-graph-node")) {
      node.classList.toggle("dx-graph-selected", node.getAttribute("data-path") === shown);
    }
    for (const row of this.tableEl.querySelectorAll("tr[data-path]")) {
      const on = row.getAttribute("data-path") === this.selected;
      row.classList.toggle("dx-row-selected", on);
      row.setAttribute("aria-selected", String(on));
    }
  }

  renderDetail() {
    const node = this.tree?.nodes.get(this.selected);
    if (!node) {
      replaceChildren(this.detailEl, this.tree ? "Click a layer for its row; ▸ opens a block." : "");
      return;
    }
    const into = this.tree.graph.edges.filter((e) => e.target === node.path);
    const out = this.tree.graph.edges.filter((e) => e.source === node.path);
    const rows = (this.audit.rows ?? []).filter((r) => r.path === node.path).length;
    replaceChildren(
      this.detailEl,
      h("strong", {}, node.path),
      ` ${node.layer_class}`,
      node.compute_dtype ? [" · compute ", chip(node.compute_dtype)] : null,
      node.variable_dtype ? [" · variables ", chip(node.variable_dtype)] : null,
      ` · ${node.calls} call${node.calls === 1 ? "" : "s"} · ${into.length} in, ${out.length} out`,
      rows ? "" : node.kind === "layer" ? " · no row: not called in the pass" : ` · no row: ${node.kind === "op" ? "an op of the functional graph" : "an input"}`,
    );
  }

  renderTable() {
    const audit = this.audit;
    const columns = audit?.columns ?? [];
    const rows = audit?.rows ?? [];
    replaceChildren(
      this.tableEl,
      rows.length
        ? h(
            "table",
            { class: "dx-table", testid: "model-table" },
            h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
            h(
              "tbody",
              {},
              rows.map((row) =>
                h(
                  "tr",
                  { "data-path": row.path, "data-call": String(row.call), testid: "model-row", onclick: () => this.select(row.path) },
                  columns.map((c) => h("td", { class: DTYPE_COLUMNS.has(c) ? "dx-mono" : null, style: c === "path" ? { "padding-left": `${4 + 10 * (row.depth ?? 0)}px` } : null }, row[c] ?? "")),
                ),
              ),
            ),
          )
        : null,
    );
  }
}
