"""What the user's code returned, described (type, dtype, shape, a digest of its bytes), and the
user's own traceback of what it raised (dtype-explorer's frames left out)."""

from __future__ import annotations

import hashlib
import os
import re
import traceback
from typing import Any

import numpy as np

from dtype_explorer.errors import strip_ansi
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.records import TracedValue

#: The most leaves of a returned structure described.
MAX_LEAVES = 64
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def describe_returned(value: Any) -> tuple[TracedValue, ...]:
    """Each leaf of ``value`` (tuples, lists and dicts walked, at most 64 leaves) described.

    Args:
        value: what the code returned.

    Returns:
        One :class:`TracedValue` a leaf, named by its path (``out``, ``out[0]``,
        ``out['loss']``).

    >>> import numpy as np
    >>> [v.describe() for v in describe_returned((np.ones(2), 3))]
    ['float64[2] (numpy ndarray)', 'python_int[] (int)']
    """
    leaves: list[tuple[str, Any]] = []
    _flatten("out", value, leaves)
    return tuple(_describe(name, leaf) for name, leaf in leaves[:MAX_LEAVES])


def _flatten(name: str, value: Any, out: list[tuple[str, Any]]) -> None:
    if len(out) >= MAX_LEAVES:
        return
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        for i, v in enumerate(value):
            _flatten(f"{name}[{i}]", v, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{name}[{k!r}]", v, out)
    else:
        out.append((name, value))


def _describe(name: str, value: Any) -> TracedValue:
    t = type(value)
    type_name = f"{(t.__module__ or '').split('.')[0]} {t.__name__}".strip()
    if t in (bool, int, float):
        type_name = t.__name__
        arr = np.asarray(value)
        return TracedValue(
            name=name, type=type_name, dtype=f"python_{t.__name__}", shape=(),
            digest=_digest(f"python_{t.__name__}", arr), text=repr(value)[:80],
            sample=(float(value),),
        )  # fmt: skip
    if isinstance(value, (str, bytes)):  # text is the answer: every character kept, escaped
        return TracedValue(
            name=name, type=type_name, digest=_digest(t.__name__, np.array([value], object)),
            text=_exact(value),
        )  # fmt: skip
    if not (hasattr(value, "dtype") and hasattr(value, "shape")) or isinstance(value, type):
        return TracedValue(name=name, type=type_name, text=_short(value))
    import keras

    dtype = keras.backend.standardize_dtype(value.dtype)
    shape = tuple(None if d is None else int(d) for d in value.shape)
    arr = _values_of(value)
    if arr is None:  # nothing can read it: described by its type, dtype and shape alone
        return TracedValue(name=name, type=type_name, dtype=dtype, shape=shape)
    return TracedValue(
        name=name, type=type_name, dtype=dtype, shape=shape, digest=_digest(dtype, arr),
        text=_short(arr), sample=_sample(arr),
    )  # fmt: skip


def _values_of(value: Any) -> np.ndarray | None:
    """A returned tensor's values: as Keras converts them (``numpy_values``: a 0-d bfloat16
    TensorFlow tensor too, which Keras's conversion refuses), else as NumPy reads a tensor of
    another framework than the backend's; ``None`` where neither can."""
    for read in (numpy_values, np.asarray):
        try:
            return np.asarray(read(value))
        except Exception:
            continue
    return None


def _sample(arr: np.ndarray) -> tuple[float, ...] | None:
    try:
        return tuple(float(v) for v in arr.reshape(-1)[:16].astype("float64"))
    except (TypeError, ValueError):  # strings, objects
        return None


def _digest(dtype: str, arr: np.ndarray) -> str:
    """SHA-256 of the dtype, shape and values: the bytes of a numeric array; an object array's
    (a string tensor's) elements by their repr, not the pointers its bytes hold."""
    h = hashlib.sha256(f"{dtype}|{arr.shape}|".encode())
    if arr.dtype == object:
        for item in arr.reshape(-1):
            h.update(repr(item).encode("utf-8", "backslashreplace") + b"\x00")
    else:
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:32]


#: The most characters of a returned string shown; the digest covers all of them.
MAX_TEXT = 400


def _exact(value: str | bytes) -> str:
    r"""A returned string's repr, every character kept (runs of spaces, tabs and newlines
    escaped as Python writes them); a longer one cut at :data:`MAX_TEXT` characters, saying so.

    >>> _exact("a b  a\n")
    "'a b  a\\n'"
    """
    if len(value) <= MAX_TEXT:
        return repr(value)
    return f"{value[:MAX_TEXT]!r}... ({len(value)} characters)"


def _short(value: Any) -> str:
    """A short repr; only the line breaks (and their indentation) that ``array2string`` and
    multi-line reprs add are joined, so the spaces inside a value are kept."""
    try:
        text = np.array2string(value, threshold=8) if isinstance(value, np.ndarray) else repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return re.sub(r"\s*\n\s*", " ", text.strip())[:120]


def user_traceback(error: BaseException) -> str:
    """The traceback of ``error`` as the user would see it untraced: dtype-explorer's frames
    (the runner, the trace's wrappers) left out.

    >>> try:
    ...     1 / 0
    ... except ZeroDivisionError as e:
    ...     print(user_traceback(e).splitlines()[-1])
    ZeroDivisionError: division by zero
    """
    te = traceback.TracebackException.from_exception(error)
    _strip(te)
    return strip_ansi("".join(te.format()))  # Keras's bold codes in its messages


def _strip(te: traceback.TracebackException) -> None:
    for seen in range(8):  # the chain: __cause__ / __context__
        kept = [f for f in te.stack if not os.path.abspath(f.filename).startswith(_PACKAGE)]
        te.stack = traceback.StackSummary.from_list(kept)
        nxt = te.__cause__ or te.__context__
        if nxt is None or seen > 6:
            return
        te = nxt
