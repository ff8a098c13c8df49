"""A model's layer call checked by its numbers: the layer rebuilt in the wide dtype with the
same weights, called on the call's own values, and the first output element that is wrong
(``_numerics.check_values``). The audit runs it on each call that does arithmetic on integers
(``_numerics.worth_value_check``), and :func:`values_after_cast` runs the fix of a call found
wrong: a copy of the layer (same config, policy and weights) given its inputs cast with
``keras.ops.cast``, checked against the same reference."""

from __future__ import annotations

from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run._arrays import numpy_values
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


def values_after_cast(
    layer: Any,
    values: tuple[Any, Any, Any],
    compute_dtype: str,
    wide: str,
    dtype: str,
) -> tuple[ValueFinding | None, tuple[str, ...], tuple[str, ...]]:
    """The fix of a call whose numbers were wrong, run: a copy of ``layer`` (its config,
    policy and weights) called on the call's own arguments, each number array cast to
    ``dtype`` with ``keras.ops.cast`` (as ``x = keras.ops.cast(x, dtype)`` before the layer
    does), its outputs checked against the layer rebuilt in ``wide`` on the same values.

    Args:
        layer: the audited layer (only read).
        values: the call's arguments, keyword arguments and outputs as NumPy.
        compute_dtype: the layer's compute dtype (the error allowed).
        wide: the reference dtype.
        dtype: what the inputs are cast to.

    Returns:
        The first wrong number left (``None``: the numbers hold), the dtypes the copy received
        and those it returned.

    Raises:
        Exception: what Keras raised making, building or calling the copy or the reference.
    """
    import keras

    args, kwargs, _ = values
    refs = _numpy_leaves(_reference_call(layer, args, kwargs, wide))

    def cast(x: Any) -> Any:
        if isinstance(x, np.ndarray) and dtypes.family(x.dtype.name) in ("int", "uint", "float"):
            return keras.ops.cast(x, dtype)
        return x

    args = keras.tree.map_structure(cast, args)
    copy = type(layer).from_config(layer.get_config())
    copy(*args, **kwargs)
    copy.set_weights(layer.get_weights())
    outs = _numpy_leaves(copy(*args, **kwargs))
    received = tuple(dtypes.describe(x) for x in keras.tree.flatten(args) if hasattr(x, "dtype"))
    for i, (out, ref) in enumerate(zip(outs, refs)):
        found = check_values(
            out.astype(np.float64),
            dtypes.describe(out),
            np.asarray(ref).astype(np.float64),
            wide,
            limit=error_limit(compute_dtype),
            output=i,
        )
        if found is not None:
            return found, received, tuple(dtypes.describe(o) for o in outs)
    return None, received, tuple(dtypes.describe(o) for o in outs)


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

    return [numpy_values(x) for x in keras.tree.flatten(structure) if hasattr(x, "shape")]
