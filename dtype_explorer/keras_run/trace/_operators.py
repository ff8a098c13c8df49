"""The user's Python operators in the op trace (``_trace``): ``x * self.scale``, ``a + b``,
``-x``, ``x @ w``, ``x[0]`` and comparisons on backend tensors and Keras variables, each a step
named as Python's ``operator`` module names it (``operator.mul``), with the user's line.

Each framework's own hook, in place only while a trace is open, and put back when it closes
(also when the call raises):

- **torch**: a ``torch.overrides.TorchFunctionMode``, entered on the tracing thread only (torch
  keeps its function modes per thread). It sees an operator as the method it runs
  (``x * y`` as ``Tensor.mul``), so the method form (``x.mul(y)``) reads as the operator too,
  and a reflected ``2 * x`` reads as ``x * 2``.
- **tensorflow**: ``tf.Tensor``'s operator overloads (Python functions that
  ``override_binary_operator`` set on the class), wrapped on the class.
- **jax**: the concrete array type's operators (``ArrayImpl``, set by
  ``jax._src.numpy.array_methods``), wrapped on the class. Operators on tracers (inside
  ``jax.jit``) are the tracer's, not traced.
- **openvino**: Keras's own ``OpenVINOKerasTensor`` (its operators build OpenVINO graph nodes in
  Python), wrapped on the class.
- **Keras variables**, every backend: the operators of Keras's ``Variable`` class
  (``self.kernel * x`` runs ``backend.numpy.multiply``, kept one level down).
- **numpy**: not traced (:data:`LIMITS`): ``ndarray``'s operators are C slots of a built-in type,
  which cannot be replaced, and NumPy's ``__array_ufunc__`` hook belongs to the other operand.

Only a call made by user or layer code is recorded: the first frame past the hook's own
(and torch's dispatch in ``torch/_tensor.py``, ``torch/overrides.py``) must be a caller, so an
operator inside Keras's ops and backend (recorded as the op) or a framework's internals is not.

>>> OPERATORS["__rsub__"]
('operator.sub', 'reflected')
>>> as_written("reflected", ("x", 2))
(2, 'x')
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

#: ``dunder -> (shown name, form)``: ``binary`` (a, b), ``reflected`` (self is b), ``unary``,
#: ``index`` (a, key).
OPERATORS: dict[str, tuple[str, str]] = {}
_BINARY = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "truediv", "floordiv": "floordiv",
    "mod": "mod", "pow": "pow", "matmul": "matmul", "and": "and_", "or": "or_", "xor": "xor",
    "lshift": "lshift", "rshift": "rshift",
}  # fmt: skip
for _name, _shown in _BINARY.items():
    OPERATORS[f"__{_name}__"] = (f"operator.{_shown}", "binary")
    OPERATORS[f"__r{_name}__"] = (f"operator.{_shown}", "reflected")
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    OPERATORS[f"__{_name}__"] = (f"operator.{_name}", "binary")
for _name in ("neg", "pos", "abs", "invert"):
    OPERATORS[f"__{_name}__"] = (f"operator.{_name}", "unary")
OPERATORS["__getitem__"] = ("operator.getitem", "index")

#: torch: the method a ``TorchFunctionMode`` sees for an operator -> that operator.
TORCH_METHODS = {
    "add": "__add__", "sub": "__sub__", "mul": "__mul__", "div": "__truediv__",
    "matmul": "__matmul__", "remainder": "__mod__", "neg": "__neg__", "abs": "__abs__",
    "lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__",
    "add_": ("operator.iadd", "binary"), "sub_": ("operator.isub", "binary"),
    "mul_": ("operator.imul", "binary"), "div_": ("operator.itruediv", "binary"),
}  # fmt: skip

#: What a backend's trace leaves out of the user's operators, said in the probe's trace note.
LIMITS = {
    "numpy": (
        "operators on NumPy arrays (x * y in call()) are NumPy's, not Keras's: not traced "
        "(a Keras variable's are)"
    ),
}


def limit(backend: str) -> str:
    """What the op trace does not see of the user's operators on ``backend`` ("" if nothing).

    >>> limit("jax")
    ''
    """
    return LIMITS.get(backend, "")


def as_written(form: str, args: tuple) -> tuple:
    """The operands in the order the user wrote them (``2 - x`` runs ``x.__rsub__(2)``)."""
    return (args[1], args[0], *args[2:]) if form == "reflected" and len(args) >= 2 else args


def _binary(a: Any, b: Any) -> None: ...


def _unary(a: Any) -> None: ...


def _index(a: Any, key: Any) -> None: ...


#: The parameters a step's inputs are named after, per form.
SIGNATURES = {"binary": _binary, "reflected": _binary, "unary": _unary, "index": _index}


@functools.cache
def plumbing_files() -> frozenset[str]:
    """Files between the user's line and the recorder: this module, and torch's dispatch of a
    Python-defined ``Tensor`` method to a function mode."""
    files = {os.path.abspath(__file__)}
    torch = sys.modules.get("torch")
    if torch is not None:
        for name in ("torch._tensor", "torch.overrides"):
            module = sys.modules.get(name)
            if module is not None and getattr(module, "__file__", None):
                files.add(module.__file__)
                files.add(os.path.abspath(module.__file__))
    return frozenset(files)


# ------------------------------------------------------------------------ class patches


class Patch(NamedTuple):
    """One operator replaced on a class while a trace is open."""

    cls: type
    dunder: str
    original: Any
    wrapper: Callable[..., Any]


def _classes(backend: str) -> list[type]:
    """The classes whose operators a trace wraps on ``backend``: Keras's variable class (the
    one defining the operators), and the backend's concrete tensor type."""
    from keras.src.backend.common import variables

    out: list[type] = [getattr(variables, "Variable", None) or variables.KerasVariable]
    if backend == "tensorflow":
        from tensorflow.python.framework import ops as tf_ops

        out.append(tf_ops.EagerTensor)
    elif backend == "jax":
        from jax._src.array import ArrayImpl

        out.append(ArrayImpl)
    elif backend == "openvino":
        from keras.src.backend.openvino.core import OpenVINOKerasTensor

        out.append(OpenVINOKerasTensor)
    return out


