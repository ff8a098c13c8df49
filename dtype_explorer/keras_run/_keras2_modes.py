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
from dtype_explorer.keras_run._stages import LayerInputs, call_layer
from dtype_explorer.keras_run.catalog import LayerEntry
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
        self, mode: str, layer: Any, entry: LayerEntry, inputs: LayerInputs, tf_keras: Any
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

    def call(self) -> Any:
        """The layer called (``call``) or the model around it (the other modes)."""
        given = self.inputs.nested(self.inputs.leaves)
        if self.mode == "call":
            return call_layer(self.layer, self.entry, given)
        k = self.k
        symbolic = [
            k.Input(shape=np.shape(leaf)[1:], batch_size=np.shape(leaf)[0], dtype=dtype)
            for leaf, dtype in zip(self.inputs.leaves, self.inputs.dtypes)
        ]
        nested = self.inputs.nested(symbolic)
        self.model = k.Model(nested, call_layer(self.layer, self.entry, nested))
        if self.mode == "predict":
            return self.model.predict(_model_input(given), verbose=0)
        return self.model(_model_input(given))

    def fit_step(self, outputs: Any, tf: Any) -> FitReport:
        """One training step of the model on zeros shaped as its outputs (mean squared error,
        SGD; Keras 2 adds its ``LossScaleOptimizer`` under a mixed policy)."""
        k, model = self.k, self.model
        targets = [np.zeros(t.shape, "float32") for t in tf.nest.flatten(outputs)]
        model.compile(optimizer=k.optimizers.SGD(), loss="mean_squared_error")
        optimizer = model.optimizer
        scaling = isinstance(optimizer, k.mixed_precision.LossScaleOptimizer)
        before = float(optimizer.loss_scale) if scaling else None
        recorded: list[GradientInfo] = []
        with _gradients_to(optimizer, recorded, tf), warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            loss = model.train_on_batch(
                _model_input(self.inputs.nested(self.inputs.leaves)), targets
            )
        inner = type(getattr(optimizer, "inner_optimizer", optimizer)).__name__
        return FitReport(
            loss="mean_squared_error",
            optimizer=f"LossScaleOptimizer({inner})" if scaling else inner,
            loss_value=float(np.ravel(loss)[0]),
            loss_scaling=scaling,
            loss_scale=before,
            loss_scale_after=float(optimizer.loss_scale) if scaling else None,
            gradients=tuple(recorded),
            variables_after={_name(v): tf.as_dtype(v.dtype).name for v in self.layer.weights},
            warnings=tuple(str(w.message) for w in said),
            compiled=True,
            execution="model.train_on_batch: one training step, compiled by tf.function",
        )


def _model_input(given: list[Any]) -> Any:
    return given[0] if len(given) == 1 else list(given)


def _name(variable: Any) -> str:
    return variable.name.removesuffix(":0").rsplit("/", 1)[-1]


@contextlib.contextmanager
def _gradients_to(optimizer: Any, recorded: list[GradientInfo], tf: Any) -> Iterator[None]:
    """``optimizer.apply_gradients`` wrapped on the instance: each gradient's dtype (read at
    trace time inside the compiled step) beside its variable's true dtype."""
    original = optimizer.apply_gradients

    def recording(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:  # a pass-through
        pairs = list(grads_and_vars)
        if not recorded:
            for grad, var in pairs:
                if grad is None:
                    continue
                true = getattr(var, "true_dtype", var.dtype)
                recorded.append(
                    GradientInfo(
                        name=_name(var),
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
