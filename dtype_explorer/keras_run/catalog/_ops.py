"""Every ``keras.ops`` function, each with its inputs by role and the dtype rule Keras states.

The table is ``ops_table.json`` beside this module, written by ``tools/build_ops_catalog.py``
from ``keras.ops`` itself: every public function of ``keras.ops`` and its namespaces
(``numpy``, ``nn``, ``linalg``, ``image``) once, under its canonical name, with its other
names as ``aliases`` (``ops.numpy.add``, ``ops.nn.relu``, ``ops.swish`` for ``ops.silu``); its
class by signature and role; valid default inputs (see ``_op_calls``); its counterparts in
the array libraries; and the rule Keras's ``compute_output_spec`` states for it (``none``
where it states none for every int and float input).

``RULES`` below overrides the generated rule where we restate ``compute_output_spec`` by hand
(joining and linear-algebra ops, ``where``, ``softmax``), with a note on what it declares.
``ops.where`` has three probed inputs: the condition (bool by default), then ``x1`` and ``x2``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from dtype_explorer.keras_run.catalog._entries import OpEntry
from dtype_explorer.keras_run.catalog._op_calls import probed

TABLE = Path(__file__).with_name("ops_table.json")
_DECLARED_AS_INPUT = "Keras declares the input's dtype (compute_output_spec), ints included"

#: name -> (rule, note, extra kwargs): where the generated rule is restated or refined by hand.
RULES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "mod": ("promote", "bool results become int32", {}),
    "divide": ("promote-float", "result_type(x1, x2, float)", {}),
    "true_divide": ("promote-float", "alias of divide: result_type(x1, x2, float)", {}),
    "where": (
        "promote",
        "three input dtypes: condition (bool), x1, x2; result_type(x1, x2) - a bool "
        "condition never changes the promotion",
        {},
    ),
    "matmul": ("promote", "int8 @ int8 is declared int32", {}),
    "dot": ("promote", "", {}),
    "concatenate": ("promote", "called ops.concatenate([x1, x2])", {}),
    "stack": ("promote", "called ops.stack([x1, x2])", {}),
    "mean": (
        "promote-float",
        "int and bool inputs give result_type(x, 'float32'); floats keep their dtype",
        {},
    ),
    "sum": (
        "none",
        "declared: bool/int8/int16 -> int32, uint8/uint16 -> uint32 (int32 on torch), "
        "else result_type(x)",
        {},
    ),
    "argmax": ("index", "", {"axis": -1}),
    "cumsum": ("promote", "bool results become int32", {}),
    "square": ("promote", "bool results become int32", {}),
    "clip": ("promote", "x's dtype (bool becomes int32); bounds are Python ints", {}),
    "sqrt": ("promote-float", "ints give result_type(x, float)", {}),
    "exp": ("promote-float", "ints and bool give floatx", {}),
    "log": ("promote-float", "ints give result_type(x, float)", {}),
    "tanh": ("promote-float", "int64 gives floatx", {}),
    "relu": ("promote", _DECLARED_AS_INPUT, {}),
    "sigmoid": ("promote", _DECLARED_AS_INPUT, {}),
    "softmax": ("promote", _DECLARED_AS_INPUT, {}),
}


def _entry(row: dict[str, Any]) -> OpEntry:
    name = row["name"]
    inputs = tuple(row["inputs"])
    leaves = probed(inputs)
    rule, note, extra = RULES.get(name.removeprefix("ops."), (row["rule"], row["note"], {}))
    params = {spec["param"] for spec in inputs}
    kwargs = {**row["kwargs"], **{k: v for k, v in extra.items() if k not in params}}
    return OpEntry(
        name=name,
        rule=rule,
        shapes=tuple(tuple(spec["shape"]) for spec in leaves),
        kwargs=kwargs,
        group=row["group"],
        roles=("any",) * len(leaves),
        note=note,
        input_style="list" if inputs and inputs[0]["kind"] == "list" else "positional",
        inputs=inputs,
        category=row["category"],
        subcategory=row["subcategory"],
        probe=row["probe"],
        aliases=tuple(row["aliases"]),
        skip=row.get("skip"),
        primary_dtype=row["primary_dtype"] or "float32",
        rule_basis=row.get("rule_basis", "") if (rule == row["rule"]) else "",
        references=row.get("references", {}),
        backend_limits=row.get("backend_limits", {}),
    )


@functools.cache
def load() -> tuple[OpEntry, ...]:
    """Every op entry, read once from ``ops_table.json``."""
    data = json.loads(TABLE.read_text())
    return tuple(_entry(row) for row in data["ops"])


def keras_version() -> str:
    """The Keras version the table was made from."""
    return json.loads(TABLE.read_text())["meta"]["keras"]
