// @ts-check
// The whole explorer: controls on top, then the answers as they arrive.
import { renderCompact } from "./compact.js";
import { renderComparison, renderDivergence } from "./compare.js";
import { CONTROL_TRAITS } from "./contract.js";
import { Controls } from "./controls.js";
import { CopyCode } from "./copycode.js";
import { h, replaceChildren } from "./dom.js";
import { setDtypeFamilies } from "./dtype.js";
import { themeProperties } from "./palette.js";
import { renderPromotion } from "./promotion.js";
import { renderResultCard } from "./result.js";
import { renderTracePart } from "./trace.js";

/** @typedef {import("./contract-types.js").WidgetRequest} WidgetRequest */
/** @typedef {import("./contract-types.js").WidgetState} WidgetState */


/** Run `callback` once the browser has painted what was just rendered. */
function afterPaint(callback) {
  if (typeof requestAnimationFrame === "function") requestAnimationFrame(() => setTimeout(callback, 0));
  else setTimeout(callback, 0);
}

export class App {
  /** `send(request)` hands a request (with its nonce) to the Python side; `clipboard`: where
   *  "Copy as code" writes (default: the page's; `null`: none, a text area instead). */
  constructor(el, { send, now = () => performance.now(), clipboard = undefined }) {
    this.send = send;
    this.now = now;
    this.nonce = 0;
    this.sentAt = new Map();
    this.latency = {};
    this.state = null;
    this.controls = new Controls({ onRequest: (request) => this.request(request) });
    this.errorEl = h("div", { class: "dx-messages", "aria-live": "polite" });
    this.statusEl = h("span", { class: "dx-status", testid: "status" });
    this.summaryEl = h("div", { class: "dx-summary" });
    this.cardsEl = h("div", { class: "dx-answers", testid: "results" });
    /** "compact" (the default: backends side by side) or "detail" (the stacked cards). */
    this.view = "compact";
    this.viewToggle = h(
      "div",
      { class: "dx-view-toggle", role: "group", "aria-label": "view" },
      [
        ["compact", "side by side"],
        ["detail", "stacked cards"],
      ].map(([view, label]) =>
        h("button", { type: "button", class: "dx-toggle", testid: `view-${view}`, "aria-pressed": String(view === this.view), onclick: () => this.setView(view) }, label),
      ),
    );
    this.promotionEl = h("div");
    this.copyCode = new CopyCode(clipboard === undefined ? {} : { clipboard });
    this.root = h(
      "div",
      { class: "dx-root", testid: "explorer" },
      h("header", { class: "dx-header" }, h("span", { class: "dx-title" }, "dtype explorer"), this.statusEl, this.viewToggle, this.copyCode.el),
      this.controls.el,
      this.errorEl,
      this.copyCode.fallback,
      this.summaryEl,
      this.cardsEl,
      this.promotionEl,
    );
    this.setTheme("light");
    el.append(this.root);
  }

  /** Draw in the page's theme: the palette's colours of `theme` ("light" or "dark") as the
   *  root's --dx-* variables (the host's own, JupyterLab's or VS Code's, where it has them),
   *  and the browser's form controls to match. */
  setTheme(theme) {
    this.theme = theme;
    this.root.dataset.theme = theme;
    this.root.style.colorScheme = theme;
    for (const [name, value] of Object.entries(themeProperties(theme))) this.root.style.setProperty(name, value);
  }

  /** Send `content` (a request without its nonce) to the Python side, numbered.
   *  @param {Omit<WidgetRequest, "nonce">} content */
  request(content) {
    this.nonce = Math.max(this.nonce, this.state?.request_id ?? 0) + 1;
    this.sentAt.set(this.nonce, this.now());
    this.root.dataset.sent = String(this.nonce);
    this.latency = {};
    this.send({ ...content, nonce: this.nonce });
  }

  /** Redraw from a full snapshot of the model's state. @param {WidgetState} state */
  update(state) {
    const previous = this.state;
    this.state = state;
    if (!previous || state.dtype_families !== previous.dtype_families) setDtypeFamilies(state.dtype_families);
    if (!previous || CONTROL_TRAITS.some((k) => state[k] !== previous[k])) this.controls.update(state);
    this.renderError(state.error);
    this.renderResults(state);
    this.copyCode.update(state.code);
  }

  /** Show the compact comparison or the stacked cards. @param {"compact" | "detail"} view */
  setView(view) {
    this.view = view;
    for (const button of this.viewToggle.children) button.setAttribute("aria-pressed", String(button.dataset.testid === `view-${view}`));
    this.root.dataset.view = view;
    if (this.state) this.renderResults(this.state);
  }

  renderError(message) {
    replaceChildren(
      this.errorEl,
      message ? h("div", { class: "dx-banner dx-banner-error", testid: "error", role: "alert" }, h("strong", {}, "Invalid input: "), message) : null,
    );
  }

  renderResults(state) {
    const results = state.results ?? {};
    const backends = Object.keys(results);
    const pending = backends.filter((b) => results[b]?.status === "pending");
    this.statusEl.textContent = pending.length ? `probing on ${pending.join(", ")}…` : backends.length ? "done" : "";
    this.root.dataset.pending = String(pending.length);
    this.root.dataset.requestId = String(state.request_id ?? "");
    this.root.dataset.view = this.view;
    // The compact view lays out the `comparison` trait; a state without one draws the cards.
    const compact = this.view === "compact" && Boolean(state.comparison?.columns?.length);
    replaceChildren(
      this.summaryEl,
      renderDivergence(state.verdict, backends, results),
      renderTracePart(state.trace_divergence),
      compact ? renderCompact(state.comparison, results, { timings: state.timings }) : renderComparison(backends, results),
    );
    replaceChildren(
      this.cardsEl,
      (compact ? [] : backends).map((b) => {
        const card = renderResultCard(b, results[b], { roundTripMs: state.timings?.[b], part: state.trace_divergence });
        if (Number.isFinite(this.latency[b])) card.dataset.latencyMs = this.latency[b].toFixed(1);
        return card;
      }),
    );
    replaceChildren(this.promotionEl, renderPromotion(state.promotion));
    this.measure(state, backends.filter((b) => results[b]?.status !== "pending"));
  }

  /** Time from the control change to each backend's rendered answer (for the benchmark). */
  measure(state, done) {
    if (state.request_id !== this.nonce) return;
    const since = this.sentAt.get(state.request_id);
    if (this.root.dataset.ackFor !== String(this.nonce)) {
      // The first state that answers this request: page -> kernel -> page, without the probe.
      this.root.dataset.ackFor = String(this.nonce);
      this.root.dataset.ackMs = (this.now() - since).toFixed(1);
    }
    for (const b of done) {
      if (this.latency[b] != null) continue;
      this.latency[b] = NaN;
      afterPaint(() => {
        if (this.state.request_id !== state.request_id) return;
        this.latency[b] = this.now() - since;
        const card = this.root.querySelector(`[data-testid="result-${b}"]`);
        if (card) card.dataset.latencyMs = this.latency[b].toFixed(1);
      });
    }
  }
}
