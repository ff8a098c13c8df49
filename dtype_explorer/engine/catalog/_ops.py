"""The ``keras.ops`` functions we probe, each with the dtype rule Keras declares for it.

A rule restates the op's ``compute_output_spec`` in ``keras/src/ops/numpy.py`` / ``nn.py``
(where ``float`` is the weak Python float, i.e. ``floatx``). Ops with ``input_style="list"``
take their inputs as one list, ``fn([x1, x2])``; every other op is called
``fn(*inputs, **kwargs)``.
``ops.where`` has three inputs, so a spec for it has three input dtypes: the condition (bool
by default), then ``x1`` and ``x2``.
"""

from __future__ import annotations

from typing import Any

from dtype_explorer.engine.catalog._entries import OpEntry

_UNARY = ((2, 3),)
_DECLARED_AS_INPUT = "Keras declares the input's dtype (compute_output_spec), ints included"


def _op(name: str, rule: str, *shapes: tuple[int, ...], **fields: Any) -> OpEntry:
    return OpEntry(f"ops.{name}", rule, shapes=shapes or ((2, 3), (2, 3)), **fields)


OPS: tuple[OpEntry, ...] = (
    # element-wise binary: result_type(x1, x2)
    _op("add", "promote"),
    _op("subtract", "promote"),
    _op("multiply", "promote"),
    _op("maximum", "promote"),
    _op("minimum", "promote"),
    _op("power", "promote"),
    _op("floor_divide", "promote"),
    _op("mod", "promote", note="bool results become int32"),
    _op("divide", "promote-float", note="result_type(x1, x2, float)"),
    _op("true_divide", "promote-float", note="alias of divide: result_type(x1, x2, float)"),
    _op(
        "where",
        "promote",
        (2, 3),
        (2, 3),
        (2, 3),
        roles=("any", "any", "any"),
        note="three input dtypes: condition (bool), x1, x2; result_type(x1, x2) - a bool "
        "condition never changes the promotion",
    ),
    # linear algebra
    _op("matmul", "promote", (2, 3), (3, 2), note="int8 @ int8 is declared int32"),
    _op("dot", "promote", (2, 3), (3, 2)),
    # joining: called fn([x1, x2])
    _op("concatenate", "promote", input_style="list", note="called ops.concatenate([x1, x2])"),
    _op("stack", "promote", input_style="list", note="called ops.stack([x1, x2])"),
    # reductions
    _op(
        "mean",
        "promote-float",
        *_UNARY,
        note="int and bool inputs give result_type(x, 'float32'); floats keep their dtype",
    ),
    _op(
        "sum",
        "none",
        *_UNARY,
        note="declared: bool/int8/int16 -> int32, uint8/uint16 -> uint32 (int32 on torch), "
        "else result_type(x)",
    ),
    _op("max", "promote", *_UNARY),
    _op("argmax", "index", *_UNARY, kwargs={"axis": -1}),
    _op("cumsum", "promote", *_UNARY, note="bool results become int32"),
    # element-wise unary
    _op("abs", "promote", *_UNARY),
    _op("negative", "promote", *_UNARY),
    _op("square", "promote", *_UNARY, note="bool results become int32"),
    _op(
        "clip",
        "promote",
        *_UNARY,
        kwargs={"x_min": -1, "x_max": 1},
        note="x's dtype (bool becomes int32); bounds are Python ints",
    ),
    _op("sqrt", "promote-float", *_UNARY, note="ints give result_type(x, float)"),
    _op("exp", "promote-float", *_UNARY, note="ints and bool give floatx"),
    _op("log", "promote-float", *_UNARY, note="ints give result_type(x, float)"),
    _op("tanh", "promote-float", *_UNARY, note="int64 gives floatx"),
    # comparisons and logic
    _op("greater", "bool"),
    _op("less", "bool"),
    _op("equal", "bool"),
    _op("not_equal", "bool"),
    _op("logical_and", "bool"),
    # activations (keras.ops.nn)
    _op("relu", "promote", *_UNARY, note=_DECLARED_AS_INPUT),
    _op("sigmoid", "promote", *_UNARY, note=_DECLARED_AS_INPUT),
    _op("softmax", "promote", *_UNARY, note=_DECLARED_AS_INPUT),
)
