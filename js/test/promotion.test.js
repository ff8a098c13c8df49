import { describe, expect, it } from "vitest";
import { renderPromotion } from "../src/promotion.js";
import { allByTestId, byTestId, fixture } from "./helpers.js";

describe("promotion table", () => {
  for (const name of ["conv1d-uint8", "add-int8-float16"]) {
    it(`lights the cell that decided the documented dtype (${name})`, () => {
      const { promotion, results } = fixture(name);
      const section = renderPromotion(promotion);
      const tables = promotion.tables;
      expect(section.querySelectorAll("figure")).toHaveLength(tables.length);
      const decided = allByTestId(section, "promotion-decided");
      expect(decided).toHaveLength(tables.length);
      for (const [i, table] of tables.entries()) {
        const documented = results[table.backends[0]].documented_dtype;
        expect(decided[i].textContent).toBe(documented);
        const row = decided[i].parentElement;
        expect(row.querySelector("th").textContent).toBe(table.args[0]);
        expect(section.querySelectorAll("figure")[i].dataset.backends).toBe(table.backends.join(","));
      }
      expect(byTestId(section, "promotion-basis").textContent).toMatch(/^result_type\(/);
    });
  }

  it("says why there is no table", () => {
    const section = renderPromotion({ tables: [], note: "no promotion table: TimeoutError" });
    expect(section.textContent).toContain("no promotion table: TimeoutError");
    expect(section.querySelector("figure")).toBeNull();
  });

  it("draws nothing without tables", () => {
    expect(renderPromotion({})).toBeNull();
    expect(renderPromotion(undefined)).toBeNull();
  });
});
