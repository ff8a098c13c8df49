import { describe, expect, it } from "vitest";
import { renderComparison, renderDivergence } from "../src/compare.js";
import { byTestId, fixture } from "./helpers.js";

const conv = fixture("conv1d-uint8");
const backends = Object.keys(conv.results);

describe("comparison across backends", () => {
  it("has one cell per backend with its outcome", () => {
    const table = renderComparison(backends, conv.results);
    for (const b of backends) {
      const r = conv.results[b];
      // the outcome is the Python side's (ProbeResult.outcome); the chip shows the dtype or error type
      expect(byTestId(table, `compare-${b}`).dataset.outcome).toBe(r.outcome);
      expect(r.outcome).toBe(r.status === "ok" ? r.output_dtype : `raises ${r.error.type}`);
      expect(byTestId(table, `compare-${b}`).textContent).toBe(r.status === "ok" ? r.output_dtype : r.error.type);
    }
  });

  it("shows pending backends as pending", () => {
    const table = renderComparison(["jax", "torch"], { jax: conv.results.jax, torch: { status: "pending" } });
    expect(byTestId(table, "compare-torch").dataset.outcome).toBe("pending");
  });

  it("raises a banner naming each backend's outcome when they diverge", () => {
    expect(conv.verdict).toBe("diverges");
    const banner = renderDivergence(conv.verdict, backends, conv.results);
    expect(banner.getAttribute("role")).toBe("alert");
    for (const b of backends) expect(banner.textContent).toContain(b);
    expect(banner.textContent).toContain(`jax → ${conv.results.jax.output_dtype}`);
  });

  it("shows each backend's verdict as its summary shows it: no as documented beside wrong values", () => {
    const wraps = fixture("power-int8-wraps");
    expect(wraps.verdict).toBe("values-wrong");
    const table = renderComparison(Object.keys(wraps.results), wraps.results);
    const badges = [...table.querySelectorAll(".dx-badge")];
    expect(badges.map((b) => b.title)).toEqual(["values-wrong", "values-wrong"]);
    expect(table.textContent).not.toContain("as documented");
  });

  it("stays quiet when the backends agree", () => {
    expect(renderDivergence("as-documented", backends, conv.results)).toBeNull();
    expect(renderDivergence("", backends, conv.results)).toBeNull();
  });
});
