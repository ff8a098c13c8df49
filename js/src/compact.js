// @ts-check
// The compact comparison, the explorer's default view: one column per backend (or mode), a row
// per cast-path stage, output and training-step fact. The rows that differ are drawn; the
// agreeing ones fold into one "same on all" row. Which rows differ, and every word in a cell,
// come from the `comparison` trait (records.compare, computed once in Python): this module lays
// the grid out and compares nothing. Each column's full card opens in place, under its column.
import { h } from "./dom.js";
import { chip } from "./dtype.js";
import { kindColor, mark, statusTone } from "./palette.js";
import { renderResultCard } from "./result.js";

/** One cell: a dtype chip (amber-edged where this stage changed the dtype) or words. */
export function renderCell(cell, testid) {
  if (!cell) return h("span", { class: "dx-muted", testid }, "—");
  if (cell.tone === "dtype" || cell.tone === "changed") {
    return chip(cell.dtype ?? cell.text, {
      testid,
      extra: cell.tone === "changed" && "dx-chip-changed",
      title: cell.note ? `${cell.text}: ${cell.note}` : cell.text,
    });
  }
  return h(
    "span",
    {
      class: ["dx-cell-words", `dx-tone-${cell.tone}`],
      style: cell.tone === "error" ? { "--dx-kind": kindColor("error") } : null,
      testid,
      title: cell.note || null,
    },
    cell.text,
  );
}

function columnHead(column, panel) {
  const toggle = panel
    ? h("button", { type: "button", class: "dx-link dx-col-toggle", testid: `toggle-${column.label}`, "aria-expanded": "false" }, "details")
    : null;
  if (toggle) {
    toggle.addEventListener("click", () => {
      panel.hidden = !panel.hidden;
      toggle.setAttribute("aria-expanded", String(!panel.hidden));
      toggle.textContent = panel.hidden ? "details" : "hide details";
    });
  }
  return h(
    "div",
    {
      class: ["dx-col-head", `dx-col-${column.status}`],
      style: { "--dx-mark": statusTone(column.status) },
      testid: `column-${column.label}`,
      "data-status": column.status,
    },
    h(
      "div",
      { class: "dx-col-name" },
      h("span", { class: "dx-mark", "aria-hidden": "true" }, mark(column.status)),
      h("span", { class: "dx-backend" }, column.label),
      column.status === "pending" ? h("span", { class: "dx-spinner", "aria-label": "pending" }) : null,
    ),
    h("div", { class: "dx-col-headline", testid: `headline-${column.label}` }, column.headline),
    toggle,
  );
}

/** A column's full card, opened in place by its head's toggle: a row of the grid right under
 *  the heads, as wide as the grid, so its diagram keeps its one scale. */
function columnPanel(column, result, timings) {
  if (!result || result.status === "pending") return null;
  return h(
    "div",
    { class: "dx-col-panel", testid: `detail-${column.label}`, hidden: true },
    renderResultCard(column.backend, result, { roundTripMs: timings?.[column.backend] }),
  );
}

function rowCells(row, columns) {
  return columns.map((column) =>
    h("div", { class: "dx-grid-cell", "data-column": column.label }, renderCell(row.cells[column.label], `cell-${row.key}-${column.label}`)),
  );
}

/**
 * The compact grid of `comparison` (the trait): a header per column, the differing rows, then
 * one folded "same on all" row holding the agreeing ones (each with its one shared value).
 * `results` are the full answers behind each column's in-place detail.
 */
export function renderCompact(comparison, results = {}, { timings } = {}) {
  const columns = comparison?.columns ?? [];
  if (!columns.length) return null;
  const rows = comparison.rows ?? [];
  const differing = rows.filter((r) => !r.same);
  const agreeing = rows.filter((r) => r.same);
  const panels = columns.map((c) => columnPanel(c, results[c.backend], timings));
  const parts = [h("div", { class: "dx-grid-label dx-grid-corner" }, ""), columns.map((c, i) => columnHead(c, panels[i])), panels];
  let group = null;
  for (const row of differing) {
    if (row.group !== group) {
      group = row.group;
      parts.push(h("div", { class: "dx-grid-group" }, group));
    }
    parts.push(
      h("div", { class: "dx-grid-label", testid: `row-${row.key}`, "data-same": "false" }, row.label),
      rowCells(row, columns),
    );
  }
  if (agreeing.length) {
    parts.push(
      h(
        "details",
        { class: "dx-grid-same", testid: "same-on-all" },
        h("summary", {}, h("strong", {}, "same on all"), ` · ${agreeing.length} row${agreeing.length === 1 ? "" : "s"}: `, agreeing.map((r) => r.label).join(", ")),
        h(
          "div",
          { class: "dx-same-list" },
          agreeing.map((row) => [
            h("div", { class: "dx-grid-label", testid: `row-${row.key}`, "data-same": "true" }, row.label),
            h("div", { class: "dx-same-value" }, renderCell(row.shared, `shared-${row.key}`)),
          ]),
        ),
      ),
    );
  }
  return h(
    "section",
    { class: "dx-compact", testid: "compact" },
    h("div", { class: "dx-compact-summary", testid: "compact-summary" }, comparison.summary),
    h(
      "div",
      { class: "dx-grid-compare", style: { "--dx-columns": String(columns.length) } },
      parts,
    ),
  );
}
