// anywidget entry point of dtype_explorer.DtypeExplorer.
import { App } from "./app.js";
import "./widget.css";

const KEYS = [
  "catalog",
  "defaults",
  "dtypes",
  "policies",
  "presets",
  "available_backends",
  "request",
  "request_id",
  "results",
  "timings",
  "verdict",
  "promotion",
  "error",
];

function render({ model, el }) {
  const app = new App(el, {
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
      app.update(Object.fromEntries(KEYS.map((k) => [k, model.get(k)])));
    });
  };
  for (const key of KEYS) model.on(`change:${key}`, redraw);
  redraw();
  return () => {
    for (const key of KEYS) model.off(`change:${key}`, redraw);
  };
}

export default { render };
