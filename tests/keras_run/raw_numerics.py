"""Bare Keras for ``test_numerics_explained.py``, run in a backend's worker (``pool.call``):
each computes by hand what a probe measures, in the probed dtype and in the wide reference
dtype. Nothing of dtype_explorer is used: this is the floor the findings are checked against."""

from __future__ import annotations

import numpy as np


def _numbers(x) -> list[float]:
    import keras

    return np.asarray(keras.ops.convert_to_numpy(x), dtype="float64").ravel().tolist()


def binary_crossentropy(y_true: list, y_pred: list, dtype: str, wide: str) -> dict:
    """``BinaryCrossentropy(dtype=dtype)`` on the values in ``dtype``, and in ``wide``."""
    import keras

    def loss(d: str) -> list[float]:
        bce = keras.losses.BinaryCrossentropy(dtype=d)
        return _numbers(bce(np.asarray(y_true, d), np.asarray(y_pred, d)))

    return {"value": loss(dtype), "reference": loss(wide)}


def gru_cell(floatx: str, batch: int, features: int, units: int) -> dict:
    """``GRUCell(units)`` built under ``floatx``, called as Keras's ``RNN`` calls a cell: on
    ``(batch, features)`` float32 inputs and its zero states (``get_initial_state``).

    Run it in a fresh process, as the user's script runs (``tests.on_backend.json_on``): Keras
    fixes its global dtype policy from floatx the first time any layer is made
    (``keras.src.dtype_policies.dtype_policy``), so in a process that has made a layer before,
    ``set_floatx`` no longer reaches a new layer."""
    import keras

    keras.config.set_floatx(floatx)
    cell = keras.layers.GRUCell(units)
    x = np.linspace(-1, 1, batch * features, dtype="float32").reshape(batch, features)
    states = [np.zeros((batch, units), "float32")]
    try:
        out, _ = cell(x, states)
    except Exception as error:
        return {"raises": type(error).__name__}
    return {"output": keras.backend.standardize_dtype(out.dtype)}


def rms_normalization(x: np.ndarray, wide: str) -> dict:
    """``ops.rms_normalization`` and ``RMSNormalization()`` on ``x`` as given, and on ``x`` in
    ``wide`` (the layer built under the ``wide`` policy)."""
    import keras

    layer, reference = keras.layers.RMSNormalization(), keras.layers.RMSNormalization(dtype=wide)
    op, op_wide = keras.ops.rms_normalization(x), keras.ops.rms_normalization(x.astype(wide))
    return {
        "op": {"dtype": keras.backend.standardize_dtype(op.dtype), "value": _numbers(op)},
        "op_reference": _numbers(op_wide),
        "layer": {
            "dtype": keras.backend.standardize_dtype(layer(x).dtype),
            "value": _numbers(layer(x)),
        },
        "layer_reference": _numbers(reference(x.astype(wide))),
    }
