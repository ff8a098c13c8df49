// @ts-check
// The atlas site's script. `npm run build` bundles src/atlas-page.js (which calls `start`) into
// dtype_explorer/static/atlas.js, and views/_atlas.py inlines that file into every page: no CDN,
// no server. It reads the page's data (<script id="ax-data" type="application/json">), wires
// the search box, loads a target page's runs from its own data file (data/<name>.js, a classic
// script calling window.dxAtlasTarget: fetch is refused from file://, a <script src> is not),
// and draws a cell's detail (each run's cast path, error, trace summary, versions) when a
// heatmap cell is chosen. Every fact it shows was computed in Python
// (records/_atlas.py); every colour is the one palette's (palette.js) or the page's
// `colors` (a dtype's colour, from views/_palette.py).
import { h } from "./dom.js";
import { kindColor, mark, textOn, verdictColor } from "./palette.js";

/**
 * @typedef {{stage: string, dtype: string, name?: string, index?: number, changed?: boolean,
 *   note?: string}} AtlasStep
 * @typedef {{status: string, outcome: string, classification: string, output_dtype?: string,
 *   documented_dtype?: string, declared_dtype?: string, verdict: string,
 *   cast_path?: AtlasStep[], error_type?: string, error_where?: string, error_message?: string,
 *   device: string, trace_ops?: number, first_change?: string, first_change_note?: string,
 *   first_change_at?: string, first_nonfinite?: string, trace_flags?: string[]}} AtlasRun
 * @typedef {{input_dtype: string, policy: string, compute_dtype: string,
 *   classification: string, runs: Record<string, AtlasRun>}} AtlasCell
 * @typedef {{name: string, href: string}} AtlasTarget
 * @typedef {{base: string, targets?: AtlasTarget[], colors?: Record<string, string>,
 *   versions?: Record<string, Record<string, string>>, target?: string, data?: string,
 *   grid?: GridData, cells?: AtlasCell[]}} AtlasData
 * @typedef {{target: string, strings: string[], run_fields: string[], run_kinds: string,
 *   step_fields: string[], step_kinds: string, steps: any[][], runs: any[][],
 *   run_names: string[], cells: number[][]}} TargetFile
 * @typedef {{dtypes: string[], dtype_note?: string | null, policies: string[],
 *   policy_note?: string | null, runs: string[], classes: string[], labels: string[],
 *   cells: number[][]}} GridData
 * @typedef {(doc: Document, src: string, callback?: string) => Promise<any>} Loader
 */

/** A row of a data file back as its record: each field by its kind (`s` a text of `strings`,
 *  `S` a list of them, `p` cast-path steps of `steps`, `v` as it is); absent ones left out.
 *  @param {any[]} row @param {string[]} fields @param {string} kinds @param {string[]} strings
 *  @param {any[]} [steps] */
function unpack(row, fields, kinds, strings, steps = []) {
  /** @type {Record<string, any>} */
  const out = {};
  row.forEach((value, i) => {
    if (value === null || value === undefined) return;
    const kind = kinds[i];
    out[fields[i]] =
      kind === "s" ? strings[value]
      : kind === "S" ? value.map((/** @type {number} */ j) => strings[j])
      : kind === "p" ? value.map((/** @type {number} */ j) => steps[j])
      : value;
  });
  return out;
}

/** The cells of a target's data file with each run in full, as the atlas's records dump them
 *  (the file holds each distinct run, text and cast-path step once; views/_atlas_data.py).
 *  @param {TargetFile} file @returns {AtlasCell[]} */
export function expandCells(file) {
  const { strings } = file;
  const steps = file.steps.map((row) => unpack(row, file.step_fields, file.step_kinds, strings));
  const runs = file.runs.map((row) => /** @type {AtlasRun} */ (unpack(row, file.run_fields, file.run_kinds, strings, steps)));
  return file.cells.map(([dtype, policy, compute, kind, ...places]) => ({
    input_dtype: strings[dtype],
    policy: strings[policy],
    compute_dtype: strings[compute],
    classification: strings[kind],
    runs: Object.fromEntries(
      places.flatMap((place, i) => (place < 0 ? [] : [[file.run_names[i], runs[place]]])),
    ),
  }));
}

