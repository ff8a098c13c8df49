// @ts-check
// The `anywidget` model module for the docs' widget snapshots: a saved AnyModel's state carries
// its front end as text (`_esm`, `_css`); the view imports that ES module from a blob URL and
// calls its `render({ model, el })`, as anywidget's own front end does. No kernel is behind it:
// `save_changes` and `send` go nowhere, so a click redraws from the saved state and nothing is
// recomputed.
import { DOMWidgetModel, DOMWidgetView } from "@jupyter-widgets/base";

/** @type {Map<string, Promise<any>>} one import per front end's text */
const modules = new Map();

/** The ES module whose source is `esm`, imported once. @param {string} esm */
export function importEsm(esm) {
  let loaded = modules.get(esm);
  if (!loaded) {
    const url = URL.createObjectURL(new Blob([esm], { type: "text/javascript" }));
    loaded = import(/* @vite-ignore */ url).finally(() => URL.revokeObjectURL(url));
    modules.set(esm, loaded);
  }
  return loaded;
}

/** Add the widget's `_css` to the page once per widget class. @param {any} model */
function addCss(model) {
  const css = model.get("_css");
  const id = `anywidget-css-${model.get("_anywidget_id") ?? model.model_id}`;
  if (!css || document.getElementById(id)) return;
  const style = document.createElement("style");
  style.id = id;
  style.textContent = css;
  document.head.append(style);
}

/** What the widget's `render` sees as its model: anywidget's model interface, kernel-less. */
function facade(model, context) {
  return {
    get: (key) => model.get(key),
    set: (key, value) => model.set(key, value),
    save_changes() {}, // a snapshot: no kernel to save to
    send() {},
    on: (name, callback) => model.on(name, callback, context),
    off: (name, callback) => model.off(name ?? null, callback ?? null, context),
    widget_manager: model.widget_manager,
  };
}

export class AnyModel extends DOMWidgetModel {
  /** The snapshot has no comm: a change stays on the page. */
  save_changes() {}
  send() {}
}

export class AnyView extends DOMWidgetView {
  async render() {
    addCss(this.model);
    const module = await importEsm(this.model.get("_esm"));
    const widget = module.default ?? module;
    const render = typeof widget === "function" ? (await widget()).render : widget.render;
    const cleanup = await render?.({ model: facade(this.model, this), el: this.el });
    this.once("remove", () => (typeof cleanup === "function" ? cleanup() : undefined));
  }
}
