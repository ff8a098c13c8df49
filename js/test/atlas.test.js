import { beforeEach, describe, expect, it } from "vitest";
import { castPath, cellDetail, matches, start, traceSummary } from "../src/atlas.js";
import { PALETTE } from "../src/palette.js";
import { allByTestId, byTestId, fixture } from "./helpers.js";

// The data of two target pages of the atlas site, built by views/_atlas.py from real probes.
const pages = fixture("atlas-pages");
const conv = pages.Conv1D;
const softmax = pages.Softmax;

function page(data, hash = "") {
  document.body.innerHTML = [
    "<input id='ax-search'><ul id='ax-hits'></ul>",
    "<table>",
    ...data.targets.map((t) => `<tr data-target='${t.name}'><td>${t.name}</td></tr>`),
    ...data.cells.map((_, i) => `<tr><td data-cell='${i}'></td></tr>`),
    "</table><div id='ax-detail'></div>",
    `<script id='ax-data' type='application/json'>${JSON.stringify(data)}</script>`,
  ].join("");
  window.history.replaceState(null, "", hash || "#");
  start(document);
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

  it("wires a page: the search filters rows, the URL's cell opens, a click opens another", () => {
    const cell = conv.cells[0];
    page(conv, `#${cell.input_dtype}/${cell.policy}`);
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
