"""The op trace on Keras 2: every TensorFlow op the call ran, read through TensorFlow's op
callbacks (``tensorflow.python.framework.op_callbacks``: called for each eager op with its
inputs and outputs), as ``TraceStep`` records: the op's TF name (``Cast``, ``MatMul``,
``ReadVariableOp``), its inputs' and outputs' dtypes and shapes, what it did to the dtype, and
inf/NaN made from finite inputs. Keras 2's ops are TF's own: there is no ``keras.ops`` layer,
so a step names the TF op, never a Keras function, and has no source line.

>>> change("Cast", ["float32"], ["float16"]), change("MatMul", ["int8", "int8"], ["int32"])
('cast', 'changed')
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run.trace import MAX_STEPS
from dtype_explorer.records import TraceStep, TraceTensor

TRACE_NOTE = (
    "TensorFlow ops as TensorFlow ran them eagerly (op callbacks); Keras 2 calls tf.* ops "
    "directly, so each step is a TF op"
)


def change(op: str, inputs: list[str], outputs: list[str]) -> str:
    """What an op did to the dtype: ``cast`` (a ``Cast`` that changed it), ``noop-cast``,
    ``created`` (no input), ``kept`` (every output in its first data input's dtype),
    ``changed``; ``none`` without a tensor output."""
    data = [d for d in inputs if d != "resource"]
    if not outputs:
        return "none"
    if op == "Cast":
        return "cast" if data and outputs[0] != data[0] else "noop-cast"
    if not data:
        return "created"
    return "kept" if all(d == data[0] for d in outputs) else "changed"


class Keras2Trace:
    """The steps of one call (``installed`` around it), at most ``MAX_STEPS``."""

    def __init__(self) -> None:
        self.steps: list[TraceStep] = []
        self.dropped = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """TensorFlow's op callback on, for the block only."""
        from tensorflow.python.framework import op_callbacks

        op_callbacks.add_op_callback(self._record)
        try:
            yield
        finally:
            op_callbacks.remove_op_callback(self._record)

    def _record(self, op_type, inputs, attrs, outputs, op_name=None, graph=None) -> None:
        """One op (a pass-through: returns nothing, so TensorFlow keeps its outputs)."""
        if len(self.steps) >= MAX_STEPS:
            self.dropped += 1
            return
        op = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        ins = [_tensor(t) for t in inputs or ()]
        outs = [_tensor(t) for t in outputs or ()]
        nonfinite = graph is None and _nonfinite(outputs or ()) and not _nonfinite(inputs or ())
        first = nonfinite and not any(s.nonfinite for s in self.steps)
        self.steps.append(
            TraceStep(
                index=len(self.steps),
                op=f"tf.raw_ops.{op}",
                inputs=tuple(ins),
                outputs=tuple(outs),
                change=change(op, [t.dtype for t in ins], [t.dtype for t in outs]),  # type: ignore[arg-type]
                cast_to=outs[0].dtype if op == "Cast" and outs else None,
                nonfinite=nonfinite,
                first_nonfinite=first,
                abstract=graph is not None,
            )
        )


def _tensor(t: Any) -> TraceTensor:
    dtype = t.dtype.name if hasattr(t.dtype, "name") else str(t.dtype)
    try:
        shape = tuple(t.shape.as_list()) if t.shape.rank is not None else ()
    except (AttributeError, ValueError):
        shape = ()
    return TraceTensor(dtype=dtype, shape=shape)


def _nonfinite(tensors: Any) -> bool:
    """Whether an eager float tensor among ``tensors`` holds inf or NaN."""
    for t in tensors:
        name = getattr(t.dtype, "name", "")
        if dtypes.family(name) != "float" or not hasattr(t, "numpy"):
            continue
        if not np.all(np.isfinite(np.asarray(t.numpy(), dtype=np.float64))):
            return True
    return False
