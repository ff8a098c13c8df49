"""Every public ``keras.losses`` and ``keras.metrics`` name, read from ``losses_metrics.json``
(written by ``tools/build_ops_catalog.py``), and the samples their inputs take.

>>> import numpy as np
>>> sorted(set(values("pm1", (4,), "float32", np.random.default_rng(0)).tolist()))
[-1.0, 1.0]
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np

from dtype_explorer.keras_run.catalog._entries import ObjectiveEntry
from dtype_explorer.keras_run.catalog._op_calls import values as op_values

TABLE = Path(__file__).with_name("losses_metrics.json")


@functools.cache
def load() -> tuple[ObjectiveEntry, ...]:
    """Every loss and metric entry, once each."""
    rows = json.loads(TABLE.read_text())["entries"]
    return tuple(
        ObjectiveEntry(
            name=row["name"],
            kind=row["kind"],
            group=row["group"],
            inputs=tuple(row["inputs"]),
            init_kwargs=row["init_kwargs"],
            kwargs=row["kwargs"],
            aliases=tuple(row["aliases"]),
            skip=row["skip"],
        )
        for row in rows
    )


def values(preset: Any, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> Any:
    """A sample for a loss or metric input: the op presets, plus ``pm1`` (-1/+1 hinge labels)
    and ``l2rows`` (L2-normalised embedding rows)."""
    if preset == "pm1":
        signs = rng.choice([-1.0, 1.0], size=shape)
        return (
            signs > 0
            if dtype == "bool"
            else op_values({"literal": signs.tolist()}, shape, dtype, rng)
        )
    if preset == "l2rows":
        rows = rng.integers(1, 4, size=shape).astype(np.float64)
        rows = rows / np.linalg.norm(rows, axis=-1, keepdims=True)
        return op_values({"literal": rows.tolist()}, shape, dtype, rng)
    return op_values(preset, shape, dtype, rng)


def build_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Constructor kwargs with ``"keras.<path>"`` strings made the Keras objects they name."""
    import keras

    built = {}
    for key, value in kwargs.items():
        if isinstance(value, str) and value.startswith("keras."):
            found: Any = keras
            for part in value.split(".")[1:]:
                found = getattr(found, part)
            value = found
        built[key] = value
    return built


def resolve(entry: ObjectiveEntry) -> Any:
    """``keras.losses.<name>`` or ``keras.metrics.<name>``."""
    import keras

    return getattr(getattr(keras, entry.group), entry.short_name)
