"""How a custom target travels to a worker (``pool.submit(..., target_payload=)``): pickled
once here, read back by the worker (``_worker``'s custom target).

A class or factory travels by value (cloudpickle, so notebook definitions travel); a layer,
model, loss or metric *instance* in Keras's own format; a tf.keras instance as its config and
weights; what cannot travel, as its error. The user's source lines go with a target
(``_user_source``: cloudpickle names the code it ships ``<dynamic-code>``), so that the op
trace in the worker shows the user's file, line and text.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

import cloudpickle

from dtype_explorer import keras_run
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