/** One heatmap of a target page, drawn from the page's compact grid (views/_atlas_data.py):
 *  the input dtypes the target was probed on down (a layer of an atlas of layers and ops: no
 *  weak Python scalar rows, the caption `dtype_note` says why), the policies it was probed under
 *  across (an op of such an atlas: one, headed by `policy_note`; `perRun`: a column per policy
 *  and run), each cell
 *  classed `ax-k-<class>` (the one palette's fill, in the site's stylesheet), its label and a
 *  tooltip, `data-cell` its place in the target's cells.
 *  @param {GridData} grid @param {boolean} perRun @returns {HTMLTableElement} */
export function drawGrid(grid, perRun) {
  const runs = perRun ? grid.runs : [null];
  // an op of an atlas of layers and ops: one column, probed once, standing for every policy
  const note = grid.policy_note ? [h("br"), h("small", { class: "ax-muted", testid: "policy-note" }, grid.policy_note)] : [];
  const head = grid.policies.flatMap((p) => runs.map((r) => h("th", {}, p, note, r ? [h("br"), r] : [])));
  /** @type {Map<string, [number[], number]>} */
  const at = new Map(grid.cells.map((cell, i) => [`${cell[0]}/${cell[1]}`, [cell, i]]));
  const rows = grid.dtypes.map((dtype, d) => {
    const tds = grid.policies.flatMap((policy, p) => {
      const found = at.get(`${d}/${p}`);
      return runs.map((run, r) => {
        const [cell, index] = found ?? [null, -1];
        const slot = run === null ? 2 : 4 + 2 * r;
        if (!cell || cell[slot] < 0) return h("td", { class: "ax-cell ax-none" });
        const kind = grid.classes[cell[slot]];
        const under = grid.policy_note ? `${policy} (${grid.policy_note})` : policy;
        const tip = `${dtype} under ${under}${run ? ` on ${run}` : ""}: ${kind}`;
        return h(
          "td",
          { class: `ax-cell ax-k-${kind}`, "data-cell": index, testid: "cell", "data-dtype": dtype, "data-policy": policy, "data-class": kind, title: tip },
          grid.labels[cell[slot + 1]],
        );
      });
    });
    return h("tr", {}, h("th", { class: "ax-row" }, dtype), tds);
  });
  const caption = grid.dtype_note ? [h("caption", { class: "ax-muted", testid: "dtype-note" }, grid.dtype_note)] : [];
  return /** @type {HTMLTableElement} */ (
    h("table", { class: "ax-grid", testid: perRun ? "heatmap-runs" : "heatmap" }, caption, h("tr", {}, h("th"), head), rows)
  );
}

/** Draw a target page's heatmaps into its `[data-grid=cells]` and `[data-grid=runs]` boxes.
 *  @param {Document} doc @param {GridData} grid */
export function drawGrids(doc, grid) {
  for (const box of doc.querySelectorAll("[data-grid]")) {
    box.replaceChildren(drawGrid(grid, box.getAttribute("data-grid") === "runs"));
  }
}

/** The site's list of targets (views/_atlas.py writes it once, not into every page). */
export const TARGETS_FILE = "assets/targets.js";

/** Load one of the site's data files: a classic script that calls `window[callback]` (a
 *  target's data file: `dxAtlasTarget`; the targets: `dxAtlasTargets`) with its JSON (works
 *  from file://, where fetch does not). @type {Loader} */
export function loadScript(doc, src, callback = "dxAtlasTarget") {
  return new Promise((resolve, reject) => {
    const win = /** @type {any} */ (doc.defaultView);
    win[callback] = (/** @type {any} */ file) => resolve(file);
    const script = doc.createElement("script");
    script.src = src;
    script.onerror = () => reject(new Error(`the atlas data file ${src} could not be loaded`));
    doc.head.appendChild(script);
  });
}

/** A dtype's chip, coloured as the page's `colors` say (the error colour when unknown).
 *  @param {string} dtype @param {Record<string, string>} [colors] */
export function chip(dtype, colors) {
  const color = colors?.[dtype] ?? kindColor("error");
  return h("span", { class: "ax-chip", style: { background: color, color: textOn(color) } }, dtype);
}

/** A verdict's badge, in the palette's verdict colour. @param {string} verdict */
export function badge(verdict) {
  const color = verdictColor(verdict);
  return h("span", { class: "ax-badge", style: { background: color, color: textOn(color) }, title: verdict }, [mark(verdict), " ", verdict]);
}

