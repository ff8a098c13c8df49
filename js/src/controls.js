// @ts-check
// The control panel. It edits a draft of the request and hands each change to `onRequest`;
// the Python side validates every value it receives, this side only gives early hints.
import { h, replaceChildren } from "./dom.js";
import { groupDtypes } from "./dtype.js";

/** @typedef {import("./contract-types.js").WidgetRequest} WidgetRequest */

const TYPING_DELAY_MS = 600;

/** The Keras picker's help: it offers created engines only, and says how to make one. */
export const ENGINE_HELP =
  'Which Keras answers: the installed one, or an engine created in Python with dx.engines.create("keras==3.11.3") ' +
  '(or "tf_keras" for Keras 2, tensorflow only), then explorer.refresh_engines(). The widget never creates one.';

export const PRECISION_HELP =
  "float32 matmul precision during the probe, put back afterwards: highest (TF32 off), tf32, or default " +
  "(each backend's own: TF32 on for jax and tensorflow on Ampere and later); as set: leave the backends' settings.";

export const QUANTIZE_HELP =
  "Quantize the layer before the call as Model.quantize does (the installed Keras's modes that need no " +
  "calibration data): the card shows the stored variables and the compute path; none: the float layer. " +
  "A layer Keras cannot quantize (Conv2D) answers Keras's refusal; ops have no weights.";

/** The engine a picker value stands for: `""` is the installed Keras (`null`). */
const engineOf = (value) => (value ? value : null);

/**
 * The request after choosing `engine`: the backends it cannot run on are dropped (Keras 2 runs
 * on tensorflow only); when none is left, the ones it runs on are chosen.
 * @param {Omit<WidgetRequest, "nonce">} request
 * @param {string | null} engine
 * @param {{engine: string | null, backends: string[] | null}[]} engines
 * @param {string[]} available
 */
export function reengine(request, engine, engines, available) {
  const runsOn = engines.find((c) => c.engine === engine)?.backends;
  if (!runsOn) return { ...request, engine };
  const kept = request.backends.filter((b) => runsOn.includes(b));
  return { ...request, engine, backends: kept.length ? kept : available.filter((b) => runsOn.includes(b)) };
}

/** Parse JSON text; `{ok, value}` or `{ok: false, message}`. */
export function parseJson(text) {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, message: error.message };
  }
}

/** How many inputs a shape text describes, for the number of dtype pickers only (the kernel
 *  reads the shape, dtype_explorer/shapes.py): `[[2,4],[2,4]]`, `2x4, 2x4` and `(2, 4), (2, 4)`
 *  -> 2; `[2,4]`, `2x4` and `(2, 4)` -> 1; else null. */
