"""The reference a layer's numbers are measured against: the same layer, with the same weights
(and the same random numbers), run in a wider dtype on the same sample; and the measurement
(``_numerics.measure``) of the probed call's outputs against it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run._keras_state import preserved_keras_state
from dtype_explorer.keras_run._numerics import measure, replayed_draws
from dtype_explorer.keras_run.catalog import LayerEntry
from dtype_explorer.keras_run.probe._stages import LayerInputs
from dtype_explorer.keras_run.trace import variable_name
from dtype_explorer.records import CastStep, Numerics


def layer_numerics(
    build: Callable[[], Any],
    layer: Any,
    entry: LayerEntry,
    call: Callable[..., Any],
    inputs: LayerInputs,
    steps: list[CastStep],
    outputs: Any,
    training: bool,
    widened: Callable[[str], Any] | None = None,
    draws: list[str] | None = None,
) -> Numerics:
    """The outputs' values against the same layer, with the same weights, in a wider dtype
    (and the same random numbers: ``draws``, the dtypes of the call's own draws)."""
    return measure(
        outputs,
        inputs.leaves,
        steps,
        reference=lambda dtype: _reference_outputs(
            build,
            layer,
            entry,
            call,
            inputs.leaves,
            dtype,
            training=training,
            widened=widened,
            draws=draws,
        ),
        comparable=_comparable(layer),
        integer_reference=entry.computes_on_values,
        draws=draws,
    )


def _reference_outputs(
    build: Callable[[], Any],
    layer: Any,
    entry: LayerEntry,
    call: Callable[..., Any],
    samples: list,
    dtype: str,
    *,
    training: bool = False,
    widened: Callable[[str], Any] | None = None,
    draws: list[str] | None = None,
) -> Any:
    """The same layer, with the same weights, run in ``dtype`` on the same sample; under the
    training modes with ``training=True`` and its seed state as built, each random draw made
    in the dtype the probed call drew it in (``draws``): the same numbers as the probed call,
    which was the layer's first. A user's instance is copied under ``dtype`` by ``widened``
    (its archive holds its own policy)."""
    import keras

    roles = entry.input_roles(len(samples))
    if _reusable(layer, dtype, training=training, widened=widened):
        return call(layer, _widened_inputs(samples, roles, dtype))
    with preserved_keras_state():
        keras.config.set_dtype_policy(dtype)
        reference = widened(dtype) if widened is not None else build()

    inputs = _widened_inputs(samples, roles, dtype)
    symbolic = keras.tree.map_structure(
        lambda x: (
            keras.KerasTensor(np.shape(x), dtype=dtypes.describe(x))
            if isinstance(x, np.ndarray)
            else x
        ),
        inputs,
    )
    try:  # built symbolically: no computation (no draw) before the weights are set
        call(reference, symbolic)
    except Exception:
        call(reference, inputs, **({"training": False} if training else {}))
    seeds = [
        (v, keras.ops.convert_to_numpy(v.value))
        for v in reference.variables
        if training and "seed_generator" in variable_name(reference, v)
    ]
    reference.set_weights(
        [
            w.astype(dtype) if keras.backend.is_float_dtype(str(w.dtype)) else w
            for w in layer.get_weights()
        ]
    )
    for variable, value in seeds:
        variable.assign(value)
    with replayed_draws(draws or []):
        return call(reference, inputs, training=True) if training else call(reference, inputs)


def _reusable(
    layer: Any, dtype: str, *, training: bool, widened: Callable[[str], Any] | None
) -> bool:
    """Whether the probed layer itself is the reference: it already computes in ``dtype``
    with the weights the copy would get, and calling it again changes nothing (no state of
    its own: moving statistics, a seed, an RNN's states; not training; not a user's
    instance, whose copies come from its archive)."""
    return (
        not training
        and widened is None
        and getattr(layer.dtype_policy, "name", None) == dtype
        and not layer.non_trainable_variables
    )


def _widened_inputs(samples: list, roles: list[str], dtype: str) -> list:
    """The samples with every float, non-index integer and float-role bool array in
    ``dtype`` (a bool is a number to RMSNormalization: it normalizes 0 and 1)."""
    import keras

    def widen(leaf: Any, role: str) -> Any:
        if not isinstance(leaf, np.ndarray):
            return leaf  # a Python number, a string list: as given
        kind = dtypes.describe(leaf)
        counted = dtypes.is_integer(kind) and role != "index"
        if dtypes.is_float(kind) or counted or (kind == "bool" and role == "float"):
            return leaf.astype(dtype)
        return leaf

    return [
        keras.tree.map_structure(lambda leaf, role=role: widen(leaf, role), s)
        for s, role in zip(samples, roles)
    ]


def _comparable(layer: Any) -> tuple[bool, str]:
    """Whether this layer's numbers can be compared across backends: not when it draws random
    numbers in the call (each backend's own generator)."""
    if any("seed_generator" in variable_name(layer, v) for v in layer.variables):
        return False, "a random layer: each backend draws its own numbers"
    return True, ""
