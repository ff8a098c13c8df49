// @ts-check
// "Copy as code": the question as the `dx.probe(...)` call and a raw-Keras script, written by
// the kernel (the `code` trait: records.CodeCopy, computed once on the record) and only laid
// out here. The button puts `code.clipboard` on the clipboard (navigator.clipboard); where the
// clipboard is not available (an insecure origin, a refusal), a text area holding the same
// text is shown, selected, to copy from by hand.
import { h, replaceChildren } from "./dom.js";

/**
 * @typedef {object} CodeCopy
 * @property {string} dx the dx.probe call that asks the question again
 * @property {string} script a raw-Keras script of the question
 * @property {string[]} fill_in what the user supplies first (empty: runnable as written)
 * @property {string} clipboard both, as the clipboard gets them
 */

/** The clipboard of this page, or `null` where there is none. */
function pageClipboard() {
  const clipboard = globalThis.navigator?.clipboard;
  return clipboard && typeof clipboard.writeText === "function" ? clipboard : null;
}

export class CopyCode {
  /** `clipboard`: what `writeText` goes to (default: the page's, `null` for none). */
  constructor({ clipboard = pageClipboard() } = {}) {
    this.clipboard = clipboard;
    /** @type {CodeCopy | null} */
    this.code = null;
    this.button = h(
      "button",
      { type: "button", class: "dx-toggle dx-copy", testid: "copy-code", disabled: true, title: "Copy the dx.probe call and a raw-Keras script of this question", onclick: () => this.copy() },
      "Copy as code",
    );
    this.said = h("span", { class: "dx-copy-said", testid: "copy-said", "aria-live": "polite" });
    this.fallback = h("div", { class: "dx-copy-fallback", testid: "copy-fallback" });
    this.el = h("span", { class: "dx-copy-code" }, this.button, this.said);
  }

  /** Show the code of the answers so far (`{}`: none yet). @param {Partial<CodeCopy> | undefined} code */
  update(code) {
    const ready = Boolean(code && typeof code.clipboard === "string" && code.clipboard);
    const changed = !ready || code.clipboard !== this.code?.clipboard;
    this.code = ready ? /** @type {CodeCopy} */ (code) : null;
    /** @type {HTMLButtonElement} */ (this.button).disabled = !ready;
    if (changed) {
      this.said.textContent = "";
      replaceChildren(this.fallback);
    }
  }

  /** Copy the code; without a clipboard, show it in a text area to copy from. */
  async copy() {
    const code = this.code;
    if (!code) return;
    const fill = code.fill_in?.length ? ` (fill in first: ${code.fill_in.join("; ")})` : "";
    if (this.clipboard) {
      try {
        await this.clipboard.writeText(code.clipboard);
        this.said.textContent = `copied: the dx call and a raw-Keras script${fill}`;
        replaceChildren(this.fallback);
        return;
      } catch (error) {
        this.showFallback(code, `the clipboard refused (${error?.message ?? error}): copy from here${fill}`);
        return;
      }
    }
    this.showFallback(code, `no clipboard here: copy from here${fill}`);
  }

  /** The text area to copy from, selected. @param {CodeCopy} code @param {string} why */
  showFallback(code, why) {
    this.said.textContent = why;
    const area = /** @type {HTMLTextAreaElement} */ (
      h("textarea", { class: "dx-copy-text", testid: "copy-text", readonly: true, rows: 16, spellcheck: "false", "aria-label": "the question as code" })
    );
    area.value = code.clipboard;
    replaceChildren(this.fallback, h("div", { class: "dx-meta" }, why), area);
    area.focus();
    area.select();
  }
}
