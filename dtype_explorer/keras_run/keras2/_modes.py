"""The Keras 2 probe's modes: ``call`` (the layer called eagerly), ``model`` (the layer inside
a functional ``tf_keras.Model`` on ``tf_keras.Input``\\ s of the given dtypes, the model
called), ``predict`` (``model.predict``) and ``fit``: the model compiled with SGD on mean
squared error (under a ``mixed_*`` policy Keras 2's ``compile`` wraps the optimizer in its
``LossScaleOptimizer``) and one ``train_on_batch`` step, as ``model.fit`` runs it (in a
``tf.function``): the gradients' dtypes as ``apply_gradients`` received them (unscaled: Keras
2's ``LossScaleOptimizer.compute_gradients`` divides them by the scale), the loss scale before
and after the step, the variables' dtypes after it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run._values import call_arguments
from dtype_explorer.keras_run.catalog import LayerEntry
from dtype_explorer.keras_run.keras2._values import is_variable
from dtype_explorer.keras_run.probe import LayerInputs, call_layer
from dtype_explorer.records import FitReport, GradientInfo

MODES = ("call", "model", "predict", "fit")
EXECUTION = {
    "call": "eager call (Keras 2, tf_keras)",
    "model": "eager call of a functional tf_keras.Model around the layer",
    "predict": "model.predict (Keras 2: a tf.function)",
    "fit": "eager call of a functional tf_keras.Model, then one model.fit step",
}
NO_GRADIENT_VALUES = (
    "fit: the gradients' dtypes are read inside the compiled step (tf.function); their inf/NaN "
    "show in the loss scale after the step"
)


class Keras2Run:
    """One probe's call in its mode, and the fit step after it."""

    def __init__(
        self,
        mode: str,
        layer: Any,
        entry: LayerEntry,
        inputs: LayerInputs,
        tf_keras: Any,
        call_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if mode not in MODES:
            raise InvalidSpecError(
                f"mode {mode!r} is not probed with Keras 2; the Keras 2 engine runs "
                f"{', '.join(MODES)}"
            )
        self.mode, self.layer, self.entry, self.inputs, self.k = (
            mode,
            layer,
            entry,
            inputs,
            tf_keras,
        )
        self.model: Any = None
        self.execution = EXECUTION[mode]
        self.arguments = call_arguments(call_kwargs or {})  # the user's mask, training=...

    def call(self) -> Any:
        """The layer called (``call``) or the model around it (the other modes)."""
        given = self.inputs.nested(self.inputs.leaves)
        if self.mode == "call":
            return call_layer(self.layer, self.entry, given, **self.arguments)
        k = self.k
        symbolic = [
            k.Input(shape=np.shape(leaf)[1:], batch_size=np.shape(leaf)[0], dtype=dtype)
            for leaf, dtype in zip(self.inputs.leaves, self.inputs.dtypes)
        ]
        nested = self.inputs.nested(symbolic)
        self.model = k.Model(nested, call_layer(self.layer, self.entry, nested, **self.arguments))
        if self.mode == "predict":
            return self.model.predict(_model_input(given), verbose=0)
        return self.model(_model_input(given))

    def fit_step(self, outputs: Any, tf: Any) -> FitReport:
        """One training step of the model on zeros shaped as its outputs (mean squared error,
        SGD; Keras 2 adds its ``LossScaleOptimizer`` under a mixed policy)."""
        targets = [np.zeros(t.shape, "float32") for t in tf.nest.flatten(outputs)]
        x = _model_input(self.inputs.nested(self.inputs.leaves))
        return train_on_batch(self.model, x, targets, self.layer.weights)


def train_on_batch(
    model: Any,
    x: Any,
    targets: Any,
    variables: Any = None,
    loss: Any = "mean_squared_error",
    optimizer: Any = None,
    *,
    nonfinite: bool = False,
) -> FitReport:
    """One Keras 2 ``train_on_batch`` step of ``model`` (compiled here with ``loss`` and
    ``optimizer``, default SGD; under a mixed policy Keras 2 wraps it in its
    ``LossScaleOptimizer``): the gradients' dtypes as ``apply_gradients`` received them, the
    loss scale before and after, ``variables``' dtypes after it (default: the model's).
    ``nonfinite`` (the audit): also whether each gradient held inf/NaN (a ``tf.py_function``
    in the step), the variables named with their layer's path (``dense/kernel``).
    """
    import tensorflow as tf
    import tf_keras as k

    model.compile(optimizer=optimizer or k.optimizers.SGD(), loss=loss)
    optimizer = model.optimizer
    scaling = isinstance(optimizer, k.mixed_precision.LossScaleOptimizer)
    before = float(optimizer.loss_scale) if scaling else None
    recorded: list[GradientInfo] = []
    counts: dict[int, bool] | None = {} if nonfinite else None
    with (
        _gradients_to(optimizer, recorded, tf, counts),
        warnings.catch_warnings(record=True) as said,
    ):
        warnings.simplefilter("always")
        value = model.train_on_batch(x, targets)
    if counts is not None:
        recorded = [
            g.model_copy(update={"nonfinite": counts.get(i)}) for i, g in enumerate(recorded)
        ]
    inner = type(getattr(optimizer, "inner_optimizer", optimizer)).__name__
    return FitReport(
        loss=loss if isinstance(loss, str) else getattr(loss, "name", type(loss).__name__),
        optimizer=f"LossScaleOptimizer({inner})" if scaling else inner,
        loss_value=float(np.ravel(value)[0]),
        loss_scaling=scaling,
        loss_scale=before,
        loss_scale_after=float(optimizer.loss_scale) if scaling else None,
        gradients=tuple(recorded),
        variables_after={
            _name(v, nonfinite): tf.as_dtype(v.dtype).name
            for v in (model.weights if variables is None else variables)
            if is_variable(v)
        },
        warnings=tuple(str(w.message) for w in said),
        compiled=True,
        execution="model.train_on_batch: one training step, compiled by tf.function",
    )


def _model_input(given: list[Any]) -> Any:
    return given[0] if len(given) == 1 else list(given)


def _name(variable: Any, path: bool = False) -> str:
    """``kernel``, or with ``path`` its layer's too (``dense/kernel``, as Keras 3 audits)."""
    name = variable.name.removesuffix(":0")
    return name if path else name.rsplit("/", 1)[-1]


@contextlib.contextmanager
def _gradients_to(
    optimizer: Any, recorded: list[GradientInfo], tf: Any, counts: dict[int, bool] | None = None
) -> Iterator[None]:
    """``optimizer.apply_gradients`` wrapped on the instance: each gradient's dtype (read at
    trace time inside the compiled step) beside its variable's true dtype; with ``counts``,
    whether it held inf/NaN, by its index (read as the step runs, by a ``tf.py_function``)."""
    original = optimizer.apply_gradients

    def recording(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:  # a pass-through
        pairs = list(grads_and_vars)
        if not recorded or counts is not None:  # each trace: tf.function traces twice when
            recorded.clear()  # the first one creates the optimizer's variables
            for i, (grad, var) in enumerate(pairs):
                if grad is None:
                    continue
                if counts is not None:
                    pairs[i] = (_count_nonfinite(grad, len(recorded), counts, tf), var)
                true = getattr(var, "true_dtype", var.dtype)
                recorded.append(
                    GradientInfo(
                        name=_name(var, counts is not None),
                        dtype=tf.as_dtype(grad.dtype).name,
                        variable_dtype=tf.as_dtype(true).name,
                        nonfinite=None,
                    )
                )
        return original(pairs, *args, **kwargs)

    optimizer.apply_gradients = recording
    try:
        yield
    finally:
        with contextlib.suppress(AttributeError):
            del optimizer.apply_gradients


def _count_nonfinite(grad: Any, index: int, counts: dict[int, bool], tf: Any) -> Any:
    """``grad``, once whether it holds inf/NaN is stored in ``counts[index]`` (as the step
    runs)."""

    def store(bad: Any) -> bool:
        counts[index] = bool(bad.numpy())
        return counts[index]

    values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
    bad = tf.logical_not(tf.reduce_all(tf.math.is_finite(tf.cast(values, "float32"))))
    with tf.control_dependencies([tf.py_function(store, [bad], Tout=tf.bool)]):
        if isinstance(grad, tf.IndexedSlices):
            return tf.IndexedSlices(tf.identity(grad.values), grad.indices, grad.dense_shape)
        return tf.identity(grad)


def keras2_copy(model: Any) -> Any:
    """A copy of the Keras 2 ``model`` to train (the user's is never compiled or trained): a
    functional or Sequential model cloned (``tf_keras.models.clone_model``) under its own
    policy, its weights copied; another model rebuilt from its config.

    Raises:
        InvalidSpecError: a model that neither clones nor rebuilds from its config, saying so.
    """
    import tf_keras as k

    try:
        copy = k.models.clone_model(model)
    except (ValueError, TypeError):
        try:
            copy = type(model).from_config(model.get_config())
        except Exception as exc:
            raise InvalidSpecError(
                f"mode 'fit' trains a copy of the Keras 2 model {model.name!r} "
                f"({type(model).__name__}); it neither clones (tf_keras.models.clone_model) "
                f"nor rebuilds from its config ({type(exc).__name__}: {exc})"
            ) from None
    if copy.dtype_policy.name != model.dtype_policy.name:
        copy._set_dtype_policy(model.dtype_policy)
    if model.built and not copy.built and getattr(model, "_build_input_shape", None):
        copy.build(model._build_input_shape)
    if copy.built:
        copy.set_weights(model.get_weights())
    return copy
