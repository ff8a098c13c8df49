"""The fix run for training steps that left variables unchanged (``update-lost``): the layers
holding those variables put in float32 on a copy of the compiled model (``float32_copy``: their
own ``dtype="float32"``, the same weights), the copy compiled as the model is, and trained the
same steps on the same batch (``train_steps``). Whether every one of those variables then
moved is the proof; the audit's rules read it (``analyses.audit._fixes_training``).

>>> import keras, numpy as np
>>> inputs = keras.Input((4,))
>>> model = keras.Model(inputs, keras.layers.Dense(1, dtype="bfloat16", name="d")(inputs), name="m")
>>> model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="mse")
>>> holding_layers(model, ["d/kernel", "d/bias"])
['m/d']
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dtype_explorer.keras_run.model._copy import compile_copy
from dtype_explorer.keras_run.model._model_trace import layer_paths
from dtype_explorer.keras_run.model._proven_fix import Trial, float32_copy
from dtype_explorer.keras_run.model._training import train_steps
from dtype_explorer.records import FitReport

__all__ = ["FrozenFixRun", "holding_layers", "trained_in_float32"]


def holding_layers(model: Any, names: list[str]) -> list[str]:
    """The audit paths of the innermost layers that hold the trainable variables ``names``
    (``FitReport`` names: ``Variable.path`` less the model's name), in the model's order.

    Args:
        model: a Keras model.
        names: variable names as a ``FitReport`` gives them (``"dense/kernel"``).

    Returns:
        One audit path per layer (``"functional/dense"``), each once.
    """
    wanted = set(names)
    owner: dict[str, tuple[int, str]] = {}
    for layer, path, depth in layer_paths(model).values():
        for variable in layer.trainable_weights:
            name = variable.path.removeprefix(f"{model.name}/")
            if name in wanted and depth >= owner.get(name, (-1, ""))[0]:
                owner[name] = (depth, path)
    return list(dict.fromkeys(owner[n][1] for n in names if n in owner))


@dataclasses.dataclass(frozen=True)
class FrozenFixRun:
    """The fix's copy (``trial``; ``None``: none could be tried), its training run (``run``;
    ``None``: it did not run, ``error`` says why), and the variables it still left as they
    were, by the names the audit's run gave them (``still``)."""

    trial: Trial | None
    run: FitReport | None = None
    error: str = ""
    still: tuple[str, ...] = ()


def trained_in_float32(
    model: Any, sample: Any, labels: Any, steps: int, names: list[str]
) -> FrozenFixRun:
    """A copy of the compiled ``model`` with the layers holding ``names`` in float32,
    compiled as ``model`` is and trained ``steps`` steps on ``(sample, labels)``.

    Args:
        model: the audit's compiled copy (never trained here).
        sample: the batch of inputs.
        labels: the batch of targets the audit trained on.
        steps: how many steps.
        names: the variables the audit's run left unchanged.

    Returns:
        The :class:`FrozenFixRun`. Its variables are matched with the model's by position
        (a clone keeps their order; a nested model's clone may name them otherwise): a copy
        whose trainable variables do not line up is an error, never a fix.
    """
    trial = float32_copy(model, holding_layers(model, names))
    if trial is None or not trial.ran or trial.error:
        return FrozenFixRun(trial, error="" if trial is None else trial.error)
    copy = trial.copy
    ours = _names(model)
    theirs = _names(copy)
    if len(ours) != len(theirs):
        return FrozenFixRun(trial, error="the copy's trainable variables do not line up")
    try:
        compile_copy(copy, model, None)
        run = train_steps(copy, sample, labels, steps, prefix=f"{copy.name}/")
    except Exception as error:  # a copy that cannot train: said, never a fix
        return FrozenFixRun(trial, error=f"{type(error).__name__}: {str(error)[:200]}")
    as_ours = dict(zip(theirs, ours))
    left = {as_ours.get(f.name) for f in run.frozen}
    return FrozenFixRun(trial, run, still=tuple(n for n in names if n in left))


def _names(model: Any) -> list[str]:
    """Its trainable variables' names as a fit run gives them (``Variable.path`` less the
    model's name), in order."""
    return [v.path.removeprefix(f"{model.name}/") for v in model.trainable_variables]
