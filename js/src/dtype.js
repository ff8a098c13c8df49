// Presentation of dtype names: which colour a chip gets. The families come from the Python side
// (the `dtype_families` trait, made from dtype_explorer.dtypes.FAMILIES); nothing is derived here.
import { h } from "./dom.js";
import { kindColor } from "./palette.js";

let families = {};

/** Take the dtype families the kernel publishes (`dtype name -> family`). */
export function setDtypeFamilies(table) {
  families = table ?? {};
}

/** The colour kind of a dtype name: each 16/32/64-bit float its own, others their family. */
export function dtypeKind(name) {
  if (!name) return "none";
  const family = families[name] ?? "other";
  return family === "float" ? name : family;
}

/** How dtype pickers group the families, in display order: `[label, [families]]`. */
export const FAMILY_GROUPS = [
  ["floating point", ["float", "float8"]],
  ["signed integer", ["int"]],
  ["unsigned integer", ["uint"]],
  ["complex", ["complex"]],
  ["bool and string", ["bool", "string", "other"]],
  ["weak Python scalars", ["python"]],
];

/** Group dtype names for a picker: `[[label, [names]], ...]`, empty groups dropped. */
export function groupDtypes(names) {
  return FAMILY_GROUPS.map(([label, members]) => [label, names.filter((n) => members.includes(families[n] ?? "other"))]).filter(
    ([, found]) => found.length,
  );
}

/** A dtype chip: `<span class="dx-chip dx-k-float16">float16</span>`. */
export function chip(name, { testid, title, extra } = {}) {
  return h(
    "span",
    {
      class: ["dx-chip", `dx-k-${dtypeKind(name)}`, extra],
      style: { "--dx-kind": kindColor(dtypeKind(name)) },
      testid,
      title: title ?? name ?? "",
    },
    name ?? "—",
  );
}
