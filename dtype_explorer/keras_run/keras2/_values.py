"""Values on Keras 2 (``tf_keras``): the user's own values as the layer's inputs, and the
numerics of a Keras 2 call (wraparound, reference error, inf/NaN), measured as Keras 3's are
(``_numerics.measure``): against the same ``tf_keras`` layer, with the same weights, built
under the ``float64`` policy and called on the inputs in float64. Keras 3 is never imported:
the outputs are read with TensorFlow.

>>> import numpy as np
>>> [(d, a.tolist()) for d, a in arrays([np.array([1, 2], "int8")])]
[('int8', [1.0, 2.0])]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run._numerics import measure
from dtype_explorer.keras_run.catalog import LayerEntry
from dtype_explorer.keras_run.probe import LayerInputs
from dtype_explorer.records import CastStep, Numerics


def arrays(outputs: Any) -> list[tuple[str, np.ndarray]]:
    """Every numeric tensor among ``outputs`` (TensorFlow tensors or NumPy arrays): its dtype
    and its values as float64 (complex: the real part); what ``_numerics._arrays`` does with
    Keras 3, done with ``tf.nest``."""
    import tensorflow as tf

    found = []
    for tensor in tf.nest.flatten(outputs):
        if not hasattr(tensor, "dtype") or not hasattr(tensor, "shape"):
            continue
        dtype = tf.as_dtype(tensor.dtype).name
        if dtype == "string":
            continue
        array = np.asarray(tensor.numpy() if hasattr(tensor, "numpy") else tensor)
        if dtypes.family(dtype) == "complex":
            array = array.real
        found.append((dtype, array.astype(np.float64)))
    return found


def keras2_numerics(
    make: Callable[[], Any] | None,
    layer: Any,
    entry: LayerEntry,
    call: Callable[[Any, list[Any]], Any],
    inputs: LayerInputs,
    steps: list[CastStep],
    outputs: Any,
) -> Numerics:
    """The outputs' values against ``make()`` (the same ``tf_keras`` layer) built under the
    ``float64`` policy, given the probed layer's weights, and called on the inputs widened to
    float64 (index inputs kept); ``make=None`` (a user's model, as it travelled): no reference,
    inf/NaN counted."""
    return measure(
        outputs,
        inputs.leaves,
        steps,
        reference=None
        if make is None
        else lambda wide: _reference(make, layer, call, inputs, wide),
        integer_reference=entry.computes_on_values,
        backend="tensorflow",
        flatten=arrays,
    )


def _reference(
    make: Callable[[], Any],
    layer: Any,
    call: Callable[[Any, list[Any]], Any],
    inputs: LayerInputs,
    wide: str,
) -> Any:
    """The same layer in ``wide``: built under that global policy (put back after), its first
    call on the widened inputs building it, then the probed layer's weights (floats widened)."""
    import tf_keras

    leaves = [_widened(leaf, role, wide) for leaf, role in zip(inputs.leaves, inputs.roles)]
    before = tf_keras.mixed_precision.global_policy()
    try:
        tf_keras.mixed_precision.set_global_policy(wide)
        reference = make()
        call(reference, leaves)
    finally:
        tf_keras.mixed_precision.set_global_policy(before)
    reference.set_weights(
        [w.astype(wide) if np.issubdtype(w.dtype, np.floating) else w for w in layer.get_weights()]
    )
    return call(reference, leaves)


def _widened(leaf: Any, role: str, wide: str) -> Any:
    """A float, or a non-index integer, array in ``wide``; anything else as given."""
    if not isinstance(leaf, np.ndarray):
        return leaf
    kind = dtypes.describe(leaf)
    if dtypes.is_float(kind) or (dtypes.is_integer(kind) and role != "index"):
        return leaf.astype(wide)
    return leaf


def is_variable(weight: Any) -> bool:
    """Whether a weight a ``tf_keras`` layer tracks is a variable (named, with a dtype):
    ``StringLookup``'s and ``IntegerLookup``'s ``VocabWeightHandler`` is not (it only saves
    the vocabulary)."""
    return hasattr(weight, "name") and hasattr(weight, "dtype") and hasattr(weight, "shape")
