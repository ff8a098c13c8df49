"""A fix that is proven, for a model computing in float16 and trained without loss scaling:
real ``model.fit`` steps on three copies of the model, each compiled as the model is
(``compile_copy``), run eagerly so that each gradient is read, as a value, where the
optimizer receives it:

* the model as it is (its own optimizer): one step;
* the same with that optimizer wrapped in a ``keras.optimizers.LossScaleOptimizer``: steps
  until it applies one (at most :data:`SETTLE_STEPS`). A step whose scaled gradients hold
  inf/NaN is skipped and the scale halved, as the optimizer is designed to do (its scale
  starts at 2**15), and skipping leaves the trainable weights as they were; so its first
  applied step is measured, on the same weights, and the steps it skipped are said
  (:class:`Settling`);
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
>>> before, after, settling = loss_scale_measures(model, np.full((2, 4), 1e-4, "float32"),
...                                               np.full((2, 1), 1e-4, "float32"))
>>> before.underflowed > 0, after.underflowed, settling.applied
(True, 0, True)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run._keras_state import global_seed_kept
from dtype_explorer.keras_run.model._copy import compile_copy, training_copy
from dtype_explorer.keras_run.model._policy_rebuild import rebuild_under
from dtype_explorer.keras_run.model._samples import keras_flatten
from dtype_explorer.keras_run.model._training import gradients_to, loss_scale
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


#: The most ``fit`` steps the LossScaleOptimizer is given to apply one: each skipped step
#: halves its scale, from 2**15 to below 1 in 16 steps.
SETTLE_STEPS = 20


class Settling(NamedTuple):
    """How the LossScaleOptimizer's steps went before the one measured.

    Attributes:
        skipped: the steps it skipped (inf/NaN in its scaled gradients), before the one
            measured.
        scale: its loss scale after the steps: the scale the step measured ran at when it was
            applied (``None``: not read).
        applied: whether the step measured was applied (its gradients all finite); ``False``
            when it skipped every one of :data:`SETTLE_STEPS` steps.
    """

    skipped: int
    scale: float | None
    applied: bool


def loss_scale_measures(
    model: Any, sample: Any, labels: Any = None, kwargs: dict | None = None
) -> tuple[FixMeasure, FixMeasure, Settling]:
    """One ``model.fit`` step of ``model`` as compiled (before) and the first step that a copy
    with its optimizer in a ``LossScaleOptimizer`` applies (after), each against the same step
    of the model in float32.

    Args:
        model: a compiled Sequential or Functional model (never changed: copies train).
        sample: the batch of inputs.
        labels: its targets (default: :func:`fitting_labels` of the model's outputs).
        kwargs: the call's keyword arguments (for the outputs' shapes only).

    Returns:
        ``(before, after, settling)``: ``FixMeasure``\\ s with ``gradient_values``,
        ``underflowed`` and ``nonfinite_gradients`` (``finding`` left ``True``: the caller
        says), and the steps the LossScaleOptimizer skipped before the one measured.
    """
    outputs = model(sample, **{k: v for k, v in (kwargs or {}).items() if k != "training"})
    labels = fitting_labels(model, outputs) if labels is None else labels
    wide = rebuild_under(model, "float32").model
    if wide is None:
        raise ValueError("the model could not be rebuilt in float32 for the reference step")
    compile_copy(wide, model, outputs)
    reference = _step_gradients(wide, sample, labels)[0]
    before = training_copy(model, sample, model.dtype_policy.name)
    compile_copy(before, model, outputs)
    unscaled = _measure(_step_gradients(before, sample, labels)[0], reference)
    scaled = training_copy(model, sample, model.dtype_policy.name)
    compile_copy(scaled, model, outputs)
    _with_loss_scale(scaled)
    steps = _step_gradients(scaled, sample, labels, SETTLE_STEPS)
    settling = Settling(len(steps) - 1, loss_scale(scaled.optimizer), _all_finite(steps[-1]))
    return unscaled, _measure(steps[-1], reference), settling


def _with_loss_scale(copy: Any) -> None:
    """``copy`` compiled again with its optimizer (a fresh one of the same config) wrapped in
    a ``LossScaleOptimizer``, its loss kept."""
    import keras

    inner = copy.optimizer
    if isinstance(inner, keras.optimizers.LossScaleOptimizer):
        return
    fresh = type(inner).from_config(inner.get_config())
    copy.compile(optimizer=keras.optimizers.LossScaleOptimizer(fresh), loss=copy.loss)


def _step_gradients(copy: Any, sample: Any, labels: Any, steps: int = 1) -> list[list[np.ndarray]]:
    """The gradients of eager ``fit`` steps of ``copy``, as NumPy, as its optimizer received
    them, a list per step: one step, or up to ``steps``, stopping after the first whose
    gradients are all finite (a LossScaleOptimizer applies it)."""
    import keras

    got: list[list[np.ndarray]] = []
    copy.run_eagerly = True  # each gradient a value where the optimizer receives it
    batch = len(keras_flatten(sample)[0])

    class Settled(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if got and _all_finite(got[-1]):
                self.model.stop_training = True

    with _read(copy.optimizer, got), global_seed_kept():
        copy.fit(
            sample,
            labels,
            batch_size=batch,
            epochs=steps,
            verbose=0,
            shuffle=False,
            callbacks=[Settled()] if steps > 1 else [],
        )
    return got


def _all_finite(gradients: list[np.ndarray]) -> bool:
    return all(bool(np.isfinite(g).all()) for g in gradients)


@contextlib.contextmanager
def _read(optimizer: Any, into: list[list[np.ndarray]]) -> Iterator[None]:
    """The optimizer's ``apply`` and ``stateless_apply`` copy each step's gradients into
    ``into`` first (on the instance)."""

    def keep(gradients: list) -> None:
        into.append(
            [np.asarray(numpy_values(g), dtype=np.float32) for g in gradients if g is not None]
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
