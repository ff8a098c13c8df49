"""Write ``dtype_explorer/keras_run/catalog/ops_table.json``: every ``keras.ops`` function,
classified, with valid inputs by role, its references, and the dtype rule Keras states for it; and
``losses_metrics.json``: every public ``keras.losses`` and ``keras.metrics`` name, with the
inputs by role (y_true, y_pred, or values) and the constructor arguments each needs.

Run (the table does not depend on the backend; the symbolic calls run on numpy)::

    KERAS_BACKEND=numpy PYTHONPATH=. python tools/build_ops_catalog.py RESEARCH_DIR

Inputs (``RESEARCH_DIR``, a survey of ``keras.ops`` made once, outside the package):
``ops_table.json`` (the enumeration
of ``keras.ops`` and its namespaces, the signature classification with its override table and
the default inputs by role, made and checked by running every op on every backend) and
``references.json`` (the numpy / jax / torch / tf.experimental.numpy counterparts).

What this script adds:

* the *rule* of each op, derived from Keras's own statement: for element-wise, activation,
  reduction and index ops, ``compute_output_spec`` is called on ``KerasTensor`` inputs of
  int and float dtypes, and the op gets ``bool``, ``index`` (int32), ``promote``
  (``result_type`` of the inputs) or ``promote-float`` (``result_type(inputs, float)``) only
  where that rule gives Keras's declared dtype for every combination; creation and cast ops
  with an explicit ``dtype=`` get ``dtype-arg``; every other op gets ``none``
  (``undocumented``), never an invented rule;
* the group each op is listed under (its ``keras.ops`` namespace);
* ``ops.where``'s condition is a probed input (a spec gives it ``bool``), as before, and so
  are ``ops.unravel_index``'s indices (its only tensor).

Keep this script with the table and commit both. When Keras adds an op,
``tests/keras_run/test_catalog.py`` names it: add its row (role, inputs, values) to the committed
``ops_table.json`` by hand, next to the rows of the ops like it, and rerun the rule check.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "dtype_explorer" / "engine" / "catalog" / "ops_table.json"
DERIVED = {"elementwise_unary", "elementwise_binary", "reduction", "index", "nn"}
COMBOS_1 = ["float16", "bfloat16", "float32", "int8", "uint8", "int16", "int32"]
COMBOS_2 = [("int8", "float16"), ("int32", "float16"), ("uint8", "int8"), ("int16", "bfloat16")]
#: Ops whose first tensor becomes a probed input: where's condition (a spec gives it bool),
#: unravel_index's flat indices (its only tensor).
PROBED_FIRST = ("ops.where", "ops.unravel_index")
KEEP = (
    "category", "subcategory", "elementwise", "inputs", "kwargs", "probe", "dtypes",
    "primary_dtype", "note", "backend_limits", "declared_unavailable", "expect_nonfinite",
)  # fmt: skip


def _group(row: dict) -> str:
    if row["canonical"].startswith("ops.image."):
        return "ops.image"
    names = {row["canonical"], *row["aliases"]}
    for space in ("nn", "linalg", "numpy"):
        if any(n.startswith(f"ops.{space}.") for n in names):
            return f"ops.{space}"
    return "ops"


def _declared(name: str, inputs: list, kwargs: dict, dtypes: tuple[str, ...]) -> str | None:
    import keras

    from dtype_explorer.keras_run.catalog import _op_calls

    def tensor(spec, i):
        dtype = spec["dtype"] if i is None else dtypes[i]
        return keras.KerasTensor(tuple(spec["shape"]), dtype=dtype)

    try:
        args, named = _op_calls.build(tuple(inputs), tensor)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = _op_calls.call(name, args, named, kwargs)
        leaves = keras.tree.flatten(out)
        return keras.backend.standardize_dtype(leaves[0].dtype)
    except Exception:  # no statement for this combination
        return None


def derive_rule(name: str, row: dict) -> tuple[str, str]:
    """The rule Keras's symbolic call states for every int and float combination, and why."""
    from keras.src.backend.common import dtypes as kd

    from dtype_explorer.keras_run.catalog import _op_calls

    if row["probe"] == "dtype_kwarg" or row["subcategory"] == "cast":
        return "dtype-arg", "the dtype= argument decides the output dtype"
    if row["category"] not in DERIVED or row["probe"] != "inputs":
        return "none", ""
    if row["category"] == "nn" and "element-wise" not in row["subcategory"]:
        return "none", ""
    arity = len(_op_calls.probed(tuple(row["inputs"])))
    if arity == 0:
        return "none", ""
    combos = [(d,) * arity for d in COMBOS_1]
    if arity == 2:
        combos += COMBOS_2
    seen = {}
    for combo in combos:
        declared = _declared(name, row["inputs"], row["kwargs"], combo)
        if declared is not None:
            seen[combo] = declared
    has_int = any("int" in c[0] for c in seen)
    has_float = any("float" in c[0] for c in seen)
    if len(seen) < 3:
        return "none", ""
    candidates = {
        "bool": lambda c: "bool",
        "index": lambda c: "int32",
        "promote": lambda c: kd.result_type(*c),
        "promote-float": lambda c: kd.result_type(*c, float),
    }
    for rule, expected in candidates.items():
        if all(expected(c) == d for c, d in seen.items()):
            if rule in ("promote", "promote-float") and not has_int:
                return "none", ""  # floats alone cannot tell the two rules apart
            if rule == "index" and not has_float:
                return "none", ""
            tried = ", ".join(sorted({c[0] for c in seen}))
            return rule, f"compute_output_spec states it for {tried}"
    return "none", ""


