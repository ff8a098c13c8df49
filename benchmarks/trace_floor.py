"""The floor under ``dx.trace`` on issue 37's 100-step loop: the least an op tracer that wraps
Keras's functions can cost, next to ``dx.trace`` itself, each against the same loop untraced,
in the same run (``_harness.paired``), in a fresh process per backend.

The floor is a wrapper around the loop's ops (``keras.ops.matmul``, ``keras.ops.tanh``) and the
tensor class's ``*`` (jax, torch, tensorflow; NumPy's ``ndarray`` cannot be patched, and
``dx.trace`` does not record NumPy's operators either) that keeps, for each call, what a dtype
step needs at the least: the op, the caller's line, the input and output dtypes. Three floors:

* ``floor, dtypes``: only that;
* ``floor, values``: also each output's largest and smallest value as the op ends (NumPy's two
  reductions: what finding the first inf/NaN needs at the least);
* ``floor, values later``: the same values read eight ops after the op (the outputs held
  meanwhile), so that jax's asynchronous dispatch is not made to wait for each op.

Nothing else of ``dx.trace`` is in them: no children, no source text, no records, no cast
losses. Issue 37's goal is ``dx.trace`` at most 1.5x the untraced loop.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/trace_floor.py --backend jax --repeats 15
    PYTHONPATH=$PWD .venv/bin/python benchmarks/trace_floor.py --backend jax --clock wall
"""

from __future__ import annotations

import functools
import math
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness
import trace_code

#: Read a step's values this many ops after it (``floor, values later``).
LAG = 8


class Floor:
    """The least tracer: the functions ``targets`` names (``(namespace, names)`` pairs; the
    loop's ``keras.ops.matmul`` and ``tanh`` by default) and, with ``operators``, the tensor's
    ``*``, wrapped while :meth:`run` runs ``work``; a function called inside a wrapped one is
    not a step. The wrappers are made once; a run swaps them in and out. ``values``:
    ``"none"``, ``"now"`` or ``"later"`` (see the module's docstring)."""

    def __init__(
        self,
        values: str,
        targets: list[tuple[Any, tuple[str, ...]]] | None = None,
        operators: bool = True,
    ) -> None:
        import keras

        self.values = values
        self.local = threading.local()
        self.local.steps = None
        targets = [(keras.ops, ("matmul", "tanh"))] if targets is None else targets
        #: (namespace, name, the original, its wrapper)
        self.swaps = [
            (space, name, getattr(space, name), self._wrapped(getattr(space, name), name))
            for space, names in targets
            for name in names
        ]
        self.owner = self.mul = None  # the first class of the tensor's that takes a __mul__
        for cls in type(keras.ops.ones((1,))).__mro__ if operators else ():
            if cls is object or cls.__module__.startswith("numpy"):
                break
            try:
                cls.__mul__ = cls.__mul__
            except TypeError:  # a type of C's (torch's TensorBase): its subclass takes it
                continue
            self.owner, self.mul = cls, vars(cls)["__mul__"]
            self.mul_wrapper = self._wrapped(self.mul, "operator.mul")
            break

    def run(self, work: Callable[[], Any]) -> list:
        for space, name, _, wrapper in self.swaps:
            setattr(space, name, wrapper)
        if self.owner is not None:
            self.owner.__mul__ = self.mul_wrapper
        self.local.steps = steps = []
        try:
            work()
        finally:
            self.local.steps = None
            for space, name, original, _ in self.swaps:
                setattr(space, name, original)
            if self.owner is not None:
                self.owner.__mul__ = self.mul
            for step in steps[-LAG:]:  # the values still waiting
                if len(step) == 6:
                    step.append(_finite(step.pop()))
        return steps

    def _wrapped(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        local, values = self.local, self.values

        def traced(*args: Any, **kwargs: Any) -> Any:
            steps = local.steps
            if steps is None:
                return fn(*args, **kwargs)
            frame = sys._getframe(1)
            local.steps = None  # what the op calls is not a step
            try:
                out = fn(*args, **kwargs)
            finally:
                local.steps = steps
            ins = tuple(getattr(a, "dtype", type(a).__name__) for a in args)
            step = [name, frame.f_code.co_filename, frame.f_lineno, ins, _dtype(out)]
            steps.append(step)
            if values == "now":
                step.append(_finite(out))
            elif values == "later":
                step.append(out)
                if len(steps) > LAG:
                    waiting = steps[-LAG - 1]
                    waiting.append(_finite(waiting.pop()))
            return out

        return traced


def _dtype(value: Any) -> Any:
    """An op's output dtype (a tuple of them for several outputs, a type's name otherwise)."""
    if isinstance(value, tuple | list):
        return tuple(_dtype(v) for v in value)
    return getattr(value, "dtype", type(value).__name__)


def _finite(value: Any) -> bool:
    """Whether ``value`` (an op's output: a tensor, several, or none) holds no inf or NaN."""
    import numpy as np

    if isinstance(value, tuple | list):
        return all(_finite(v) for v in value)
    if not hasattr(value, "dtype"):
        return True
    from dtype_explorer import float_bits

    if type(value).__module__.startswith("torch"):  # NumPy cannot take torch's bfloat16
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            import ml_dtypes
            import torch

            return (
                float_bits.finite_peak(value.view(torch.int16).numpy().view(ml_dtypes.bfloat16))
                is not None
            )
    array = np.asarray(value)
    if array.size == 0 or array.dtype.kind in "biu":
        return True
    if array.dtype.itemsize == 2:  # float16, bfloat16: on their bits, as the trace reads them
        return float_bits.finite_peak(array) is not None
    return math.isfinite(float(array.max())) and math.isfinite(float(array.min()))


def measure_here(repeats: int, clock_name: str) -> list[dict]:
    import keras

    import dtype_explorer as dx

    loop = trace_code.cases()["100-step ops loop"]
    now = _harness.clock(clock_name)
    floors = {"dtypes": "none", "values": "now", "values later": "later"}
    measured: dict[str, Callable[[], Any]] = {
        f"floor, {name}": functools.partial(Floor(values).run, loop)
        for name, values in floors.items()
    }
    measured["dx.trace"] = lambda: dx.trace(loop)
    backend = keras.backend.backend()
    return [
        _harness.paired_row(
            backend,
            f"100-step ops loop, {mode}",
            _harness.paired(loop, work, repeats, now),
            "traced",
        )
        for mode, work in measured.items()
    ]


if __name__ == "__main__":
    _harness.main(__file__, __doc__.splitlines()[0], measure_here, "traced")
