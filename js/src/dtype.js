// Presentation of dtype names: which colour family a chip gets. No dtype facts are derived here.
import { h } from "./dom.js";

const EXACT = {
  float16: "float16",
  bfloat16: "bfloat16",
  float32: "float32",
  float64: "float64",
  bool: "bool",
  string: "string",
};

/** The colour family of a dtype name (`float16`, `int`, `uint`, `python`, ...). */
export function dtypeKind(name) {
  if (!name) return "none";
  if (EXACT[name]) return EXACT[name];
  if (name.startsWith("float8")) return "float8";
  if (name.startsWith("uint")) return "uint";
  if (name.startsWith("int")) return "int";
  if (name.startsWith("complex")) return "complex";
  if (name.startsWith("python_")) return "python";
  return "other";
}

/** Labels for grouping dtype pickers, in display order. */
export const KIND_GROUPS = [
  ["float", "floating point", (k) => ["float16", "bfloat16", "float32", "float64", "float8"].includes(k)],
  ["int", "signed integer", (k) => k === "int"],
  ["uint", "unsigned integer", (k) => k === "uint"],
  ["complex", "complex", (k) => k === "complex"],
  ["other", "bool and string", (k) => ["bool", "string", "other"].includes(k)],
  ["python", "weak Python scalars", (k) => k === "python"],
];

/** Group dtype names for a picker: `[[label, [names]], ...]`, empty groups dropped. */
export function groupDtypes(names) {
  return KIND_GROUPS.map(([, label, test]) => [label, names.filter((n) => test(dtypeKind(n)))]).filter(
    ([, members]) => members.length,
  );
}

/** A dtype chip: `<span class="dx-chip dx-k-float16">float16</span>`. */
export function chip(name, { testid, title, extra } = {}) {
  return h(
    "span",
    { class: ["dx-chip", `dx-k-${dtypeKind(name)}`, extra], testid, title: title ?? name ?? "" },
    name ?? "—",
  );
}
