// Across backends: one compact row per backend, and a banner when they diverge.
import { h } from "./dom.js";
import { outcomeChip, verdictBadge } from "./result.js";

/** What a backend's answer came to, as the Python side computed it (`ProbeResult.outcome`). */
function outcomeText(result) {
  if (!result || result.status === "pending") return "pending";
  return result.outcome;
}

/** The comparison table: a column per backend with its outcome and verdict. */
export function renderComparison(backends, results) {
  if (!backends.length) return null;
  return h(
    "table",
    { class: "dx-compare", testid: "compare" },
    h("tr", {}, h("th", {}, ""), backends.map((b) => h("th", { class: "dx-backend" }, b))),
    h(
      "tr",
      {},
      h("th", { class: "dx-row-label" }, "output"),
      backends.map((b) => h("td", { testid: `compare-${b}`, "data-outcome": outcomeText(results[b]) }, outcomeChip(results[b]))),
    ),
    h(
      "tr",
      {},
      h("th", { class: "dx-row-label" }, "verdict"),
      backends.map((b) => h("td", {}, verdictBadge(results[b]?.status === "pending" || !results[b] ? "pending" : (results[b].shown_verdict ?? results[b].verdict)))),
    ),
  );
}

/** The divergence banner, shown when the Python side says the backends diverge. */
export function renderDivergence(verdict, backends, results) {
  if (verdict !== "diverges") return null;
  const done = backends.filter((b) => results[b] && results[b].status !== "pending");
  return h(
    "div",
    { class: "dx-banner dx-banner-diverges", testid: "divergence", role: "alert" },
    h("strong", {}, "Backends diverge: "),
    done.map((b, i) => [i ? " · " : "", h("span", { class: "dx-backend" }, b), " → ", h("code", {}, outcomeText(results[b]))]),
  );
}
