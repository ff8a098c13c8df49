"""How a custom target travels to a worker (``pool.submit(..., target_payload=)``): pickled
once here, read back by the worker (``_worker``'s custom target).

A class or factory travels by value (cloudpickle, so notebook definitions travel); a layer,
model, loss or metric *instance* in Keras's own format; a tf.keras instance as its config and
weights; what cannot travel, as its error. The user's source lines go with a target
(``_user_source``: cloudpickle names the code it ships ``<dynamic-code>``), so that the op
trace in the worker shows the user's file, line and text. ``dx.trace(backend=...)``'s
function travels the same way (:func:`code_payload`, :func:`load_code`).
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

import cloudpickle

from dtype_explorer import keras_run
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.runtime import _user_source as user_source


def target_payload(target: Any) -> bytes:
    """Pickle a custom target for the workers: a class or factory by value (cloudpickle, so
    notebook definitions travel); a layer, model, loss or metric *instance* in Keras's own
    format (``keras_run.pack``: a ``.keras`` archive in memory, with the custom classes it
    names by value), loaded in the worker under safe mode: never its config alone.

    Never raises: what cannot be pickled or saved travels as its error, and every backend's
    result reports it (``ErrorInfo(where="transfer")``).
    """
    keras = sys.modules.get("keras")
    try:
        keras2 = keras_run.keras2_pack(target)  # a tf.keras instance: its config and weights
        if keras2 is not None:
            return cloudpickle.dumps(("object", keras2))
        instance = keras is not None and keras_run.instance_kind(target) is not None
        value = keras_run.pack(target) if instance else target
        source = user_source.capture(value)  # the user's lines, which cloudpickle drops
        return cloudpickle.dumps(("archive" if instance else "object", value, source))
    except Exception as exc:
        return pickle.dumps(("unpicklable", f"{type(exc).__name__}: {exc}"))


def code_payload(value: Any, what: str) -> bytes:
    """The user's code (``dx.trace(backend=...)``'s function) pickled by value for a user-code
    worker (cloudpickle, so notebook definitions travel), with the user's source lines of it
    and of the helpers it calls (``_user_source``); read back by :func:`load_code`.

    Args:
        value: the function (or what it needs beside it).
        what: its name in the error.

    Returns:
        The payload.

    Raises:
        InvalidSpecError: ``value`` cannot be pickled (named, with the reason).

    >>> load_code(code_payload(len, "fn")) is len
    True
    """
    try:
        return cloudpickle.dumps((value, user_source.capture(value)))
    except Exception as exc:
        raise InvalidSpecError(
            f"{what} cannot travel to another backend's worker: it cannot be pickled "
            f"({type(exc).__name__}: {str(exc)[:200]}). Define it at the top level of a "
            "module or a notebook cell, and build what cannot be pickled (an open file, a "
            "lock, a generator) inside it"
        ) from None


def load_code(payload: bytes) -> Any:
    """In a worker: what :func:`code_payload` pickled, its code given the user's file names
    and lines back (cloudpickle names them ``<dynamic-code>``)."""
    value, source = pickle.loads(payload)
    user_source.restore(value, source)
    return value
