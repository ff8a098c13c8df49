"""A user's tf.keras (``tf_keras``) layer instance, probed as given: it travels to the Keras 2
worker as its class, its config (its own dtype policy in it), the shape it was built on and
its weights (:class:`Keras2Packed`: a ``tf_keras`` layer does not pickle), and every probed
copy is made from that: ``from_config``, built on the same shape, the same weights set. The
user's object is never called. A ``tf_keras.Model`` instance pickles itself (tf_keras's own
``__reduce__``): it travels as it is and the worker's copy is probed.

>>> is_keras2_instance(3), is_keras2_instance(int)
(False, False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dtype_explorer.keras_run._instance_kind import keras2_layer_class, keras2_objective_kind


def is_keras2_instance(target: Any) -> bool:
    """Whether ``target`` is a tf.keras layer or model *instance* (read without importing
    Keras)."""
    return not isinstance(target, type) and keras2_layer_class(type(target)) is not None


@dataclass
class Keras2Packed:
    """A tf.keras layer instance as it travels: enough to make exact copies of it.

    Attributes:
        cls: its class.
        config: ``get_config()`` (its dtype policy as ``"dtype"``).
        policy: its policy's name.
        input_shape: the shape it was built on (``None``: not built).
        weights: ``get_weights()``, in order.
        name: its name.
    """

    cls: type
    config: dict[str, Any]
    policy: str
    input_shape: Any = None
    weights: list[np.ndarray] = field(default_factory=list)
    name: str = ""

    def copy(self, dtype: str | None = None) -> Any:
        """A fresh copy: under its own policy, or ``dtype`` (the numerics reference: float64,
        its floating weights widened)."""
        config = dict(self.config) if dtype is None else {**self.config, "dtype": dtype}
        layer = self.cls.from_config(config)
        if self.input_shape is not None:
            layer.build(self.input_shape)
            weights = self.weights
            if dtype is not None:
                weights = [w.astype(dtype) if w.dtype.kind == "f" else w for w in weights]
            layer.set_weights(weights)
        return layer


def keras2_pack(target: Any) -> Any:
    """What a tf.keras instance travels as: a layer, a loss or a metric as
    :class:`Keras2Packed` (a loss's or metric's config only: its state is not probed), a model
    as it is (it pickles itself); ``None`` for anything else.

    Raises:
        TypeError: a layer whose config does not make a copy (no ``get_config()`` that its
            ``from_config()`` accepts), saying so.
    """
    if keras2_objective_kind(target) is not None:  # a loss or metric: its config
        config = target.get_config()
        return Keras2Packed(cls=type(target), config=config, policy=str(config.get("dtype", "")))
    if not is_keras2_instance(target):
        return None
    import tf_keras

    if isinstance(target, tf_keras.Model):
        return target
    try:
        config = target.get_config()
    except NotImplementedError as error:
        raise TypeError(
            f"{type(target).__name__} has no get_config(): a tf.keras layer instance travels "
            "as its config and weights; give it a get_config() that from_config() accepts, "
            "or probe its class"
        ) from error
    shape = getattr(target, "_build_input_shape", None)
    if shape is not None:
        shape = _plain_shape(shape)
    return Keras2Packed(
        cls=type(target),
        config=config,
        policy=target.dtype_policy.name,
        input_shape=shape,
        weights=[np.asarray(w) for w in target.get_weights()] if target.built else [],
        name=target.name,
    )


def _plain_shape(shape: Any) -> Any:
    """A ``TensorShape`` (or a nest of them) as lists of ints and ``None``."""
    import tensorflow as tf

    if isinstance(shape, tf.TensorShape):
        return shape.as_list() if shape.rank is not None else None
    if isinstance(shape, (list, tuple)) and shape and not isinstance(shape[0], (int, type(None))):
        return [_plain_shape(s) for s in shape]
    if isinstance(shape, dict):
        return {k: _plain_shape(v) for k, v in shape.items()}
    return list(shape)


class Keras2Copies:
    """The build stage's maker for a user's instance: each call a fresh copy of it, under its
    own policy or the one asked (rebuilt from its config: ``note`` says so); ``widened`` the
    numerics reference's copy, ``None`` for a model (probed as it travelled: no reference).

    Attributes:
        target: the instance as it travelled (``Keras2Packed``, or a model).
        policy: the policy its copies get, ``None`` for its own.
        note: what a policy of the user's changed, for ``basis``; ``""`` when none.
    """

    def __init__(self, target: Any, policy: str) -> None:
        self.target = target
        own = target.policy if isinstance(target, Keras2Packed) else target.dtype_policy.name
        self.policy = policy if policy != own else None
        self.note = ""
        if self.policy is not None:
            if not isinstance(target, Keras2Packed):
                raise ValueError(
                    f"policy {policy!r}: a tf.keras model instance is probed under its own "
                    f"policy {own!r}; leave policy out, or probe its class"
                )
            self.note = (
                f"your {target.name!r} rebuilt from its config under policy {policy!r} "
                f"(its own: {own!r}), with its weights"
            )

    def __call__(self, **kwargs: Any) -> Any:
        if isinstance(self.target, Keras2Packed):
            return self.target.copy(self.policy)
        return self.target

    @property
    def widened(self) -> Any:
        """``make()`` of the float64 copy, or ``None`` for a model."""
        if not isinstance(self.target, Keras2Packed):
            return None
        return lambda: self.target.copy("float64")
