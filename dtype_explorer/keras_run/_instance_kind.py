"""What kind of Keras instance a target is, and its own dtype policy: read without the
instance machinery (``_instance``), so that checking a question (``make_spec``) imports no
model copying or tracing code."""

from __future__ import annotations

from typing import Any


def keras2_layer_class(target: Any) -> type | None:
    """The class of a Keras 2 (``tf_keras``) layer or model class, read from its bases'
    modules without importing Keras; ``None`` for anything else (Keras 3 classes among them).

    >>> keras2_layer_class(int) is None
    True
    """
    cls = target if isinstance(target, type) else None
    for base in getattr(cls, "__mro__", ()):
        if base.__name__ == "Layer" and base.__module__.startswith("tf_keras."):
            return cls
    return None


def keras2_objective_kind(target: Any) -> str | None:
    """``"loss"`` or ``"metric"`` for a Keras 2 (``tf_keras``) loss or metric *instance*,
    read from its class's bases' modules without importing Keras; ``None`` for anything else.

    >>> keras2_objective_kind(3) is None
    True
    """
    if isinstance(target, type):
        return None
    for base in type(target).__mro__:
        if base.__module__.startswith("tf_keras."):
            if base.__name__ == "Loss":
                return "loss"
            if base.__name__ == "Metric":
                return "metric"
    return None


def instance_kind(target: Any) -> str | None:
    """``"layer"`` (a model too), ``"metric"`` or ``"loss"`` for a Keras instance; ``None``
    for anything else (a class, a name)."""
    import keras

    if isinstance(target, type):
        return None
    if isinstance(target, keras.layers.Layer):
        return "layer"
    if isinstance(target, keras.metrics.Metric):
        return "metric"
    if isinstance(target, keras.losses.Loss):
        return "loss"
    return None


def own_policy(instance: Any) -> str:
    """An instance's dtype policy name; a metric's or a loss's, its one dtype (``"int64"``
    where its policy is named ``"int"``)."""
    policy = getattr(instance, "dtype_policy", None)
    return policy.name if policy is not None else instance.dtype
