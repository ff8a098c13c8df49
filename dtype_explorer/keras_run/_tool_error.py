"""Whose error is it: Keras's (an answer) or dtype-explorer's own (never an answer).

An exception is the tool's own failure when the innermost frame of its traceback runs code of
the ``dtype_explorer`` package and is neither a deliberate refusal there (a ``raise``
statement: an ``InvalidSpecError``, a preset the tool does not know) nor one of the thin
wrappers through which the tool passes a call on to Keras (the op trace, the call recorder).
Anything raised inside Keras, its backend or a user's layer is Keras's answer.

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

__all__ = ["is_tool_error"]

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


def _innermost(tb: types.TracebackType | None) -> types.TracebackType | None:
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last
