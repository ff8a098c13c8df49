"""A copy's weights start at zero, then take the model's (``keras_run.model._zero_start``): the
copies the audit makes are the model, weight for weight and output for output, as raw Keras's
``clone_model`` and ``set_weights`` make it; no layer keeps the start once the copy is made,
and a layer the clone function hands back as it is (shared) is never touched."""

from __future__ import annotations

import keras
import numpy as np
from keras import layers

from dtype_explorer.keras_run import policy_clone, with_dtype
from dtype_explorer.keras_run.model._zero_start import weights_started_at_zero


def _model() -> keras.Model:
    ids = keras.Input((5,), dtype="int32", name="ids")
    x = layers.Embedding(20, 8, name="embed")(ids)
    x = layers.MultiHeadAttention(2, 4, name="attention")(x, x)
    x = layers.BatchNormalization(name="bn")(x)
    return keras.Model(ids, layers.Dense(3, name="out")(layers.Flatten()(x)), name="m")


def _raw_clone(model: keras.Model, policy: str) -> keras.Model:
    copy = keras.models.clone_model(
        model,
        clone_function=lambda la: type(la).from_config({**la.get_config(), "dtype": policy}),
    )
    copy.set_weights(model.get_weights())
    return copy


def test_a_copy_is_the_model_as_raw_keras_clones_it_and_keeps_no_start():
    model = _model()
    ids = np.random.default_rng(0).integers(0, 20, (4, 5)).astype("int32")
    for copy, raw in (
        (policy_clone(model, "mixed_float16"), _raw_clone(model, "mixed_float16")),
        (with_dtype(model, "float32"), _raw_clone(model, "float32")),
    ):
        for got, want in zip(copy.get_weights(), raw.get_weights(), strict=True):
            assert got.dtype == want.dtype and np.array_equal(got, want)
        out, expected = (keras.ops.convert_to_numpy(m(ids, training=False)) for m in (copy, raw))
        assert out.dtype == expected.dtype and np.array_equal(out, expected)
        kept = [la.name for la in copy._flatten_layers() if "add_weight" in vars(la)]
        assert kept == []  # every layer's own add_weight back


def test_a_layer_handed_back_as_it_is_is_never_touched():
    shared = layers.Dense(2, name="shared")
    shared.build((None, 3))
    with weights_started_at_zero(lambda layer: layer) as clone:
        assert clone(shared) is shared
        assert "add_weight" not in vars(shared)
    fresh = layers.Dense(2, name="fresh")
    with weights_started_at_zero(lambda layer: fresh) as clone:
        clone(shared).build((None, 3))
        assert float(np.abs(keras.ops.convert_to_numpy(fresh.kernel)).sum()) == 0.0
    assert "add_weight" not in vars(fresh)
