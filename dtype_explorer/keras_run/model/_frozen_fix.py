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

from typing import Any

from dtype_explorer.keras_run.model._copy import compile_copy
from dtype_explorer.keras_run.model._model_trace import layer_paths
from dtype_explorer.keras_run.model._proven_fix import Trial, float32_copy
from dtype_explorer.keras_run.model._training import train_steps
from dtype_explorer.records import FitReport

__all__ = ["holding_layers", "trained_in_float32"]


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


def trained_in_float32(
    model: Any, sample: Any, labels: Any, steps: int, names: list[str]
) -> tuple[Trial | None, FitReport | None, str]:
    """A copy of the compiled ``model`` with the layers holding ``names`` in float32,
    compiled as ``model`` is and trained ``steps`` steps on ``(sample, labels)``.

    Args:
        model: the audit's compiled copy (never trained here).
        sample: the batch of inputs.
        labels: the batch of targets the audit trained on.
        steps: how many steps.
        names: the variables the audit's run left unchanged.

    Returns:
        The trial (``None``: no copy could be tried), the copy's run (``None``: it did not
        run), and what stopped it (``""``: nothing).
    """
    trial = float32_copy(model, holding_layers(model, names))
    if trial is None or not trial.ran or trial.error:
        return trial, None, "" if trial is None else trial.error
    try:
        compile_copy(trial.copy, model, None)
        run = train_steps(trial.copy, sample, labels, steps, prefix=f"{trial.copy.name}/")
    except Exception as error:  # a copy that cannot train: said, never a fix
        return trial, None, f"{type(error).__name__}: {str(error)[:200]}"
    return trial, run, ""
