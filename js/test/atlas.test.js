import { beforeEach, describe, expect, it } from "vitest";
import { castPath, cellDetail, drawGrid, expandCells, matches, start, traceSummary } from "../src/atlas.js";
import { PALETTE } from "../src/palette.js";
import { allByTestId, byTestId, fixture } from "./helpers.js";

// The data of two target pages of the atlas site, built by views/_atlas.py from real probes.
// A page's data (ax-data) with its data file (`file`, what data/<name>.js hands over).
const pages = fixture("atlas-pages");
const withCells = (data) => ({ ...data, cells: expandCells(data.file) });
const conv = withCells(pages.Conv1D);
const softmax = withCells(pages.Softmax);

async function page(data, hash = "", load) {
  const { file, cells, expected, targets_file, ...inPage } = data;
  document.body.innerHTML = [
    "<input id='ax-search'><ul id='ax-hits'></ul>",
    "<table>",
    ...targets_file.map((t) => `<tr data-target='${t.name}'><td>${t.name}</td></tr>`),
    "</table><div data-grid='cells'></div><div data-grid='runs'></div><div id='ax-detail'></div>",
    `<script id='ax-data' type='application/json'>${JSON.stringify(inPage)}</script>`,
  ].join("");
  window.history.replaceState(null, "", hash || "#");
  const asked = [];
  const files = { [`${data.base}assets/targets.js`]: targets_file, [`${data.base}${data.data}`]: file };
  await start(document, load ?? (async (_, src) => (asked.push(src), files[src])));
  return asked;
}

