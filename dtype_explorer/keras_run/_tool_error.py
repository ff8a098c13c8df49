"""Whose error is it: Keras's (an answer) or dtype-explorer's own (never an answer).

An exception is the tool's own failure when the innermost frame of its traceback runs code of
the ``dtype_explorer`` package and is neither a deliberate refusal there (a ``raise``
statement: an ``InvalidSpecError``, a preset the tool does not know) nor one of the thin
wrappers through which the tool passes a call on to Keras (the op trace, the call recorder).
Anything raised inside Keras, its backend or a user's layer is Keras's answer; a
``NotImplementedError`` raised in Keras's openvino backend (:func:`unimplemented`) is its
answer that it does not implement what was asked: not supported there, not an error.

>>> def tool_bug():
...     return {}.missing_attribute
>>> try:
...     tool_bug()
... except AttributeError as error:
...     is_tool_error(error)     # a doctest's code is not the package's
False
"""

from __future__ import annotations

import linecache
import os
import types

from dtype_explorer.errors import InvalidSpecError

__all__ = ["DATA_ADAPTERS", "UNIMPLEMENTED_IN", "is_tool_error", "refused_by", "unimplemented"]

#: The package's directory: a frame whose file lies under it runs the tool's own code.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: The tool's wrappers that only pass a call on (``_trace._make_wrapper``'s ``traced`` and its
#: ``_called``, the
#: call recorders' ``recorded`` (Keras 3's and Keras 2's: tf_keras cuts its traceback down to
#: the caller's frames), the operators' hooks ``operator_method`` and torch's
#: ``__torch_function__`` and the call they make, ``call_operator`` (and its ``_below``), the
#: random draws' recorder ``draw``): an error raised in the call they pass on (a C function of
#: the backend: torch's ``Tensor.__iadd__``) is the callee's, not theirs.
PASS_THROUGH = frozenset(
    {
        "traced",
        "_called",
        "recorded",
        "operator_method",
        "__torch_function__",
        "call_operator",
        "_below",
        "draw",
    }
)


def is_tool_error(error: BaseException) -> bool:
    """Whether ``error`` was raised by dtype-explorer's own code failing.

    Args:
        error: an exception caught while probing (its ``__traceback__`` is read).

    Returns:
        ``True`` when the innermost frame is the package's own code, not a ``raise`` there
        and not a pass-through wrapper; ``False`` for errors of Keras, a backend or a user.

    >>> is_tool_error(ValueError("no traceback"))
    False
    """
    if isinstance(error, InvalidSpecError):
        return False
    last = _innermost(error.__traceback__)
    if last is None:
        return False
    code = last.tb_frame.f_code
    if not os.path.abspath(code.co_filename).startswith(PACKAGE_DIR):
        return False
    if code.co_name in PASS_THROUGH:
        return False
    line = linecache.getline(code.co_filename, last.tb_lineno).strip()
    return not line.startswith("raise")


#: Where Keras keeps the backend that does not implement every op (``NotImplementedError``
#: for ``fit``, ``svd``, ``eig`` ...): what it refuses there is not supported, not an error.
UNIMPLEMENTED_IN = "/keras/src/backend/openvino/"


def unimplemented(error: BaseException) -> str | None:
    """The function of Keras's openvino backend that raised ``error``, where it is a
    ``NotImplementedError`` raised there, or one Keras re-raised around such an error (a
    layer's call: the re-raise keeps it as its ``__context__``, its traceback whole).

    Args:
        error: an exception caught while probing.

    Returns:
        ``keras.src.backend.openvino.linalg.svd``, or ``None`` (any other error).

    >>> unimplemented(NotImplementedError("no traceback")) is None
    True
    """
    seen = 0
    while error is not None and seen < 8:  # Keras re-raises once per call level
        last = _innermost(error.__traceback__) if isinstance(error, NotImplementedError) else None
        path = "/" + last.tb_frame.f_code.co_filename.replace("\\", "/") if last else ""
        if last is not None and UNIMPLEMENTED_IN in path:
            module = path.split("/keras/src/backend/", 1)[1].removesuffix(".py")
            return f"keras.src.backend.{module.replace('/', '.')}.{last.tb_frame.f_code.co_name}"
        error, seen = error.__cause__ or error.__context__, seen + 1  # type: ignore[assignment]
    return None


#: Where Keras 3 keeps the data adapters ``fit``, ``predict`` and ``evaluate`` hand their data
#: to before any compiled function or layer runs (``array_slicing.py``, ``tf_dataset_adapter.py``
#: ...); Keras 2's is one module, ``tf_keras/src/engine/data_adapter.py``.
DATA_ADAPTERS = ("/keras/src/trainers/data_adapters/", "/tf_keras/src/engine/data_adapter.py")


def refused_by(error: BaseException) -> str | None:
    """The file of Keras's data adapters that raised ``error``, where its traceback (or that of
    an error it was raised around) passes through one: the data the user gave refused before
    anything of the model ran. Keras cuts its own frames from a traceback unless its traceback
    filtering is off (``keras.config.disable_traceback_filtering``).

    Args:
        error: an exception ``model.predict`` or ``model.fit`` raised.

    Returns:
        ``keras/src/trainers/data_adapters/array_slicing.py`` (the innermost such file), or
        ``None``: no frame of a data adapter in its traceback.

    >>> refused_by(ValueError("no traceback")) is None
    True
    """
    seen = 0
    while error is not None and seen < 8:
        found = None
        tb = error.__traceback__
        while tb is not None:
            path = "/" + tb.tb_frame.f_code.co_filename.replace("\\", "/")
            for where in DATA_ADAPTERS:
                if where in path:
                    found = where.lstrip("/") + path.split(where, 1)[1]
            tb = tb.tb_next
        if found is not None:
            return found
        error, seen = error.__cause__ or error.__context__, seen + 1  # type: ignore[assignment]
    return None


def _innermost(tb: types.TracebackType | None) -> types.TracebackType | None:
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last
