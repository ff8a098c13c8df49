// The promotion table for the dtypes involved, the cell that decided the documented result lit.
import { h } from "./dom.js";
import { chip } from "./dtype.js";

function cell(value, { decided, involved }) {
  const testid = decided ? "promotion-decided" : undefined;
  const cls = ["dx-cell", decided && "dx-decided", involved && "dx-involved"];
  if (value && typeof value === "object") return h("td", { class: [...cls, "dx-cell-error"], testid, title: value.error }, "raises");
  return h("td", { class: cls, testid }, chip(value));
}

/** One table: `{backends, dtypes, cells, args, result, basis}` from the Python side. */
export function renderPromotionTable(table) {
  const { dtypes, cells, args = [] } = table;
  const pair = args.length === 2 ? [dtypes.indexOf(args[0]), dtypes.indexOf(args[1])] : null;
  const inArgs = new Set(args);
  return h(
    "figure",
    { class: "dx-promotion-table", "data-backends": table.backends.join(",") },
    h(
      "figcaption",
      {},
      "keras.backend.result_type on ",
      h("strong", {}, table.backends.join(", ")),
      table.basis ? [": ", h("code", { testid: "promotion-basis" }, table.basis)] : null,
    ),
    h(
      "table",
      { class: "dx-grid" },
      h("tr", {}, h("th", { class: "dx-corner" }, "row ⊕ col"), dtypes.map((d) => h("th", {}, chip(d)))),
      dtypes.map((row, i) =>
        h(
          "tr",
          {},
          h("th", {}, chip(row)),
          dtypes.map((col, j) =>
            cell(cells[i][j], {
              decided: pair !== null && pair[0] === i && pair[1] === j,
              involved: args.length > 2 && inArgs.has(row) && inArgs.has(col),
            }),
          ),
        ),
      ),
    ),
  );
}

/** The promotion section: one table per group of backends that agree. */
export function renderPromotion(promotion) {
  const tables = promotion?.tables ?? [];
  if (!tables.length && !promotion?.note) return null;
  return h(
    "section",
    { class: "dx-promotion", testid: "promotion" },
    h("h3", {}, "promotion table"),
    tables.map(renderPromotionTable),
    promotion.note ? h("p", { class: "dx-muted" }, promotion.note) : null,
  );
}
