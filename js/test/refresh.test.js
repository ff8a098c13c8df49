// The widget's own state across updates: every option list follows the model, not only the
// first state it rendered (issue 39 item 25: the Keras release picker never refreshed).
import { describe, expect, it } from "vitest";
import { TRAITS } from "../src/contract.js";
import widget from "../src/index.js";
import { byTestId, fixture } from "./helpers.js";

const state = fixture("widget-state");
const installedOnly = { ...state, engines: [state.engines[0]], results: {}, verdict: "", promotion: {}, error: "", timings: {} };

/** An anywidget model's surface (get, set, on, off, save_changes), holding traits in memory:
 *  `change` sets traits as the kernel does and fires their change events. */
function widgetModel(traits) {
  const values = { ...traits };
  const handlers = {};
  return {
    get: (key) => values[key],
    set: (key, value) => (values[key] = value),
    save_changes: () => {},
    on: (event, fn) => (handlers[event] ??= new Set()).add(fn),
    off: (event, fn) => handlers[event]?.delete(fn),
    change(updates) {
      Object.assign(values, updates);
      for (const key of Object.keys(updates)) for (const fn of handlers[`change:${key}`] ?? []) fn();
    },
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
const engineLabels = (el) => [...byTestId(el, "engine").querySelectorAll("option")].map((o) => o.textContent);

describe("the widget follows its model", () => {
  it("offers an engine created after the first render, on each later update", async () => {
    const model = widgetModel(Object.fromEntries(TRAITS.map((k) => [k, installedOnly[k]])));
    const el = document.createElement("div");
    document.body.replaceChildren(el);
    const dispose = widget.render({ model, el });
    await settle();
    expect(engineLabels(el)).toEqual([state.engines[0].label]);
    // explorer.refresh_engines() after dx.engines.create("keras==3.11.3"): a new list
    model.change({ engines: state.engines.slice(0, 2) });
    await settle();
    expect(engineLabels(el)).toEqual(state.engines.slice(0, 2).map((c) => c.label));
    // and again (tf_keras created too): the second refresh shows as well
    model.change({ engines: state.engines });
    await settle();
    expect(engineLabels(el)).toEqual(state.engines.map((c) => c.label));
    // the other option lists follow the model too
    model.change({ modes: ["call", "predict"], quantize_modes: ["int8"] });
    await settle();
    expect([...byTestId(el, "mode").querySelectorAll("option")].map((o) => o.value)).toEqual(["call", "predict"]);
    expect([...byTestId(el, "quantize").querySelectorAll("option")].map((o) => o.value)).toEqual(["", "int8"]);
    dispose();
  });
});