_WRAPPERS: dict[tuple[int, str], Callable[..., Any]] = {}


def _wrapper(original: Any, dunder: str, record: Callable[..., Any]) -> Callable[..., Any]:
    """One wrapper per original and operator: ``record`` runs and records it."""
    key = (id(original), dunder)
    hit = _WRAPPERS.get(key)
    if hit is not None and hit.__wrapped__ is original:
        return hit
    shown, form = OPERATORS[dunder]

    def operator_method(*args: Any, **kwargs: Any) -> Any:
        return record(original, shown, form, args, kwargs)

    with contextlib.suppress(AttributeError, TypeError):  # a compiled function's attributes
        functools.update_wrapper(operator_method, original)
    operator_method.__wrapped__ = original
    _WRAPPERS[key] = operator_method
    return operator_method


#: The patches made last on each backend, made again only where an original changed.
_PLANS: dict[tuple[str, int], list[Patch]] = {}


def patch(backend: str, record: Callable[..., Any]) -> list[Patch]:
    """Wrap the operators of ``backend``'s tensor type and of Keras's variables; each wrapper
    calls ``record(original, shown, form, args, kwargs)``. Returns what :func:`unpatch` puts
    back. The classes and operators found are kept (``_PLANS``) while their originals stay
    in place: a trace then costs one ``setattr`` an operator."""
    key = (backend, id(record))
    plan = _PLANS.get(key)
    if plan is None or not all(vars(p.cls).get(p.dunder) is p.original for p in plan):
        plan = _PLANS[key] = _plan(backend, record)
    for p in plan:
        setattr(p.cls, p.dunder, p.wrapper)
    return list(plan)


def _plan(backend: str, record: Callable[..., Any]) -> list[Patch]:
    patches = []
    for base in _classes(backend):
        for dunder in OPERATORS:
            owner = next((c for c in base.__mro__ if dunder in vars(c)), None)
            if owner is None or owner is object:
                continue
            original = vars(owner)[dunder]
            if not callable(original):
                continue
            if any(p.cls is owner and p.dunder == dunder for p in patches):
                continue  # found again through another class
            patches.append(Patch(owner, dunder, original, _wrapper(original, dunder, record)))
    return patches


def unpatch(patches: list[Patch]) -> None:
    """Put the originals back, last first (where someone re-bound one since, leave theirs)."""
    for p in reversed(patches):
        if vars(p.cls).get(p.dunder) is p.wrapper:
            setattr(p.cls, p.dunder, p.original)


# ------------------------------------------------------------------------------ torch


@functools.cache
def _torch_table() -> dict[Any, tuple[str, str]]:
    """What a torch function mode receives for each operator -> ``(shown name, form)``."""
    import torch

    table: dict[Any, tuple[str, str]] = {}
    for dunder, entry in OPERATORS.items():
        fn = getattr(torch.Tensor, dunder, None)
        if fn is not None:
            table.setdefault(fn, entry)
    for method, target in TORCH_METHODS.items():
        fn = getattr(torch.Tensor, method, None)
        if fn is not None:
            table[fn] = OPERATORS[target] if isinstance(target, str) else target
    return table


def torch_mode(record: Callable[..., Any]) -> Any:
    """A ``TorchFunctionMode`` (not entered) that records the operators it sees with
    ``record``; every other torch function runs as it is, and so does every one while Dynamo
    traces a function the user compiled (``torch.compile``: the compiled code is not seen).
    Each trace's mode is of one class, made once: Dynamo guards a compiled function on the
    types of the modes on the stack, so a class made afresh for each trace had every traced
    call of the user's compiled function compiled again, until its recompile limit (8) left
    that function uncompiled for the rest of the session."""
    return _operator_mode_class()(_torch_table(), record)


@functools.cache
def _operator_mode_class() -> type:
    """The class of :func:`torch_mode`'s modes, made once."""
    import torch
    from torch.overrides import TorchFunctionMode

    compiling = torch.compiler.is_compiling

    class OperatorMode(TorchFunctionMode):
        def __init__(self, table: dict, record: Callable[..., Any]) -> None:
            super().__init__()
            self.table, self.record = table, record

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if compiling():
                return func(*args, **(kwargs or {}))
            try:
                entry = self.table.get(func)
            except TypeError:  # an unhashable callable: not an operator
                entry = None
            if entry is None:
                return func(*args, **(kwargs or {}))
            return self.record(func, entry[0], entry[1], args, kwargs or {})

    return OperatorMode


def torch_quiet() -> Callable[[], Any]:
    """What the recorder reads a step's tensors inside on torch: ``__torch_function__`` (the
    trace's own mode, a tensor subclass's) switched off, so its reads are plain torch calls."""
    import torch

    return torch._C.DisableTorchFunction
