"""Bare Keras on the instances ``test_instances.py`` probes, run in a backend's worker
(``pool.call``): each builds the same object with the same weights and calls it by hand.
Nothing of dtype_explorer is used: this is the floor the probes are checked against."""

from __future__ import annotations

import numpy as np


def _dtype(x) -> str:
    import keras

    return keras.backend.standardize_dtype(x.dtype)


def _numbers(x) -> list[float]:
    import keras

    return np.asarray(keras.ops.convert_to_numpy(x), dtype="float64").ravel().tolist()


def quantized_dense(x: np.ndarray) -> dict:
    import keras

    layer = keras.layers.Dense(4, dtype="bfloat16")
    layer.build((None, 8))
    layer.quantize("int8")
    return {"output": _dtype(layer(x)), "kernel": _dtype(layer._kernel)}


def float64_dense(x: np.ndarray) -> dict:
    import keras

    layer = keras.layers.Dense(3, dtype="float64")
    return {"output": _dtype(layer(x)), "kernel": _dtype(layer.kernel)}


def trained_dense(x: np.ndarray, weights: list[np.ndarray]) -> dict:
    import keras

    layer = keras.layers.Dense(3)
    layer.build((None, x.shape[-1]))
    layer.set_weights(weights)
    out = layer(x)
    return {"output": _dtype(out), "numbers": _numbers(out)}


def text_vectorization(corpus: list[str], texts: list[str]) -> dict:
    import keras

    layer = keras.layers.TextVectorization()
    layer.adapt(corpus)
    out = layer(texts)
    return {"output": _dtype(out), "numbers": _numbers(out)}


def mean_iou() -> dict:
    import keras

    metric = keras.metrics.MeanIoU(num_classes=2)
    return {"variable": _dtype(metric.variables[0]), "dtype": metric.dtype}


def functional_model(x: np.ndarray, weights: list[np.ndarray]) -> dict:
    out = model()
    out.set_weights(weights)
    y = out(x)
    return {"output": _dtype(y), "numbers": _numbers(y)}


def model():
    """A small functional model: a mixed_bfloat16 Dense, then a float32 head."""
    import keras

    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, dtype="mixed_bfloat16")(inputs)
    return keras.Model(inputs, keras.layers.Dense(2, dtype="float32")(hidden))


def registered() -> list[str]:
    """The names registered globally in this worker's Keras (``get_custom_objects``)."""
    import keras

    return sorted(keras.saving.get_custom_objects())
