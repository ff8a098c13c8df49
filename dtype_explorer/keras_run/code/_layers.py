"""Each layer's ``__call__`` a step of the op trace while ``dx.trace`` is open.

``Layer.__call__`` is replaced on the class by a hook that calls the op trace's own wrapper of
the original (``keras_run.traced_callable``), one wrapper per layer class, named
``Dense.__call__``: the step shows what the layer was *given* (a NumPy float64 array, a
Python list) and what it returned, with the user's line; the ops the layer runs (its
conversion, its autocast, its variables' creation) are steps of their own after it. This file
counts as the trace's own on the stack (``trace/_frames.TRACE_FILES``), so the step's line is
the caller's. The original is put back when the last open trace closes (where someone patched
it since, theirs is left).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dtype_explorer.keras_run.trace import traced_callable

_LOCK = threading.RLock()
_OPEN = {"count": 0, "original": None, "hook": None}


@contextmanager
def layer_calls_traced() -> Iterator[None]:
    """Inside the block, every ``Layer.__call__`` goes through the op trace's wrapper.

    Returns:
        A context manager; ``Layer.__call__`` is Keras's own again when it closes.
    """
    from keras.src.layers.layer import Layer

    with _LOCK:
        if _OPEN["count"] == 0:
            original = Layer.__dict__["__call__"]
            _OPEN["original"], _OPEN["hook"] = original, _hook(original)
            Layer.__call__ = _OPEN["hook"]
        _OPEN["count"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _OPEN["count"] -= 1
            if _OPEN["count"] == 0:
                if Layer.__dict__.get("__call__") is _OPEN["hook"]:
                    Layer.__call__ = _OPEN["original"]
                _OPEN["original"] = _OPEN["hook"] = None


def _hook(original: Any) -> Any:
    wrappers: dict[type, Any] = {}

    def __call__(layer: Any, *args: Any, **kwargs: Any) -> Any:
        cls = type(layer)
        wrapper = wrappers.get(cls)
        if wrapper is None:
            wrapper = wrappers[cls] = traced_callable(original, f"{cls.__name__}.__call__")
        return wrapper(layer, *args, **kwargs)

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    __call__.__doc__ = original.__doc__
    return __call__
