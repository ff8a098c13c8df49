"""OpenVINO's op set, the openvino backend's reference for a ``keras.ops`` answer.

OpenVINO has no NumPy-like array library reachable from Python: its Python API builds graphs
from the ops of its op set (``openvino.opset16``), and Keras's openvino backend is written with
them. So an op on openvino is set beside the op set's op of the same name (``ops.add`` beside
``openvino.opset16.add``), made from the same values as constants, and its output element type
is the answer. OpenVINO checks element types as it makes a node, and its op set does not promote:
``add`` of an ``i8`` and a ``u8`` constant raises there (Keras's backend converts first), and
that raise is the op set's answer.

"No counterpart", with the reason, where the op set has no op of that name, or has one that
needs arguments Keras's call does not give (an ``axis``, a ``mode``, an ``alpha``) or that Keras
passes differently (a Python scalar, a keyword); three ops are called with what Keras leaves to
its defaults (``softmax`` and ``log_softmax`` on the last axis, ``matmul`` untransposed).

>>> opset_path("ops.add")
'openvino.opset16.add'
>>> said(RuntimeError("Check 'x' failed at a.cpp:18:\\nWhile validating node 'Add'\\nArguments "
...                   "do not have the same element type (arg0 element type: i8)."))
'Arguments do not have the same element type (arg0 element type: i8).'
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["ADAPTERS", "OPSET", "opset_path", "said", "why_none"]

#: The op set the references are taken from (the one Keras 3.15's openvino backend uses).
OPSET = "openvino.opset16"


def _last_axis(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``softmax(data, axis)``: Keras's ``axis=-1``."""
    return fn(args[0], kwargs.get("axis", -1))


def _untransposed(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``matmul(a, b, transpose_a, transpose_b)``: Keras's matmul transposes neither."""
    return fn(args[0], args[1], False, False)


#: Reference path -> how it is called where Keras leaves an argument the op set needs to its
#: default (part of ``_calls.ADAPTERS``).
ADAPTERS = {
    f"{OPSET}.softmax": _last_axis,
    f"{OPSET}.log_softmax": _last_axis,
    f"{OPSET}.matmul": _untransposed,
}


def opset_path(op: str) -> str:
    """The path of the op set's op named as the Keras op ``op`` (``ops.add``)."""
    return f"{OPSET}.{op.rsplit('.', 1)[-1]}"


def why_none(op: str, kinds: list[str], kwargs: dict[str, Any]) -> str | None:
    """Why the op set has no counterpart of the Keras op ``op`` called with inputs of these
    ``kinds`` (the catalog's: ``tensor``, ``python``, ``list`` ...) and ``kwargs``; ``None``
    where it has one (called as :data:`ADAPTERS` says, else with the op's tensors alone).
    Imports OpenVINO (the openvino worker has it already)."""
    path = opset_path(op)
    opset = importlib.import_module(OPSET)
    fn = getattr(opset, path.rsplit(".", 1)[-1], None)
    if not callable(fn):
        return f"OpenVINO's op set ({OPSET}) has no op named {path.rsplit('.', 1)[-1]}"
    if path in ADAPTERS:
        return None
    if any(kind != "tensor" for kind in kinds) or kwargs:
        return (
            f"{path} takes only its tensors and attributes of its own; Keras's call passes "
            "Python values or keywords, which it takes in another form"
        )
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return f"{path}'s signature cannot be read"
    needed = [p.name for p in parameters if p.default is inspect.Parameter.empty]
    if len(needed) != len(kinds):
        return f"{path} needs {', '.join(needed)}: arguments Keras's call does not give"
    return None


def said(error: BaseException) -> str:
    """What OpenVINO's check said, in a line: the last line of its message (the first names
    the C++ file of the check), else the error's type."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__
