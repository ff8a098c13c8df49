"""A fix that is proven, for a model computing in float16 and trained without loss scaling:
one real ``model.fit`` step on three copies of the model, each compiled as the model is
(``compile_copy``), run eagerly so that each gradient is read, as a value, where the
optimizer receives it:

* the model as it is (its own optimizer);
* the same with that optimizer wrapped in a ``keras.optimizers.LossScaleOptimizer``;
* the model rebuilt in float32 (the reference: which gradient values are not zero).

Counted per step: the gradient values that are zero where float32's are not (they
underflowed on the way back through float16), and the inf/NaN ones (``records.FixMeasure``).
A loss scale scales every gradient by the same factor: a value zero after it is zero before
unscaling, so the counts are read on what the optimizer receives.

>>> import keras, numpy as np
>>> inputs = keras.Input((4,))
>>> tiny = keras.layers.Dense(1, dtype="mixed_float16", kernel_initializer="zeros", name="d")
>>> model = keras.Model(inputs, keras.layers.Activation("linear", dtype="float32")(tiny(inputs)))
>>> model.compile(optimizer="sgd", loss="mse")
>>> before, after = loss_scale_measures(model, np.full((2, 4), 1e-4, "float32"),
...                                     np.full((2, 1), 1e-4, "float32"))
>>> before.underflowed > 0, after.underflowed
(True, 0)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run._keras_state import global_seed_kept
from dtype_explorer.keras_run.model._copy import compile_copy, training_copy
from dtype_explorer.keras_run.model._policy_rebuild import rebuild_under
from dtype_explorer.keras_run.model._samples import keras_flatten
from dtype_explorer.keras_run.model._training import gradients_to
from dtype_explorer.records import FixMeasure


def fitting_labels(model: Any, outputs: Any) -> Any:
    """Targets of a training step fitting ``outputs``: zeros, class indices (zeros, int32,
    without the class axis) for a sparse loss (by the compiled loss's name)."""
    import keras

    loss = getattr(model, "loss", None)
    name = (
        loss
        if isinstance(loss, str)
        else getattr(loss, "name", None) or getattr(loss, "__name__", type(loss).__name__)
    )
    sparse = "sparse" in str(name).lower()
    return keras.tree.map_structure(
        lambda t: (
            np.zeros(tuple(t.shape)[:-1], "int32")
            if sparse
            else np.zeros(tuple(t.shape), "float32")
        ),
        outputs,
    )


def loss_scale_measures(
    model: Any, sample: Any, labels: Any = None, kwargs: dict | None = None
) -> tuple[FixMeasure, FixMeasure]:
    """One ``model.fit`` step of ``model`` as compiled (before) and with its optimizer in a
    ``LossScaleOptimizer`` (after), each against the same step of the model in float32.

    Args:
        model: a compiled Sequential or Functional model (never changed: copies train).
        sample: the batch of inputs.
        labels: its targets (default: :func:`fitting_labels` of the model's outputs).
        kwargs: the call's keyword arguments (for the outputs' shapes only).

    Returns:
        ``(before, after)``: ``FixMeasure``\\ s with ``gradient_values``, ``underflowed`` and
        ``nonfinite_gradients`` (``finding`` left ``True``: the caller says).
    """
    outputs = model(sample, **{k: v for k, v in (kwargs or {}).items() if k != "training"})
    labels = fitting_labels(model, outputs) if labels is None else labels
    wide = rebuild_under(model, "float32").model
    if wide is None:
        raise ValueError("the model could not be rebuilt in float32 for the reference step")
    compile_copy(wide, model, outputs)
    reference = _step_gradients(wide, sample, labels)
    found = []
    for scaled in (False, True):
        copy = training_copy(model, sample, model.dtype_policy.name)
        compile_copy(copy, model, outputs)
        if scaled:
            _with_loss_scale(copy)
        found.append(_measure(_step_gradients(copy, sample, labels), reference))
    return found[0], found[1]


def _with_loss_scale(copy: Any) -> None:
    """``copy`` compiled again with its optimizer (a fresh one of the same config) wrapped in
    a ``LossScaleOptimizer``, its loss kept."""
    import keras

    inner = copy.optimizer
    if isinstance(inner, keras.optimizers.LossScaleOptimizer):
        return
    fresh = type(inner).from_config(inner.get_config())
    copy.compile(optimizer=keras.optimizers.LossScaleOptimizer(fresh), loss=copy.loss)


def _step_gradients(copy: Any, sample: Any, labels: Any) -> list[np.ndarray]:
    """The gradients of one eager ``fit`` step of ``copy``, as NumPy, as its optimizer
    received them."""
    got: list[np.ndarray] = []
    copy.run_eagerly = True  # each gradient a value where the optimizer receives it
    batch = len(keras_flatten(sample)[0])
    with _read(copy.optimizer, got), global_seed_kept():
        copy.fit(sample, labels, batch_size=batch, epochs=1, verbose=0, shuffle=False)
    return got


@contextlib.contextmanager
def _read(optimizer: Any, into: list[np.ndarray]) -> Iterator[None]:
    """The optimizer's ``apply`` and ``stateless_apply`` copy their gradients into ``into``
    first (on the instance; the first call only)."""

    def keep(gradients: list) -> None:
        if not into:
            into.extend(
                np.asarray(numpy_values(g), dtype=np.float32) for g in gradients if g is not None
            )

    with gradients_to(optimizer, keep):
        yield


def _measure(gradients: list[np.ndarray], reference: list[np.ndarray]) -> FixMeasure:
    """The gradient values zero where the reference's are not, and the inf/NaN ones."""
    values = underflowed = nonfinite = 0
    for g, r in zip(gradients, reference, strict=False):
        if g.shape != r.shape:
            continue
        values += g.size
        nonfinite += int(g.size - np.isfinite(g).sum())
        underflowed += int(((g == 0) & (r != 0) & np.isfinite(r)).sum())
    return FixMeasure(
        finding=True, gradient_values=values, underflowed=underflowed, nonfinite_gradients=nonfinite
    )
