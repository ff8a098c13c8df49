// @ts-check
// The docs' widget snapshots (docs/_hooks/examples.py adds this script to a lesson page with saved
// widget state): @jupyter-widgets/html-manager draws every saved view in place, as myst-nb's
// `nb_ipywidgets_js` does, from the page's own files (no CDN, no kernel). ipywidgets' models come
// with html-manager; `anywidget` ones from ./anywidget.js.
import "@fortawesome/fontawesome-free/css/all.min.css";
import "@lumino/widgets/style/index.css";
import { HTMLManager } from "@jupyter-widgets/html-manager/lib/htmlmanager.js";
import * as anywidget from "./anywidget.js";

const STATE = 'script[type="application/vnd.jupyter.widget-state+json"]';
const VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]';
/** What the page says above each snapshot (the hook's SNAPSHOT_NOTE, on this script's tag). */
const NOTE = document.currentScript?.dataset.snapshotNote ?? "A snapshot: it responds to clicks, but nothing is recomputed.";

/** The note above a snapshot, as a Material admonition. */
function note() {
  const box = document.createElement("div");
  box.className = "admonition note dx-snapshot-note";
  const title = document.createElement("p");
  title.className = "admonition-title";
  title.textContent = "Widget snapshot";
  const text = document.createElement("p");
  text.textContent = NOTE;
  box.append(title, text);
  return box;
}

/** Where a module the page names comes from. @param {string} name */
async function loader(name) {
  if (name === "anywidget") return anywidget;
  throw new Error(`widget snapshot: no front end for module ${name} in this site`);
}

/** Draw the views of one saved widget state. @param {HTMLScriptElement} tag */
async function renderState(tag) {
  const manager = new HTMLManager({ loader });
  const models = await manager.set_state(JSON.parse(tag.textContent ?? "{}"));
  const byId = new Map(models.map((m) => [m.model_id, m]));
  for (const viewTag of document.querySelectorAll(VIEW)) {
    const model = byId.get(JSON.parse(viewTag.textContent ?? "{}").model_id);
    if (!model || !viewTag.parentElement) continue;
    const host = document.createElement("div");
    host.className = "widget-subarea dx-snapshot";
    // The note goes above the widgets one can click (anywidget's); a progress bar gets none.
    if (model.get("_model_module") === "anywidget") viewTag.parentElement.insertBefore(note(), viewTag);
    viewTag.parentElement.insertBefore(host, viewTag);
    await manager.display_view(manager.create_view(model), host);
  }
}

async function main() {
  for (const tag of document.querySelectorAll(STATE)) await renderState(/** @type {HTMLScriptElement} */ (tag));
  document.documentElement.dataset.widgetSnapshots = "rendered";
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
else main();
