// @ts-check
// The widget's contract, shared with the Python side: dtype_explorer/frontends/widget_contract.json.
import contract from "../../dtype_explorer/frontends/widget_contract.json";

/** @typedef {import("./contract-types.js").WidgetRequest} WidgetRequest */

/** Every synced trait, in the contract's order. */
export const TRAITS = Object.keys(contract.traits);

/** The traits the control panel reads. */
export const CONTROL_TRAITS = TRAITS.filter((name) => contract.traits[name].controls);

/** The traits the page may write (the kernel undoes any other write). */
export const PAGE_WRITES = TRAITS.filter((name) => contract.traits[name].writer === "page");

/** The keys of a request (`WidgetRequest`): the page sends these and no other. */
export const REQUEST_KEYS = Object.keys(contract.request);
