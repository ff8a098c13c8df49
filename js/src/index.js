// @ts-check
// anywidget entry point of dtype_explorer.DtypeExplorer.
import { App } from "./app.js";
import { TRAITS } from "./contract.js";
import { watchTheme } from "./theme.js";
import "./widget.css";

/** @typedef {import("./contract-types.js").WidgetRequest} WidgetRequest */


function render({ model, el }) {
  const app = new App(el, {
    /** @param {WidgetRequest} request */
    send(request) {
      model.set("request", request);
      model.save_changes();
    },
  });
  let queued = false;
  const redraw = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      app.update(Object.fromEntries(TRAITS.map((k) => [k, model.get(k)])));
    });
  };
  for (const key of TRAITS) model.on(`change:${key}`, redraw);
  redraw();
  // light or dark as the page around it is (JupyterLab, VS Code, marimo, Colab), followed live
  const stopTheme = watchTheme(el, (theme) => app.setTheme(theme));
  return () => {
    stopTheme();
    for (const key of TRAITS) model.off(`change:${key}`, redraw);
  };
}

export default { render };
