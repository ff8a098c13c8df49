import { describe, expect, it } from "vitest";
import { chip, dtypeKind, groupDtypes, setDtypeFamilies } from "../src/dtype.js";
import { kindColor } from "../src/palette.js";
import { fixture } from "./helpers.js";

setDtypeFamilies(fixture("widget-state").dtype_families);

describe("dtype chips", () => {
  it("colours each dtype by its kind", () => {
    expect(dtypeKind("float16")).toBe("float16");
    expect(dtypeKind("bfloat16")).toBe("bfloat16");
    expect(dtypeKind("float8_e4m3fn")).toBe("float8");
    expect(dtypeKind("uint8")).toBe("uint");
    expect(dtypeKind("int64")).toBe("int");
    expect(dtypeKind("python_int")).toBe("python");
    expect(dtypeKind("bool")).toBe("bool");
    expect(dtypeKind("string")).toBe("string");
    expect(dtypeKind(null)).toBe("none");
    expect(dtypeKind("unconvertible (TypeError)")).toBe("other");
  });

  it("groups a picker's dtypes, dropping empty groups", () => {
    const groups = groupDtypes(["uint8", "float32", "int8", "python_float", "bfloat16"]);
    expect(groups).toEqual([
      ["floating point", ["float32", "bfloat16"]],
      ["signed integer", ["int8"]],
      ["unsigned integer", ["uint8"]],
      ["weak Python scalars", ["python_float"]],
    ]);
  });

  it("renders a chip with its kind class", () => {
    const el = chip("uint8", { testid: "x" });
    expect(el.textContent).toBe("uint8");
    expect(el.className).toContain("dx-k-uint");
    expect(el.style.getPropertyValue("--dx-kind")).toBe(kindColor("uint"));
    expect(el.dataset.testid).toBe("x");
  });
});
