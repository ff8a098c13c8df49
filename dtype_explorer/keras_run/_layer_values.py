"""A model's layer call checked by its numbers: the layer rebuilt in the wide dtype with the
same weights, called on the call's own values, and the first output element that is wrong
(``_numerics.check_values``). The audit runs it on each call that does arithmetic on integers
(``_numerics.worth_value_check``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run._numerics import check_values, error_limit
from dtype_explorer.records import ValueFinding


def layer_values_wrong(
    layer: Any,
    values: tuple[Any, Any, Any],
    outputs: tuple[Any, ...],
    compute_dtype: str,
    wide: str,
) -> ValueFinding | None:
    """Re-run ``layer`` (rebuilt under the ``wide`` policy, same weights) on a call's own
    ``values`` (its arguments, keyword arguments and outputs as NumPy), every number array in
    ``wide``, and name the first output element whose number is wrong: wrapped around,
    saturated, truncated, or off beyond ``compute_dtype``'s error. ``outputs`` are the call's
    output ``TensorInfo``s. ``None`` when the numbers hold or the layer cannot be rebuilt in
    ``wide`` (no check)."""
    args, kwargs, produced = values
    try:
        refs = _numpy_leaves(_reference_call(layer, args, kwargs, wide))
    except Exception:
        return None  # a layer that cannot be rebuilt in the wide dtype: no check
    outs = _numpy_leaves(produced)
    for i, (out, ref, info) in enumerate(zip(outs, refs, outputs)):
        found = check_values(
            out.astype(np.float64),
            info.dtype,
            np.asarray(ref).astype(np.float64),
            wide,
            limit=error_limit(compute_dtype),
            output=i,
        )
        if found is not None:
            return found
    return None


def _reference_call(layer: Any, args: Any, kwargs: Any, wide: str) -> Any:
    """``layer`` rebuilt under the ``wide`` policy with the same weights, called on the same
    values with every number array in ``wide``."""
    import keras

    config = {**layer.get_config(), "dtype": wide}
    clone = type(layer).from_config(config)

    def widen(x: Any) -> Any:
        if isinstance(x, np.ndarray) and dtypes.family(x.dtype.name) in ("int", "uint", "float"):
            return x.astype(wide)
        return x

    args, kwargs = keras.tree.map_structure(widen, (args, kwargs))
    clone(*args, **kwargs)
    clone.set_weights(
        [
            w.astype(wide) if dtypes.family(str(w.dtype)) == "float" else w
            for w in layer.get_weights()
        ]
    )
    return clone(*args, **kwargs)


def _numpy_leaves(structure: Any) -> list[np.ndarray]:
    import keras

    return [
        np.asarray(keras.ops.convert_to_numpy(x))
        for x in keras.tree.flatten(structure)
        if hasattr(x, "shape")
    ]