export function shapeCount(text) {
  const json = text.trim().replace(/\(/g, "[").replace(/\)/g, "]").replace(/,\s*\]/g, "]");
  const parsed = parseJson(/^\[/.test(json) && /\]\s*,\s*\[/.test(json) && !/^\[\s*\[/.test(json) ? `[${json}]` : json);
  if (parsed.ok && Array.isArray(parsed.value) && parsed.value.length) return parsed.value.every(Array.isArray) ? parsed.value.length : 1;
  if (/^\d+(\s*[x\u00d7]\s*\d+)*(\s*,\s*\d+(\s*[x\u00d7]\s*\d+)*)*$/.test(json)) return json.includes("x") || json.includes("\u00d7") ? json.split(",").length : 1;
  return null;
}

/** Target names matching a search text, grouped: `[[group, [names]], ...]`. */
export function filterCatalog(catalog, query) {
  const q = query.trim().toLowerCase();
  return Object.entries(catalog)
    .map(([group, names]) => [group, q && !group.toLowerCase().includes(q) ? names.filter((n) => n.toLowerCase().includes(q)) : names])
    .filter(([, names]) => names.length);
}

/** The request after choosing `target`: its catalog defaults, the input dtypes kept where they fit.
 *  @param {Omit<WidgetRequest, "nonce">} request @param {string} target
 *  @param {Object<string, {kwargs: object, shapes: number[][], input_dtypes: string[]}>} defaults */
export function retarget(request, target, defaults) {
  const next = defaults[target] ?? { kwargs: {}, shapes: [[2, 4]], input_dtypes: ["float32"] };
  const before = defaults[request.target]?.input_dtypes ?? [];
  const inputDtypes = next.input_dtypes.map((fallback, i) =>
    before[i] === fallback && request.input_dtypes?.[i] ? request.input_dtypes[i] : fallback,
  );
  return {
    ...request,
    target,
    kwargs: JSON.stringify(next.kwargs),
    shape: JSON.stringify(next.shapes),
    input_dtypes: inputDtypes,
  };
}

function field(label, control, hint) {
  return h("label", { class: "dx-field" }, h("span", { class: "dx-field-label" }, label), control, hint);
}

function options(select, groups, value) {
  replaceChildren(
    select,
    groups.map(([label, names]) => h("optgroup", { label }, names.map((n) => h("option", { value: n }, n)))),
  );
  if (value != null) select.value = value;
}

export class Controls {
  constructor({ onRequest }) {
    this.onRequest = onRequest;
    this.state = null;
    this.draft = null;
    this.timers = {};
    this.listId = `dx-policies-${Math.random().toString(36).slice(2)}`;
    this.search = h("input", {
      type: "search",
      class: "dx-input",
      placeholder: "search layers and ops…",
      testid: "target-search",
      "aria-label": "search targets",
      oninput: () => this.fillTargets(),
      onkeydown: (e) => {
        if (e.key !== "Enter") return;
        e.preventDefault();
        const first = filterCatalog(this.state.catalog, this.search.value)[0]?.[1][0];
        if (first) this.chooseTarget(first);
      },
    });
    this.target = h("select", { class: "dx-input", testid: "target", "aria-label": "target", onchange: () => this.chooseTarget(this.target.value) });
    this.kwargs = h("textarea", {
      class: "dx-input dx-mono",
      rows: 2,
      spellcheck: "false",
      testid: "kwargs",
      "aria-label": "constructor kwargs (JSON)",
      oninput: () => this.typed("kwargs", this.kwargs.value, this.kwargsHint),
      onchange: () => this.commit({ kwargs: this.kwargs.value }),
      onkeydown: (e) => {
        if (e.key === "Enter" && (e.ctrlKey || e.metaKey || e.shiftKey)) {
          e.preventDefault();
          e.stopPropagation();
          this.commit({ kwargs: this.kwargs.value });
        }
      },
    });
    this.kwargsHint = h("span", { class: "dx-hint", testid: "kwargs-hint" });
    this.kwargsReset = h("button", { type: "button", class: "dx-link", testid: "kwargs-reset", onclick: () => this.resetKwargs() }, "reset");
    this.dtypeBox = h("div", { class: "dx-dtype-pickers" });
    this.preset = h("select", { class: "dx-input", testid: "preset", "aria-label": "value preset", onchange: () => this.commit({ preset: this.preset.value }) });
    this.mode = h("select", { class: "dx-input", testid: "mode", "aria-label": "how it runs", onchange: () => this.commit({ mode: this.mode.value }) });
    this.precision = h("select", {
      class: "dx-input",
      testid: "precision",
      "aria-label": "float32 matmul precision",
      title: PRECISION_HELP,
      onchange: () => this.commit({ precision: this.precision.value || null }),
    });
    this.quantize = h("select", {
      class: "dx-input",
      testid: "quantize",
      "aria-label": "quantize the layer",
      title: QUANTIZE_HELP,
      onchange: () => this.commit({ quantize: this.quantize.value || null }),
    });
    this.engine = h("select", {
      class: "dx-input",
      testid: "engine",
      "aria-label": "which Keras answers",
      title: ENGINE_HELP,
      onchange: () => this.chooseEngine(engineOf(this.engine.value)),
    });
    this.engineHint = h("span", { class: "dx-hint", testid: "engine-help", title: ENGINE_HELP }, "more: dx.engines.create(…)");
    this.shape = h("input", {
      class: "dx-input dx-mono",
      spellcheck: "false",
      testid: "shape",
      "aria-label": "input shape(s): 2x8x3, (2, 8, 3) or [2, 8, 3]",
      placeholder: "2x8x3, (2, 8, 3) or [2, 8, 3]",
      title: "one shape: 2x8x3, (2, 8, 3) or [2, 8, 3]; one per input: 2x4, 2x4",
      oninput: () => this.typedShape(this.shape.value),
      onchange: () => this.commit({ shape: this.shape.value }),
    });
    this.shapeHint = h("span", { class: "dx-hint", testid: "shape-hint" });
    this.policyList = h("datalist", { id: this.listId });
    this.policy = h("input", {
      class: "dx-input dx-mono",
      list: this.listId,
      spellcheck: "false",
      testid: "policy",
      "aria-label": "dtype policy",
      oninput: () => this.state.policies.includes(this.policy.value) && this.commit({ policy: this.policy.value }),
      onchange: () => this.commit({ policy: this.policy.value.trim() }),
    });
    this.backendBox = h("div", { class: "dx-backends", role: "group", "aria-label": "backends" });
    this.rerun = h("button", { type: "button", class: "dx-button", testid: "run", onclick: () => this.send(this.draft, { force: true }) }, "run again");
    this.el = h(
      "form",
      { class: "dx-controls", onsubmit: (e) => e.preventDefault() },
      h("div", { class: "dx-field dx-field-target" }, h("span", { class: "dx-field-label" }, "target"), h("div", { class: "dx-target" }, this.search, this.target)),
      field("input dtype", this.dtypeBox),
      field("values", this.preset),
      field("input shape", this.shape, this.shapeHint),
      field("policy", h("span", {}, this.policy, this.policyList)),
      field("runs as", this.mode),
      field("matmul", this.precision),
      field("quantize", this.quantize),
      field("Keras", this.engine, this.engineHint),
      field("backends", this.backendBox),
      h(
        "div",
        { class: "dx-field dx-field-kwargs" },
        h("span", { class: "dx-field-label" }, "kwargs ", this.kwargsReset),
        this.kwargs,
        this.kwargsHint,
      ),
      h("div", { class: "dx-field dx-field-run" }, this.rerun),
    );
  }

  /** Show the widget's state; form elements the user is editing are left alone. */
  update(state) {
    // Compared with the state shown before this one: `changed` runs after `this.state` moves on.
    const previous = this.state;
    const changed = (key) => previous === null || state[key] !== previous[key];
    this.state = state;
    if (changed("request") || !this.draft) {
      const { nonce: _, ...content } = state.request;
      this.draft = content;
      this.lastSent = JSON.stringify(content);
    }
    if (changed("catalog")) this.fillTargets();
    if (changed("policies")) replaceChildren(this.policyList, state.policies.map((p) => h("option", { value: p })));
    if (changed("presets")) {
      replaceChildren(
        this.preset,
        Object.entries(state.presets).map(([name, description]) => h("option", { value: name, title: description }, name)),
      );
    }
    if (changed("modes")) replaceChildren(this.mode, (state.modes ?? ["call"]).map((m) => h("option", { value: m }, m)));
    if (changed("precisions")) {
      const offered = (state.precisions ?? []).map((p) => h("option", { value: p }, p === "highest" ? "highest (TF32 off)" : p));
      replaceChildren(this.precision, [h("option", { value: "" }, "as set"), ...offered]);
    }
    if (changed("quantize_modes")) {
      const offered = (state.quantize_modes ?? []).map((m) => h("option", { value: m }, m));
      replaceChildren(this.quantize, [h("option", { value: "" }, "none"), ...offered]);
    }
    if (changed("engines")) {
      replaceChildren(
        this.engine,
        this.engines().map((c) => h("option", { value: c.engine ?? "", title: c.backends ? `runs on ${c.backends.join(", ")} only` : null }, c.label)),
      );
    }
    this.syncValues();
  }

  fillTargets() {
    const current = this.draft.target;
    const groups = filterCatalog(this.state.catalog, this.search.value);
    if (!groups.some(([, names]) => names.includes(current))) groups.unshift(["current", [current]]);
    options(this.target, groups, current);
  }

  syncValues() {
    const d = this.draft;
    if ([...this.target.options].some((o) => o.value === d.target)) this.target.value = d.target;
    else this.fillTargets();
    const idle = (el) => el.ownerDocument.activeElement !== el;
    if (idle(this.kwargs)) this.kwargs.value = d.kwargs;
    if (idle(this.shape)) this.shape.value = d.shape;
    if (idle(this.policy)) this.policy.value = d.policy;
    this.preset.value = d.preset;
    this.mode.value = d.mode ?? "call";
    this.precision.value = d.precision ?? "";
    this.quantize.value = d.quantize ?? "";
    this.engine.value = d.engine ?? "";
    const defaults = this.state.defaults[d.target];
    this.kwargsHint.textContent = defaults ? `catalog defaults: ${JSON.stringify(defaults.kwargs)}` : "";
    this.kwargsHint.classList.remove("dx-hint-bad");
    this.shapeHint.textContent = "";
    this.fillDtypes();
    this.fillBackends();
  }

  /** One dtype picker per input; rebuilt only when the number of inputs changes. */
  fillDtypes() {
    const d = this.draft;
    const count = Math.max(shapeCount(d.shape) ?? d.input_dtypes.length, 1);
    const key = `${count}:${this.state.dtypes.join(",")}`;
    if (key !== this.dtypesKey) {
      this.dtypesKey = key;
      const groups = groupDtypes(this.state.dtypes);
      const pickers = Array.from({ length: count }, (_, i) => {
        const select = h("select", {
          class: "dx-input dx-mono",
          testid: `input-dtype-${i}`,
          "aria-label": `input ${i} dtype`,
          onchange: () => this.setDtype(i, select.value, count),
        });
        options(select, groups, null);
        return select;
      });
      replaceChildren(this.dtypeBox, pickers);
    }
    const last = d.input_dtypes[d.input_dtypes.length - 1] ?? "float32";
    [...this.dtypeBox.children].forEach((select, i) => (select.value = d.input_dtypes[i] ?? last));
  }

  fillBackends() {
    const key = this.state.available_backends.join(",");
    if (key !== this.backendsKey) {
      this.backendsKey = key;
      replaceChildren(
        this.backendBox,
        this.state.available_backends.map((b) =>
          h(
            "label",
            { class: "dx-check" },
            h("input", { type: "checkbox", value: b, testid: `backend-${b}`, onchange: (e) => this.toggleBackend(b, e.target.checked) }),
            b,
          ),
        ),
      );
    }
    const runsOn = this.engines().find((c) => c.engine === (this.draft.engine ?? null))?.backends;
    for (const box of this.backendBox.querySelectorAll("input")) {
      box.checked = this.draft.backends.includes(box.value);
      box.disabled = Boolean(runsOn) && !runsOn.includes(box.value);
      box.parentElement.title = box.disabled ? `this Keras runs on ${runsOn.join(", ")} only` : "";
    }
  }

  /** The engines the kernel offers (the installed Keras alone when it publishes none). */
  engines() {
    return this.state.engines?.length ? this.state.engines : [{ engine: null, keras: "", label: "installed Keras", backends: null }];
  }

  chooseEngine(engine) {
    this.send(reengine(this.draft, engine, this.engines(), this.state.available_backends));
  }

  /** Live hint while typing JSON; sends it once it parses and the typing pauses. */
  typed(key, text, hint) {
    const parsed = parseJson(text);
    hint.textContent = parsed.ok ? "" : `not JSON yet: ${parsed.message}`;
    hint.classList.toggle("dx-hint-bad", !parsed.ok);
    clearTimeout(this.timers[key]);
    if (parsed.ok) this.timers[key] = setTimeout(() => this.commit({ [key]: text }), TYPING_DELAY_MS);
  }

  /** Live while typing a shape: sends it once its inputs can be counted and typing pauses
   *  (the kernel reads it and says what is wrong, if anything). */
  typedShape(text) {
    const count = shapeCount(text);
    this.shapeHint.textContent = count == null && text.trim() ? "a shape is 2x8x3, (2, 8, 3) or [2, 8, 3]" : "";
    this.shapeHint.classList.toggle("dx-hint-bad", count == null && Boolean(text.trim()));
    clearTimeout(this.timers.shape);
    if (count != null) this.timers.shape = setTimeout(() => this.commit({ shape: text }), TYPING_DELAY_MS);
  }

  chooseTarget(target) {
    this.search.value = "";
    this.send(retarget(this.draft, target, this.state.defaults));
    this.fillTargets();
  }

  resetKwargs() {
    this.send(retarget(this.draft, this.draft.target, this.state.defaults));
  }

  setDtype(index, dtype, count) {
    const dtypes = Array.from({ length: count }, (_, i) => this.draft.input_dtypes[i] ?? this.draft.input_dtypes[0]);
    dtypes[index] = dtype;
    this.commit({ input_dtypes: dtypes });
  }

  toggleBackend(backend, on) {
    const chosen = new Set(this.draft.backends);
    if (on) chosen.add(backend);
    else chosen.delete(backend);
    this.commit({ backends: this.state.available_backends.filter((b) => chosen.has(b)) });
  }

  commit(change) {
    for (const key of Object.keys(change)) clearTimeout(this.timers[key]);
    this.send({ ...this.draft, ...change });
  }

  /** Hand the request on, unless it only repeats the last one (`force` re-runs it).
   *  @param {WidgetRequest | Omit<WidgetRequest, "nonce">} request */
  send(request, { force = false } = {}) {
    const { nonce: _, ...content } = request;
    const key = JSON.stringify(content);
    if (!force && key === this.lastSent) return;
    this.lastSent = key;
    this.draft = request;
    this.syncValues();
    this.onRequest(content);
  }
}
