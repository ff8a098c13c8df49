"""Keras's own entry points as named steps of the op trace while ``dx.trace`` is open: each
layer's ``__call__``, variable creation and assignment, the optimizer's step and loss scaling.

The methods below are replaced on their classes by hooks that call the op trace's own wrapper
of the original (``keras_run.traced_callable``), one wrapper per class and method, named as
the user wrote the call:

* ``Dense.__call__``: every ``Layer.__call__``, the layer's class named;
* ``Variable.__init__``: a variable made (``keras.Variable(...)``, a layer's ``add_weight``,
  an optimizer's slots), given its initial value and ``dtype``, answering the variable;
* ``Variable.assign``, ``Variable.assign_add``, ``Variable.assign_sub``: the variable and the
  value given, answering the value stored (converted to the variable's dtype);
* ``SGD.apply``, ``SGD.apply_gradients``, ``LossScaleOptimizer.apply``,
  ``LossScaleOptimizer.scale_loss``: the optimizer's step and loss scaling, the optimizer's
  class named (on every Keras optimizer class that defines the method).

Each step shows what the call was *given* (a NumPy float64 array, a float16 loss) and what it
answered, with the user's line. The ops it runs are steps too: where Keras's layer or optimizer
code calls them, steps of their own after it (their ``inside`` names it); where Keras's op or
backend dispatch calls them (a variable's conversion of the value it is assigned), its
children, one level down. This file counts as the trace's own on the stack
(``trace/_frames.TRACE_FILES``), so a step's line is the caller's. The originals are put back
when the last open trace closes (where someone patched one since, theirs is left).
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dtype_explorer.keras_run.trace import traced_callable

_LOCK = threading.RLock()
#: Open traces, and the ``(class, attribute, its own value or _ABSENT, hook)`` put in place.
_OPEN: dict[str, Any] = {"count": 0, "patches": []}
_ABSENT = object()
#: The variables being made on each thread (``Variable.__init__``'s hook hands its ``self``
#: to the traced call through it: a step's inputs are what the caller gave).
_MAKING = threading.local()
#: The optimizer methods named, on each Keras optimizer class that defines them.
OPTIMIZER_METHODS = ("apply", "apply_gradients", "scale_loss")
#: The variable methods named (on Keras's ``Variable``, whatever the backend's subclass).
VARIABLE_METHODS = ("assign", "assign_add", "assign_sub")


@contextmanager
def named_steps() -> Iterator[None]:
    """Inside the block, the entry points above are named steps of the op trace.

    Returns:
        A context manager; Keras's own methods are back in place when it closes.
    """
    with _LOCK:
        if _OPEN["count"] == 0:
            _OPEN["patches"] = [_install(*target) for target in _TARGETS.get()]
        _OPEN["count"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _OPEN["count"] -= 1
            if _OPEN["count"] == 0:
                for patch in reversed(_OPEN["patches"]):
                    _remove(*patch)
                _OPEN["patches"] = []


class _Found:
    """:func:`_targets`, found again only when Keras may have more classes: a module was
    imported since (a user's optimizer subclass of a Keras one is no target)."""

    def __init__(self) -> None:
        self.modules = -1
        self.targets: list[tuple[type, str, Callable[[Any, str], Any]]] = []

    def get(self) -> list[tuple[type, str, Callable[[Any, str], Any]]]:
        if len(sys.modules) != self.modules:
            self.targets = _targets()
            self.modules = len(sys.modules)
        return self.targets


_TARGETS = _Found()


def _targets() -> list[tuple[type, str, Callable[[Any, str], Any]]]:
    """``(class, attribute, hook maker)`` of every entry point named, in this Keras."""
    from keras.src import backend
    from keras.src.backend.common import variables
    from keras.src.layers.layer import Layer
    from keras.src.optimizers.base_optimizer import BaseOptimizer

    found: list[tuple[type, str, Callable[[Any, str], Any]]] = [(Layer, "__call__", _by_class)]
    made = getattr(backend, "Variable", None)  # keras.Variable: what Keras's code makes
    if isinstance(made, type):
        found.append((made, "__init__", _creation))
    common = getattr(variables, "Variable", None) or variables.KerasVariable  # before 3.7
    found += [(common, name, _as_variable) for name in VARIABLE_METHODS if name in vars(common)]
    for cls in _keras_subclasses(BaseOptimizer):
        found += [(cls, n, _by_class) for n in OPTIMIZER_METHODS if n in vars(cls)]
    return found


def _keras_subclasses(root: type) -> list[type]:
    """``root`` and its subclasses defined in Keras (a user's own optimizer is named through
    the Keras method it calls)."""
    out, todo = [], [root]
    while todo:
        cls = todo.pop()
        if cls not in out and str(cls.__module__).startswith("keras."):
            out.append(cls)
            todo.extend(cls.__subclasses__())
    return out


#: The hooks made so far, by class, attribute and the original they call: a trace puts the
#: same hook in place again while the original is the same.
_HOOKS: dict[tuple[type, str, int], tuple[Any, Any]] = {}


def _install(cls: type, name: str, make: Callable[[Any, str], Any]) -> tuple:
    own = cls.__dict__.get(name, _ABSENT)
    original = own if own is not _ABSENT else getattr(cls, name)
    key = (cls, name, id(original))
    hit = _HOOKS.get(key)
    if hit is None or hit[0] is not original:
        hit = _HOOKS[key] = (original, make(original, name))
    hook = hit[1]
    setattr(cls, name, hook)
    return cls, name, own, hook


def _remove(cls: type, name: str, own: Any, hook: Any) -> None:
    if cls.__dict__.get(name) is not hook:  # someone patched it since: theirs is left
        return
    if own is _ABSENT:
        delattr(cls, name)
    else:
        setattr(cls, name, own)


def _by_class(original: Any, name: str) -> Any:
    """A hook naming the step by the object's class: ``Dense.__call__``, ``SGD.apply``."""
    wrappers: dict[type, Any] = {}

    def hook(obj: Any, *args: Any, **kwargs: Any) -> Any:
        cls = type(obj)
        wrapper = wrappers.get(cls)
        if wrapper is None:
            wrapper = wrappers[cls] = traced_callable(original, f"{cls.__name__}.{name}")
        return wrapper(obj, *args, **kwargs)

    return _like(hook, original)


def _as_variable(original: Any, name: str) -> Any:
    """A hook naming the step ``Variable.<name>`` (on every backend's variable class)."""
    wrapper = traced_callable(original, f"Variable.{name}")

    def hook(variable: Any, *args: Any, **kwargs: Any) -> Any:
        return wrapper(variable, *args, **kwargs)

    return _like(hook, original)


def _creation(original: Any, name: str) -> Any:
    """A hook making ``Variable.__init__`` a step that is given the caller's arguments (not
    the variable, not made yet) and answers the variable made."""

    def made(*args: Any, **kwargs: Any) -> Any:
        variable = _MAKING.stack[-1]
        original(variable, *args, **kwargs)
        return variable

    try:
        signature = inspect.signature(original)
        made.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=list(signature.parameters.values())[1:]
        )
    except (TypeError, ValueError):  # no signature: the arguments are named arg0, ...
        pass
    wrapper = traced_callable(made, f"Variable.{name}")

    def hook(variable: Any, *args: Any, **kwargs: Any) -> None:
        stack = _MAKING.__dict__.setdefault("stack", [])
        stack.append(variable)
        try:
            wrapper(*args, **kwargs)
        finally:
            stack.pop()

    return _like(hook, original)


def _like(hook: Any, original: Any) -> Any:
    hook.__name__ = getattr(original, "__name__", "hook")
    hook.__qualname__ = getattr(original, "__qualname__", hook.__name__)
    hook.__wrapped__ = original
    hook.__doc__ = original.__doc__
    return hook
