"""The pool's knobs checked where they enter (``probe``, ``survey``, ``submit``,
``configure``, the widget ...): a time limit in seconds and a number of workers per backend,
each refused with what was received and what is valid.

>>> time_limit(2), time_limit(None), time_limit(math.inf)
(2.0, None, inf)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.runtime._sizing import MAX_WORKERS

#: The longest finite time limit (faulthandler's timer cannot count past ~30 years).
MAX_SECONDS = 1e8


def time_limit(value: Any, name: str = "timeout") -> float | None:
    """Check a time limit where it enters (``probe``, ``survey``, ``submit``, ...): ``None``
    (the configured default), positive seconds up to :data:`MAX_SECONDS`, or ``math.inf`` for
    none. Zero, negative, NaN, ``-inf``, booleans and non-numbers raise ``InvalidSpecError``.

    Args:
        value: the limit given by the user.
        name: the parameter's name, for the message.

    Returns:
        The limit in seconds as a float, or ``None``.

    >>> time_limit(2), time_limit(None), time_limit(math.inf)
    (2.0, None, inf)
    >>> time_limit(float("nan"))  # doctest: +ELLIPSIS, +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InvalidSpecError: timeout must be a number of seconds in (0, 1e+08], ... Received: nan
    """
    return None if value is None else seconds(name, value)


def seconds(name: str, value: Any) -> float:
    """A time limit: positive seconds, or ``math.inf`` for none."""
    problem = (
        f"{name} must be a number of seconds in (0, {MAX_SECONDS:g}], or math.inf for no limit. "
        f"Received: {short(value)}"
    )
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        raise InvalidSpecError(problem)
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidSpecError(problem) from None
    if not (0 < seconds <= MAX_SECONDS or seconds == math.inf):  # NaN fails both
        raise InvalidSpecError(problem)
    return seconds


def short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def worker_count(
    value: Any, default: Callable[[], int], name: str = "workers_per_backend"
) -> int | str:
    """``workers_per_backend`` checked: a whole number from 1 to :data:`MAX_WORKERS`, or
    ``"auto"`` (``default()``, named in the message, is what ``"auto"`` gives here)."""
    if value == "auto" and isinstance(value, str):
        return "auto"
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_WORKERS:
        return value
    raise InvalidSpecError(
        f"{name} must be a whole number from 1 to {MAX_WORKERS}, or 'auto' for "
        f"the default from the cores and memory ({default()} here). "
        f"Received: {short(value)}"
    )
