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
 * @typedef {{base: string, targets: AtlasTarget[], colors?: Record<string, string>,
 *   versions?: Record<string, Record<string, string>>, target?: string, data?: string,
 *   cells?: AtlasCell[]}} AtlasData
 * @typedef {{target: string, runs: AtlasRun[], cells: Array<Omit<AtlasCell, "runs"> &
 *   {runs: Record<string, number>}>}} TargetFile
 * @typedef {(doc: Document, src: string) => Promise<TargetFile>} Loader
 */

/** The cells of a target's data file with each run in full (the file holds each distinct run
 *  once; a cell names its place). @param {TargetFile} file @returns {AtlasCell[]} */
export function expandCells(file) {
  return file.cells.map((cell) => ({
    ...cell,
    runs: Object.fromEntries(Object.entries(cell.runs).map(([name, i]) => [name, file.runs[i]])),
  }));
}

/** Load a target's data file: a classic script that calls `window.dxAtlasTarget` with its
 *  JSON (works from file://, where fetch does not). @type {Loader} */
export function loadScript(doc, src) {
  return new Promise((resolve, reject) => {
    const win = /** @type {any} */ (doc.defaultView);
    win.dxAtlasTarget = (/** @type {TargetFile} */ file) => resolve(file);
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
  const title = `${data.target} on ${cell.input_dtype} under ${cell.policy} (compute ${cell.compute_dtype}): ${cell.classification}`;
  return [
    h("h2", { testid: "detail-title" }, title),
    h("div", {}, Object.entries(cell.runs).map(([name, run]) => showRun(name, run, data))),
  ];
}

/** @param {Document} doc @param {AtlasData} data */
function wireSearch(doc, data) {
  const input = /** @type {HTMLInputElement | null} */ (doc.getElementById("ax-search"));
  const hits = doc.getElementById("ax-hits");
  if (!input || !hits) return;
  input.addEventListener("input", () => {
    const found = matches(data.targets, input.value);
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
    const found = matches(data.targets, input.value);
    if (found.length) doc.defaultView?.location.assign(data.base + found[0].href);
  });
}

/** Wire a page of the atlas site: the search box, and on a target page its runs loaded from
 *  its data file, then the cells' detail (the cell named by the URL's `#dtype/policy` shown
 *  first). Resolves once the page is wired.
 *  @param {Document} doc @param {Loader} [load] */
export async function start(doc, load = loadScript) {
  const data = /** @type {AtlasData} */ (JSON.parse(doc.getElementById("ax-data")?.textContent ?? "{}"));
  wireSearch(doc, data);
  const detail = doc.getElementById("ax-detail");
  if (!detail || !data.data) return;
  try {
    data.cells = expandCells(await load(doc, data.base + data.data));
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