/** The targets whose name holds `query` (case-insensitive; none for an empty query).
 *  @param {AtlasTarget[]} targets @param {string} query */
export function matches(targets, query) {
  const q = query.trim().toLowerCase();
  if (!q) return [];
  return targets.filter((t) => t.name.toLowerCase().includes(q));
}

/** @param {AtlasStep} step @param {Record<string, string>} [colors] */
function stepChip(step, colors) {
  const numbered = step.index != null && step.index > 0 ? ` ${step.index}` : "";
  const label = step.stage + (step.name ? ` ${step.name}` : numbered);
  return h(
    "span",
    { class: ["ax-step", step.changed && "ax-changed"], title: step.note || "", "data-stage": step.stage },
    chip(step.dtype, colors),
    h("small", {}, label),
  );
}

/** A run's cast path: its steps' chips joined by arrows, then its outcome when it raised.
 *  @param {AtlasRun} run @param {Record<string, string>} [colors] */
export function castPath(run, colors) {
  const parts = [];
  for (const [i, step] of (run.cast_path ?? []).entries()) {
    if (i) parts.push(h("span", { class: "ax-arrow" }, "\u2192"));
    parts.push(stepChip(step, colors));
  }
  if (run.status !== "ok") {
    if (parts.length) parts.push(h("span", { class: "ax-arrow" }, "\u2192"));
    parts.push(h("span", { class: "ax-chip", style: { background: kindColor("error") } }, run.outcome));
  }
  return h("div", { class: "ax-path", testid: "cast-path" }, parts);
}

/** The op trace in brief, as the atlas summarised it (null when no trace was recorded).
 *  @param {AtlasRun} run */
export function traceSummary(run) {
  if (!run.trace_ops) return null;
  const change = run.first_change
    ? `; first dtype change at ${run.first_change}` +
      (run.first_change_note ? ` (${run.first_change_note})` : "") +
      (run.first_change_at ? ` ${run.first_change_at}` : "")
    : "";
  return h(
    "div",
    { class: "ax-note", testid: "trace-summary" },
    `op trace: ${run.trace_ops} ops`,
    change,
    run.first_nonfinite ? `; first inf/NaN at ${run.first_nonfinite}` : "",
    (run.trace_flags ?? []).map((flag) => h("div", { class: "ax-flag", testid: "trace-flag", style: { color: kindColor("error") } }, flag)),
  );
}

/** One run of a cell (`jax`, `torch/cuda`, ...): its outcome, cast path, error, trace, versions.
 *  @param {string} name @param {AtlasRun} run @param {AtlasData} data */
export function showRun(name, run, data) {
  const versions = data.versions?.[name.split("/")[0]] ?? {};
  const notes = (run.cast_path ?? [])
    .filter((s) => s.changed && s.note)
    .map((s) => h("div", { class: "ax-note" }, `${s.stage}${s.name ? ` ${s.name}` : ""}: ${s.note}`));
  const said = `documented ${run.documented_dtype || "\u2014"} \u00b7 declared ${run.declared_dtype || "\u2014"} \u00b7 ${run.classification}`;
  const where = Object.entries(versions).map(([k, v]) => `${k} ${v}`).join(", ");
  return h(
    "section",
    { class: "ax-run", testid: "run", "data-run": name },
    h(
      "div",
      { class: "ax-run-head" },
      h("strong", {}, name),
      chip(run.status === "ok" ? (run.output_dtype ?? run.outcome) : run.outcome, data.colors),
      badge(run.verdict),
      h("span", { class: "ax-muted" }, said),
    ),
    castPath(run, data.colors),
    h("div", {}, notes),
    run.error_type
      ? h("pre", { class: "ax-error", testid: "error" }, `${run.error_type} (in ${run.error_where}): ${run.error_message || ""}`)
      : null,
    traceSummary(run),
    h("div", { class: "ax-note", testid: "versions" }, `device ${run.device} \u00b7 ${where}`),
  );
}

/** A cell's detail: its title, then each run.
 *  @param {AtlasCell} cell @param {AtlasData} data */
