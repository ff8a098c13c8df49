"""What ``pool.call`` may run in a worker whose answers the cache keeps, decided in the worker.

A function the tool itself sends to a backend's worker (a promotion table's reference column,
an audit on an engine) is registered with :func:`entry` where it is defined. Everything else
is user code, whatever path it takes: a function of the user's script, a dtype-explorer
function that runs what it is given (``_worker.call`` itself, ``_worker.run``,
``tf_reference.run``), or arguments whose unpickling calls something (an object's
``__reduce__``). The worker does not take the caller's word for it: :func:`load` unpickles a
payload said to be trusted with an unpickler that admits only registered entries and plain
data (Python's containers and scalars, NumPy's arrays, scalars and dtypes, ml_dtypes' types);
anything else makes the payload user code, and the worker that runs it is tainted
(``_worker.taint``: its answers are never cached).

>>> import pickle
>>> load(pickle.dumps((print, ("hi",))), trusted=True)[2]   # print is no registered entry
False
>>> function, args, trusted = load(pickle.dumps((is_entry, (1,))), trusted=True)
>>> trusted
False
"""

from __future__ import annotations

import io
import pickle
import sys
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: The entries of the packages below ``runtime`` (which cannot import it to register them):
#: what a worker's settings are, whether TensorFlow's NumPy behaviour is on, how it shares a
#: GPU. The analyses register theirs with :func:`entry`.
_entries: set[tuple[str, str]] = {
    ("dtype_explorer.keras_run._keras_state", "describe_settings"),
    ("dtype_explorer.keras_run.references._tf_reference", "numpy_behaviour_on"),
    ("dtype_explorer.runtime._gpu", "gpu_sharing"),
}

#: Globals of plain data a trusted payload may name (NumPy's array and scalar rebuilding).
_DATA_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("copyreg", "_reconstructor"),
    ("builtins", "object"),
    ("_codecs", "encode"),
}
_BUILTIN_DATA = frozenset(
    (
        "dict",
        "list",
        "tuple",
        "set",
        "frozenset",
        "bytes",
        "bytearray",
        "str",
        "int",
        "float",
        "complex",
        "bool",
        "slice",
        "range",
    )
)
_DATA_MODULES = ("numpy", "numpy.dtypes", "ml_dtypes")


def entry(function: F) -> F:
    """Register ``function`` (a module-level function of dtype-explorer that runs no code it is
    given) as one ``pool.call`` may run in a cache-keeping worker; returns it unchanged."""
    _entries.add((function.__module__, function.__qualname__))
    return function


def is_entry(function: Any) -> bool:
    """Whether ``function`` is a registered entry, as its module holds it."""
    module = sys.modules.get(str(getattr(function, "__module__", "")))
    name = str(getattr(function, "__qualname__", ""))
    return (
        module is not None
        and (module.__name__, name) in _entries
        and getattr(module, name, None) is function
    )


class _Untrusted(pickle.UnpicklingError):
    """The payload names something other than a registered entry or plain data."""


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = super().find_class(module, name)
        if (module, name) in _DATA_GLOBALS or is_entry(found):
            return found
        if module == "builtins" and name in _BUILTIN_DATA:
            return found
        if module in _DATA_MODULES and isinstance(found, type):
            return found  # a dtype or scalar type: data
        raise _Untrusted(f"{module}.{name}")


def load(
    payload: bytes, *, trusted: bool, before_user_code: Callable[[], None] = lambda: None
) -> tuple[Callable[..., Any], tuple, bool]:
    """``(function, args, trusted)`` from ``pool.call``'s payload: ``trusted`` only when the
    caller said so, the payload names nothing but a registered entry and plain data, and its
    function is that entry. Otherwise ``before_user_code`` is called first (the worker taints
    itself), then the payload is unpickled as it is (its unpickling may run the user's code)."""
    if trusted:
        try:
            function, args = _DataOnly(io.BytesIO(payload)).load()
        except _Untrusted:
            pass
        else:
            if is_entry(function):
                return function, tuple(args), True
    before_user_code()
    function, args = pickle.loads(payload)
    return function, tuple(args), False