def main(research: Path) -> None:
    table = json.loads((research / "ops_table.json").read_text())["ops"]
    refs = json.loads((research / "references.json").read_text())["ops"]
    rows = []
    for name, row in table.items():
        if name in PROBED_FIRST:
            row = json.loads(json.dumps(row))
            row["inputs"][0]["dtype"] = "probe"
        out = {"name": name, "aliases": row["aliases"], "group": _group(row)}
        out.update({k: row[k] for k in KEEP if k in row})
        out["skip"] = row.get("skip_reason")
        ref = refs.get(name, {})
        out["references"] = {
            lib: ref.get(key) for lib, key in
            (("numpy", "numpy"), ("jax", "jax"), ("torch", "torch"), ("tensorflow", "tf_numpy"))
        }  # fmt: skip
        out["rule"], out["rule_basis"] = derive_rule(name, row)
        rows.append(out)
    rows.sort(key=lambda r: r["name"])
    import keras

    meta = {
        "keras": keras.__version__,
        "count": len(rows),
        "made_by": "tools/build_ops_catalog.py",
    }
    OUT.write_text(json.dumps({"meta": meta, "ops": rows}, separators=(",", ":")) + "\n")
    rules = {}
    for r in rows:
        rules[r["rule"]] = rules.get(r["rule"], 0) + 1
    print(f"{len(rows)} ops -> {OUT.relative_to(ROOT)}; rules {rules}")


# ------------------------------------------------------------------- losses and metrics

OBJECTIVES_OUT = ROOT / "dtype_explorer" / "engine" / "catalog" / "losses_metrics.json"
#: research role -> (value preset of ``_op_calls.values`` or of ``_objectives``, default dtype)
ROLE_PRESETS = {
    "regression": ("default", "float32"),
    "regression_nonzero": ("nonzero", "float32"),
    "nonneg": ("nonneg", "float32"),
    "positive": ("positive", "float32"),
    "binary_labels": ("classes:2", "float32"),
    "pm1_labels": ("pm1", "float32"),
    "probabilities": ("prob", "float32"),
    "probs_rows": ("probs_rows", "float32"),
    "logits": ("default", "float32"),
    "one_hot": ("one_hot", "float32"),
    "class_ids": ("classes:3", "int32"),
    "ctc_labels": ({"literal": [[1, 2, 3, 0], [2, 1, 0, 0]]}, "int32"),
    "embeddings": ("l2rows", "float32"),
    "values": ("default", "float32"),
    "varied": ("sorted", "float32"),
}


def build_objectives(research: Path) -> None:
    """``losses_metrics.json``: every public ``keras.losses`` and ``keras.metrics`` name; a
    metric function that is the same object as a loss function is an alias of its entry."""
    import keras

    data = json.loads((research / "losses_metrics.json").read_text())
    rows: dict[str, dict] = {}
    by_id: dict[int, str] = {}
    for space in ("losses", "metrics"):
        module = getattr(keras, space)
        for short, row in sorted(data[space].items()):
            obj = getattr(module, short)
            name = f"{space}.{short}"
            if id(obj) in by_id:  # keras.metrics.mean_squared_error is keras.losses's
                rows[by_id[id(obj)]]["aliases"].append(name)
                continue
            by_id[id(obj)] = name
            is_class = row["kind"] == "class"
            kind = ("loss" if space == "losses" else "metric") + ("" if is_class else "-function")
            inputs = [
                {
                    "param": param,
                    "role": spec["role"],
                    "shape": spec["shape"],
                    "values": ROLE_PRESETS[spec["role"]][0],
                    "dtype": ROLE_PRESETS[spec["role"]][1],
                }
                for param, spec in row.get("inputs", {}).items()
            ]
            rows[name] = {
                "name": name,
                "aliases": [],
                "group": space,
                "kind": kind,
                "inputs": inputs,
                "init_kwargs": row.get("init_kwargs", {}),
                "kwargs": row.get("kwargs", {}),
                "combos": row.get("combos", []),
                "skip": row.get("skip_reason"),
            }
    out = {"meta": {"keras": keras.__version__, "made_by": "tools/build_ops_catalog.py"}}
    out["entries"] = list(rows.values())
    OBJECTIVES_OUT.write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"{len(rows)} losses and metrics -> {OBJECTIVES_OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/build_ops_catalog.py RESEARCH_DIR")
    research_dir = Path(sys.argv[1])
    main(research_dir)
    build_objectives(research_dir)
