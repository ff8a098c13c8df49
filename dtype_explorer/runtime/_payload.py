"""How a custom target travels to a worker (``pool.submit(..., target_payload=)``): pickled
once here, read back by the worker (``_worker``'s custom target).

A class or factory travels by value (cloudpickle, so notebook definitions travel); a layer,
model, loss or metric *instance* in Keras's own format; a tf.keras instance as its config and
weights; what cannot travel, as its error.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

import cloudpickle

from dtype_explorer import keras_run


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
        if keras is not None and keras_run.instance_kind(target) is not None:
            return cloudpickle.dumps(("archive", keras_run.pack(target)))
        return cloudpickle.dumps(("object", target))
    except Exception as exc:
        return pickle.dumps(("unpicklable", f"{type(exc).__name__}: {exc}"))
