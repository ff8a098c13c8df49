import { describe, expect, it } from "vitest";
import { renderQuantization } from "../src/quantization.js";
import { renderResultCard } from "../src/result.js";
import { byTestId, fixture } from "./helpers.js";

const quantized = fixture("dense-int8-quantize").results.jax;
const plain = fixture("dense-float64-mixed").results.jax;

describe("quantized layer", () => {
  it("draws the summary, the stored variables and the compute path from the record", () => {
    const card = renderResultCard("jax", quantized);
    const section = byTestId(card, "quantization");
    expect(section.dataset.mode).toBe("int8");
    expect(byTestId(section, "quantization-summary").textContent).toBe(quantized.quantization.summary);
    const steps = [...byTestId(section, "quantization-steps").children].map((li) => li.textContent);
    expect(steps).toEqual(quantized.quantization.steps);
    expect(steps.some((s) => s.startsWith("integer matmul: int8 x int8"))).toBe(true);
    expect(section.querySelectorAll("tr").length).toBe(1 + quantized.quantization.variables.length);
    expect(section.textContent).toContain("kernel_scale");
  });

  it("draws nothing for a float layer", () => {
    expect(byTestId(renderResultCard("jax", plain), "quantization")).toBeNull();
    expect(renderQuantization(null)).toBeNull();
  });
});
