import { describe, expect, it } from "vitest";
import { App } from "../src/app.js";
import { renderCompact } from "../src/compact.js";
import { allByTestId, byTestId, fixture } from "./helpers.js";

const four = fixture("dense-four-backends");
const fit = fixture("dense-fit-mixed");

const columnsOf = (grid) => [...grid.querySelectorAll(".dx-col-head")];

describe("compact comparison", () => {
  it("draws a column per backend and only the rows that differ, as the Python side marked them", () => {
    const grid = renderCompact(four.comparison, four.results);
    const columns = four.comparison.columns.map((c) => c.label);
    expect(columns).toHaveLength(4);
    for (const label of columns) {
      expect(byTestId(grid, `column-${label}`)).not.toBeNull();
      expect(byTestId(grid, `headline-${label}`).textContent).toBe(four.comparison.columns.find((c) => c.label === label).headline);
    }
    const differing = [...grid.querySelectorAll('[data-same="false"]')].map((el) => el.textContent);
    expect(differing).toEqual(four.comparison.rows.filter((r) => !r.same).map((r) => r.label));
    expect(differing.length).toBeGreaterThan(0); // Dense float64 under mixed_float16: the conversion differs
    for (const row of four.comparison.rows.filter((r) => !r.same)) {
      for (const label of columns) expect(byTestId(grid, `cell-${row.key}-${label}`).textContent).toBe(row.cells[label].text);
    }
    expect(byTestId(grid, "compact-summary").textContent).toBe(four.comparison.summary);
  });

  it("folds the agreeing rows into one 'same on all' row holding each shared value once", () => {
    const grid = renderCompact(four.comparison, four.results);
    const same = byTestId(grid, "same-on-all");
    const agreeing = four.comparison.rows.filter((r) => r.same);
    expect(same.tagName).toBe("DETAILS");
    expect(same.open).toBe(false);
    expect(same.querySelector("summary").textContent).toContain(`same on all · ${agreeing.length} rows`);
    for (const row of agreeing) {
      expect(byTestId(same, `shared-${row.key}`).textContent).toBe(row.shared.text);
      expect(byTestId(grid, `cell-${row.key}-jax`)).toBeNull(); // not drawn per column
    }
  });

  it("opens each column's full card in place, its diagram at one scale", () => {
    const grid = renderCompact(four.comparison, four.results);
    const detail = byTestId(grid, "detail-jax");
    expect(detail.hidden).toBe(true);
    byTestId(grid, "toggle-jax").click();
    expect(detail.hidden).toBe(false);
    expect(byTestId(grid, "toggle-jax").getAttribute("aria-expanded")).toBe("true");
    expect(byTestId(detail, "result-jax")).not.toBeNull();
    // it opens right under the heads, as a row of the grid
    const heads = columnsOf(grid);
    expect(detail.previousElementSibling === heads.at(-1) || detail.previousElementSibling?.classList.contains("dx-col-panel")).toBe(true);
    const widths = allByTestId(grid, "cast-path").map((svg) => [svg.getAttribute("width"), svg.getAttribute("viewBox").split(" ")[2]]);
    expect(widths).toHaveLength(4);
    for (const [width, box] of widths) expect(width).toBe(box); // one unit is one pixel: never stretched
  });

  it("gives a backend that cannot run the mode its own 'not supported here' column; the others run", () => {
    const grid = renderCompact(fit.comparison, fit.results);
    const numpy = byTestId(grid, "column-numpy");
    expect(numpy.dataset.status).toBe("unsupported");
    expect(byTestId(grid, "headline-numpy").textContent).toMatch(/^not supported here: .*numpy backend cannot train/);
    for (const b of ["jax", "torch"]) expect(byTestId(grid, `column-${b}`).dataset.status).toBe("ok");
    expect(byTestId(byTestId(grid, "detail-numpy"), "unsupported").textContent).toContain("not supported here");
  });

  it("shows fit's training step: loss, optimizer, loss scaling, gradients and warnings", () => {
    const keys = fit.comparison.rows.map((r) => r.key);
    expect(keys).toEqual(expect.arrayContaining(["fit:loss", "fit:optimizer", "fit:scaling", "fit:warnings"]));
    expect(keys.some((k) => k.startsWith("fit:grad:"))).toBe(true);
    const grid = renderCompact(fit.comparison, fit.results);
    const card = byTestId(byTestId(grid, "detail-jax"), "fit");
    const step = fit.results.jax.fit;
    expect(byTestId(card, "fit-optimizer").textContent).toBe(step.optimizer);
    expect(byTestId(card, "fit-loss").textContent).toContain(step.loss);
    expect(byTestId(card, "fit-scaling").textContent).toMatch(step.loss_scaling ? /^on/ : /^off/);
    for (const g of step.gradients) expect(byTestId(card, `gradient-${g.name}`).textContent).toContain(g.dtype);
  });

  it("is the app's default view; the stacked cards are a toggle away", () => {
    const el = document.createElement("div");
    document.body.replaceChildren(el);
    const app = new App(el, { send: () => {}, now: () => 0 });
    const state = { ...fixture("widget-state"), ...four, error: "", timings: {} };
    app.update(state);
    expect(byTestId(el, "compact")).not.toBeNull();
    expect(byTestId(el, "results").children).toHaveLength(0);
    byTestId(el, "view-detail").click();
    expect(byTestId(el, "compact")).toBeNull();
    expect(byTestId(el, "results").children).toHaveLength(4);
    expect(byTestId(el, "view-detail").getAttribute("aria-pressed")).toBe("true");
    byTestId(el, "view-compact").click();
    expect(byTestId(el, "compact")).not.toBeNull();
  });
});
