"""Issue 39, item 10: ``mode="fit"`` on an int8-quantized layer with LoRA enabled. The model the
fit step wraps around the layer is made under the policy the layer quantizes (float32), never
the layer's own ``int8_from_float32`` (a functional model under it looks for its own
``_int8_call``). Compared with raw Keras: the gradients' dtypes a raw ``GradientTape`` gives
(tensorflow, this process)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import dtype_explorer as dx

pytestmark = pytest.mark.timeout(600)


def test_fit_of_a_quantized_lora_layer_trains_as_raw_keras_does():
    inp = keras.Input((8,))
    model = keras.Model(inp, keras.layers.Dense(4)(inp))
    model.quantize("int8")
    layer = model.layers[1]
    layer.enable_lora(2)
    assert layer.dtype_policy.name == "int8_from_float32"

    got = dx.probe(layer, "float32", shape=(2, 8), mode="fit")
    assert got.ok, got.error

    x = np.ones((2, 8), "float32")
    with tf.GradientTape() as tape:
        loss = keras.ops.mean(keras.ops.square(layer(x)))
    raw = tape.gradient(loss, layer.trainable_variables)
    assert all(g is not None for g in raw)
    raw_dtypes = sorted(keras.backend.standardize_dtype(g.dtype) for g in raw)
    assert sorted(g.dtype for g in got.fit.gradients) == raw_dtypes
    assert np.isfinite(got.fit.loss_value)
    assert layer.quantization_mode == "int8" and layer.lora_enabled  # the user's layer as it was