export function cellDetail(cell, data) {
  const note = data.grid?.policy_note ? `, ${data.grid.policy_note}` : "";
  const title = `${data.target} on ${cell.input_dtype} under ${cell.policy} (compute ${cell.compute_dtype}${note}): ${cell.classification}`;
  return [
    h("h2", { testid: "detail-title" }, title),
    h("div", {}, Object.entries(cell.runs).map(([name, run]) => showRun(name, run, data))),
  ];
}

/** @param {Document} doc @param {AtlasData} data (its `targets` read at each keystroke) */
function wireSearch(doc, data) {
  const input = /** @type {HTMLInputElement | null} */ (doc.getElementById("ax-search"));
  const hits = doc.getElementById("ax-hits");
  if (!input || !hits) return;
  input.addEventListener("input", () => {
    const found = matches(data.targets ?? [], input.value);
    hits.replaceChildren(
      ...found.slice(0, 40).map((t) => h("li", {}, h("a", { href: data.base + t.href, testid: "search-hit" }, t.name))),
    );
    const q = input.value.trim().toLowerCase();
    for (const row of /** @type {NodeListOf<HTMLElement>} */ (doc.querySelectorAll("tr[data-target]"))) {
      row.hidden = q !== "" && !(row.getAttribute("data-target") ?? "").toLowerCase().includes(q);
    }
  });
  input.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    const found = matches(data.targets ?? [], input.value);
    if (found.length) doc.defaultView?.location.assign(data.base + found[0].href);
  });
}

/** Wire a page of the atlas site: the search box (its targets loaded from TARGETS_FILE unless
 *  the page holds them), and on a target page its grids drawn, its runs loaded from its data
 *  file, then the cells' detail (the cell named by the URL's `#dtype/policy` shown
 *  first). Resolves once the page is wired.
 *  @param {Document} doc @param {Loader} [load] */
export async function start(doc, load = loadScript) {
  const data = /** @type {AtlasData} */ (JSON.parse(doc.getElementById("ax-data")?.textContent ?? "{}"));
  wireSearch(doc, data);
  if (data.grid) drawGrids(doc, data.grid);
  const targets = data.targets
    ? null
    : load(doc, data.base + TARGETS_FILE, "dxAtlasTargets").then(
        (/** @type {AtlasTarget[]} */ list) => { data.targets = list; },
        () => { data.targets = []; }, // the search finds nothing; the page still works
      );
  const detail = doc.getElementById("ax-detail");
  if (!detail || !data.data) return void (await targets);
  try {
    const [file] = await Promise.all([load(doc, data.base + data.data), targets]);
    data.cells = expandCells(file);
  } catch (error) {
    detail.replaceChildren(h("p", { class: "ax-error", testid: "load-error" }, String(/** @type {Error} */ (error).message)));
    return;
  }
  wireCells(doc, detail, data, data.cells);
}

/** @param {Document} doc @param {HTMLElement} detail @param {AtlasData} data
 *  @param {AtlasCell[]} cells */
function wireCells(doc, detail, data, cells) {
  const win = doc.defaultView;
  const show = (/** @type {number} */ index, { scroll = false } = {}) => {
    const cell = cells[index];
    for (const c of doc.querySelectorAll(".ax-chosen")) c.classList.remove("ax-chosen");
    for (const c of doc.querySelectorAll(`[data-cell="${index}"]`)) c.classList.add("ax-chosen");
    detail.replaceChildren(...cellDetail(cell, data));
    // A click answers where the eye is: the detail scrolls into view and is highlighted.
    detail.classList.remove("ax-focus");
    void detail.offsetWidth; // restart the highlight on every click
    detail.classList.add("ax-focus");
    if (scroll && typeof detail.scrollIntoView === "function") detail.scrollIntoView({ behavior: "smooth", block: "nearest" });
    const hash = `#${cell.input_dtype}/${cell.policy}`;
    if (win && win.location.hash !== hash) win.history.replaceState(null, "", hash);
  };
  for (const td of doc.querySelectorAll("td[data-cell]")) {
    td.addEventListener("click", () => show(Number(td.getAttribute("data-cell")), { scroll: true }));
  }
  detail.setAttribute("data-loaded", "true");
  const wanted = decodeURIComponent(win?.location.hash.slice(1) ?? "").split("/");
  cells.forEach((cell, i) => {
    if (cell.input_dtype === wanted[0] && cell.policy === wanted[1]) show(i);
  });
}
