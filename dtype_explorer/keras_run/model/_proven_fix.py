"""A fix that is proven: the model copied with some layers in float32 (``dtype="float32"`` on
them, the others as they were, the same weights), run untraced on the same sample, and its
leaf outputs checked for inf/NaN. ``float32_set`` grows the set from the layers that
overflowed, adding the next layer that still does, until the copy runs finite: the fix shown
is one that ran.

>>> import keras, numpy as np
>>> inputs = keras.Input((100,))
>>> big = keras.layers.Dense(2, kernel_initializer="ones", dtype="mixed_float16", name="big")
>>> model = keras.Model(inputs, big(inputs))
>>> float32_set(model, np.full((1, 100), 1e3, "float32"), ["big"]).layers
('big',)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dtype_explorer.keras_run.model._copy import cloned_with_weights
from dtype_explorer.keras_run.model._layer_damage import layer_outputs
from dtype_explorer.keras_run.model._samples import describe_model

#: The most rounds ``float32_set`` adds a layer in.
MAX_ROUNDS = 4


@dataclasses.dataclass(frozen=True)
class ProvenFix:
    """Layers kept in float32 and what the copy did: ``nonfinite_after`` inf/NaN in its leaf
    outputs (0: the fix works); ``tried``: each set tried, with its count."""

    layers: tuple[str, ...]
    nonfinite_after: int
    tried: tuple[tuple[tuple[str, ...], int], ...]

    @property
    def works(self) -> bool:
        return self.nonfinite_after == 0


def with_float32(model: Any, names: list[str]) -> Any:
    """A copy of a Sequential or Functional ``model`` with the layers ``names`` under the
    float32 policy, the others rebuilt from their configs as they are, weights copied."""

    def clone(layer: Any) -> Any:
        config = layer.get_config()
        if layer.name in names:
            config = {**config, "dtype": "float32"}
        return type(layer).from_config(config)

    return cloned_with_weights(
        model, clone, f"copy {describe_model(model)} with {names} in float32"
    )


def nonfinite_outputs(model: Any, sample: Any, kwargs: dict | None = None) -> dict[str, int]:
    """How many inf/NaN each leaf layer's outputs hold, by layer name (only those with any)."""
    counts: dict[str, int] = {}
    for (path, _), (_, arrays) in layer_outputs(model, sample, kwargs).items():
        n = sum(int(a.size - np.isfinite(a).sum()) for a in arrays)
        if n:
            name = path.rsplit("/", 1)[-1]
            counts[name] = counts.get(name, 0) + n
    return counts


def float32_set(model: Any, sample: Any, start: list[str], kwargs: dict | None = None) -> ProvenFix:
    """The layers to keep in float32, from ``start`` (the layers that overflowed), grown
    by the first layer still producing inf/NaN in the copy, each set run.

    Args:
        model: a Sequential or Functional Keras model.
        sample: the audited sample.
        start: names of the layers that overflowed.
        kwargs: the call's keyword arguments.

    Returns:
        A ``ProvenFix``: the last set tried and whether its copy ran finite.
    """
    names = list(dict.fromkeys(start))
    tried: list[tuple[tuple[str, ...], int]] = []
    for _ in range(MAX_ROUNDS):
        left = nonfinite_outputs(with_float32(model, names), sample, kwargs)
        tried.append((tuple(names), sum(left.values())))
        if not left:
            break
        new = [n for n in left if n not in names]
        if not new:
            break
        names.append(new[0])
    return ProvenFix(layers=tuple(names), nonfinite_after=tried[-1][1], tried=tuple(tried))