describe("atlas site", () => {
  beforeEach(() => {
    document.body.innerHTML = "";
  });

  it("finds targets by part of their name, case-insensitively", () => {
    const targets = [{ name: "Conv1D", href: "a" }, { name: "ops.add", href: "b" }];
    expect(matches(targets, "CONV").map((t) => t.name)).toEqual(["Conv1D"]);
    expect(matches(targets, "  ")).toEqual([]);
  });

  it("draws a run's cast path in the page's dtype colours, then its error", () => {
    const cell = conv.cells[0];
    const jax = castPath(cell.runs.jax, conv.colors);
    const chips = [...jax.querySelectorAll(".ax-chip")];
    expect(chips.map((c) => c.textContent)).toEqual(cell.runs.jax.cast_path.map((s) => s.dtype));
    const float32 = chips.find((c) => c.textContent === "float32");
    expect(float32.style.background).toBe(hexToRgb(conv.colors.float32));
    const changed = [...jax.querySelectorAll(".ax-step")].map((s) => s.classList.contains("ax-changed"));
    expect(changed).toEqual(cell.runs.jax.cast_path.map((s) => Boolean(s.changed)));
    const torch = castPath(cell.runs.torch, conv.colors);
    expect([...torch.querySelectorAll(".ax-chip")].at(-1).textContent).toBe(cell.runs.torch.outcome);
    expect(cell.runs.torch.status).not.toBe("ok");
  });

  it("summarises the trace with the flags the record computed", () => {
    const run = softmax.cells[0].runs.jax;
    expect(run.trace_flags.length).toBeGreaterThan(0);
    const summary = traceSummary(run);
    expect(summary.textContent).toContain(`op trace: ${run.trace_ops} ops`);
    expect(summary.textContent).toContain(`first inf/NaN at ${run.first_nonfinite}`);
    expect(allByTestId(summary, "trace-flag").map((f) => f.textContent)).toEqual(run.trace_flags);
    expect(traceSummary({ ...run, trace_ops: 0 })).toBeNull();
  });

  it("shows each run of a chosen cell, with its error and versions", () => {
    const cell = conv.cells[0];
    const [title, runs] = cellDetail(cell, conv);
    expect(title.textContent).toContain(`Conv1D on uint8 under ${cell.policy}`);
    const shown = allByTestId(runs, "run").map((r) => r.dataset.run);
    expect(shown).toEqual(Object.keys(cell.runs));
    const torch = runs.querySelector("[data-run=torch]");
    expect(byTestId(torch, "error").textContent).toContain(cell.runs.torch.error_type);
    expect(byTestId(torch, "versions").textContent).toContain(`keras ${conv.versions.torch.keras}`);
  });

  it("keeps each distinct run, text and step once in a data file, and puts every cell back as the records dump it", () => {
    for (const data of [pages.Conv1D, pages.Softmax]) {
      const { file } = data;
      expect(expandCells(file)).toEqual(data.expected);
      expect(new Set(file.strings).size).toBe(file.strings.length);
      expect(new Set(file.runs.map((r) => JSON.stringify(r))).size).toBe(file.runs.length);
      expect(new Set(file.steps.map((r) => JSON.stringify(r))).size).toBe(file.steps.length);
      expect(JSON.stringify(file)).not.toContain("path_text");
    }
    const places = pages.Conv1D.file.cells.flatMap((c) => c.slice(4)).filter((p) => p >= 0);
    expect(new Set(places).size).toBe(pages.Conv1D.file.runs.length);
    expect("cells" in pages.Conv1D).toBe(false); // the page holds no run: its file does
  });

  it("draws both heatmaps from the page's compact grid: a cell per dtype and policy (and run), classed and labelled", () => {
    const { grid } = pages.Conv1D;
    const cells = conv.cells;
    const byCell = drawGrid(grid, false);
    expect(byCell.getAttribute("data-testid")).toBe("heatmap");
    const drawn = [...byCell.querySelectorAll("td[data-cell]")];
    expect(drawn).toHaveLength(cells.length);
    drawn.forEach((td) => {
      const cell = cells[Number(td.dataset.cell)];
      expect([td.dataset.dtype, td.dataset.policy, td.dataset.class]).toEqual([cell.input_dtype, cell.policy, cell.classification]);
      expect(td.classList.contains(`ax-k-${cell.classification}`)).toBe(true);
      expect(td.title).toBe(`${cell.input_dtype} under ${cell.policy}: ${cell.classification}`);
    });
    const empty = byCell.querySelectorAll("td.ax-none").length;
    expect(empty + drawn.length).toBe(grid.dtypes.length * grid.policies.length);
    const byRun = drawGrid(grid, true);
    expect(byRun.getAttribute("data-testid")).toBe("heatmap-runs");
    expect([...byRun.querySelectorAll("tr:first-child th")].slice(1).map((th) => th.textContent))
      .toEqual(grid.policies.flatMap((p) => grid.runs.map((r) => p + r)));
    const torch = [...byRun.querySelectorAll("td[data-cell]")].filter((td) => td.title.includes(" on torch:"));
    expect(torch).toHaveLength(cells.filter((c) => c.runs.torch).length);
    for (const td of torch) {
      const run = cells[Number(td.dataset.cell)].runs.torch;
      expect(td.dataset.class).toBe(run.classification);
      expect(td.textContent).toBe(run.status === "ok" ? run.outcome : "raises");
    }
    // a run a cell lacks is drawn empty, not another run's answer
    const partial = { ...grid, cells: grid.cells.map((c) => [...c.slice(0, 4), -1, -1, ...c.slice(6)]) };
    const first = drawGrid(partial, true).querySelector("tr:nth-child(2) td");
    expect(first.classList.contains("ax-none")).toBe(true);
  });

  it("draws an op of an atlas of layers and ops in one policy column, headed as any policy", () => {
    // the grid views/_atlas_data.py lays out for an op probed once (Atlas.op_policy)
    const note = "any policy: an op reads none";
    const grid = { dtypes: ["int32", "float16"], policies: ["float32"], policy_note: note, runs: ["numpy"], classes: ["keeps-input"], labels: ["int32", "float16"], cells: [[0, 0, 0, 0, 0, 0], [1, 0, 0, 1, 0, 1]] };
    for (const perRun of [false, true]) {
      const table = drawGrid(grid, perRun);
      const heads = [...table.querySelectorAll("tr:first-child th")].slice(1);
      expect(heads).toHaveLength(1);
      expect(heads[0].querySelector("[data-testid=policy-note]").textContent).toBe(note);
      expect(table.querySelectorAll("td.ax-none")).toHaveLength(0); // no empty columns
      expect(table.querySelector("td[data-cell='1']").title).toBe(`float16 under float32 (${note})${perRun ? " on numpy" : ""}: keeps-input`);
    }
    const cell = { input_dtype: "int32", policy: "float32", compute_dtype: "float32", classification: "keeps-input", runs: {} };
    const [title] = cellDetail(cell, { base: "", target: "ops.abs", grid });
    expect(title.textContent).toBe(`ops.abs on int32 under float32 (compute float32, ${note}): keeps-input`);
    expect(drawGrid(pages.Conv1D.grid, false).querySelector("[data-testid=policy-note]")).toBeNull();
  });

  it("draws a layer of an atlas of layers and ops without weak-scalar rows, captioned why", () => {
    // the grid views/_atlas_data.py lays out for a layer probed on arrays only (Atlas.op_dtypes)
    const note = "no python_int, python_float: arrays only: a layer takes no Python scalar";
    const grid = { dtypes: ["int8", "float16"], dtype_note: note, policies: ["float32", "mixed_float16"], policy_note: null, runs: ["numpy"], classes: ["casts-to-compute"], labels: ["float32", "float16"], cells: [[0, 0, 0, 0, 0, 0], [0, 1, 0, 1, 0, 1], [1, 0, 0, 0, 0, 0], [1, 1, 0, 1, 0, 1]] };
    for (const perRun of [false, true]) {
      const table = drawGrid(grid, perRun);
      const rows = [...table.querySelectorAll("tr th.ax-row")].map((th) => th.textContent);
      expect(rows).toEqual(["int8", "float16"]); // no python_* rows, no empty ones
      expect(table.querySelector("[data-testid=dtype-note]").textContent).toBe(note);
      expect(table.querySelectorAll("td.ax-none")).toHaveLength(0);
    }
    // an op's grid has its weak-scalar rows, uncaptioned; a page of a layer-only atlas neither
    const op = { ...grid, dtypes: ["int8", "python_int"], dtype_note: null, policies: ["float32"] };
    const table = drawGrid(op, false);
    expect([...table.querySelectorAll("th.ax-row")].map((th) => th.textContent)).toEqual(["int8", "python_int"]);
    expect(table.querySelector("[data-testid=dtype-note]")).toBeNull();
    expect(drawGrid(pages.Conv1D.grid, false).querySelector("[data-testid=dtype-note]")).toBeNull();
  });

  it("says so in the detail when a target's data file cannot be loaded", async () => {
    await page(conv, "", async (_, src) => { throw new Error(`the atlas data file ${src} could not be loaded`); });
    expect(byTestId(document, "load-error").textContent).toContain(conv.data);
    expect(document.querySelector("td[data-cell='0']").classList.contains("ax-chosen")).toBe(false);
  });

  it("wires a page: loads its data file, the search filters rows, the URL's cell opens, a click opens another", async () => {
    const cell = conv.cells[0];
    const asked = await page(conv, `#${cell.input_dtype}/${cell.policy}`);
    expect(asked.sort()).toEqual([`${conv.base}assets/targets.js`, `${conv.base}${conv.data}`]);
    expect(byTestId(document, "detail-title").textContent).toContain(cell.classification);
    expect(document.querySelector("td[data-cell='0']").classList.contains("ax-chosen")).toBe(true);
    const input = document.getElementById("ax-search");
    input.value = "nothing-like-it";
    input.dispatchEvent(new Event("input"));
    expect(document.querySelector("tr[data-target]").hidden).toBe(true);
    input.value = "conv";
    input.dispatchEvent(new Event("input"));
    expect(allByTestId(document, "search-hit").map((a) => a.textContent)).toEqual(["Conv1D"]);
    document.getElementById("ax-detail").replaceChildren();
    document.querySelector("td[data-cell='0']").dispatchEvent(new MouseEvent("click"));
    expect(allByTestId(document, "run")).toHaveLength(Object.keys(cell.runs).length);
  });

  it("takes every colour from the one palette: errors, unknown dtypes and verdicts", () => {
    const run = { ...conv.cells[0].runs.torch, cast_path: [] };
    const chip = castPath(run, {}).querySelector(".ax-chip");
    expect(chip.style.background).toBe(PALETTE.ui.error);
    const head = cellDetail(conv.cells[0], { ...conv, colors: {} })[1].querySelector(".ax-badge");
    expect(head.style.background).toBe(hexToRgb(PALETTE.verdicts[conv.cells[0].runs.jax.verdict]));
    expect(head.style.color).toBe(hexToRgb(PALETTE.text_on[PALETTE.verdicts[conv.cells[0].runs.jax.verdict]] ?? "#ffffff"));
    expect(cellDetail({ ...conv.cells[0], runs: { x: { ...run, verdict: "no-such" } } }, conv)[1]
      .querySelector(".ax-badge").style.background).toBe(PALETTE.ui.muted);
  });
});

function hexToRgb(hex) {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return `rgb(${r}, ${g}, ${b})`;
}
