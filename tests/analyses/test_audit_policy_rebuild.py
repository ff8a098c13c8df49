"""``check_model(model, policy=...)`` on models with Keras operations as graph nodes (issue 39
item 15), beside raw Keras: the same model built by hand under the policy (global policy set,
weights copied in) has the dtypes the audit reports, layer by layer. A residual written
``h + a`` is an ``Add`` operation and ``x[:, 0]`` a ``GetItem``: no layers, no dtype argument;
the rebuild must not hand them one. Where Keras cannot rebuild a model, it is audited as
built and the report says what was not changed."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import layers

from dtype_explorer.analyses.audit import check_model

POLICY = "mixed_bfloat16"


def _residual_model():
    """A transformer-like block: Dense, a residual ``h + a``, the first token ``x[:, 0]``."""
    inputs = keras.Input((4, 6), name="tokens")
    h = layers.Dense(6, name="proj")(inputs)
    a = layers.Dense(6, name="attn")(h)
    r = layers.LayerNormalization(name="norm")(h + a)
    first = r[:, 0]
    return keras.Model(inputs, layers.Dense(2, name="head")(first), name="block")


def _raw_under(build, policy, weights):
    """Raw Keras: the model built with ``policy`` as the global policy, its weights set."""
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = build()
    finally:
        keras.config.set_dtype_policy(before)
    model.set_weights(weights)
    return model


def _raw_layer_dtypes(model, x):
    """Each layer's compute dtype and output dtype, from raw Keras's own graph."""
    found = {}
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        probe = keras.Model(model.inputs, layer.output)
        out = probe(x)
        found[layer.name] = (layer.compute_dtype, keras.backend.standardize_dtype(out.dtype))
    return found


def test_a_model_with_add_and_getitem_nodes_is_audited_under_the_policy():
    model = _residual_model()
    x = np.random.default_rng(0).normal(size=(2, 4, 6)).astype("float32")
    raw = _raw_under(_residual_model, POLICY, model.get_weights())
    report = check_model(model, x, policy=POLICY)
    assert report.policy_override == POLICY
    audited = {c.path.rsplit("/", 1)[-1]: c for c in report.layers if c.depth > 0}
    for name, (compute, output) in _raw_layer_dtypes(raw, x).items():
        assert audited[name].compute_dtype == compute, name
        assert audited[name].outputs[0].dtype == output, name
    final = keras.backend.standardize_dtype(raw(x).dtype)
    assert next(c for c in report.layers if c.final_output).outputs[0].dtype == final
    assert not [n for n in report.notes if "not applied" in n]
    assert model.get_layer("proj").dtype_policy.name == "float32"  # the model is unchanged


def test_the_rebuild_under_the_policy_computes_what_raw_keras_computes():
    from dtype_explorer.keras_run import policy_clone

    model = _residual_model()
    x = np.random.default_rng(1).normal(size=(2, 4, 6)).astype("float32")
    raw = _raw_under(_residual_model, POLICY, model.get_weights())
    clone = policy_clone(model, POLICY)
    mine = keras.ops.convert_to_numpy(keras.ops.cast(clone(x), "float32"))
    theirs = keras.ops.convert_to_numpy(keras.ops.cast(raw(x), "float32"))
    assert np.array_equal(mine, theirs)


class _Opaque(keras.Model):
    """A subclassed model Keras can neither clone nor make again from its config."""

    def __init__(self, table, **kwargs):
        super().__init__(**kwargs)
        self.table = table  # not serializable: get_config cannot carry it
        self.dense = layers.Dense(2, name="dense")

    def call(self, x):
        return self.dense(x)


def test_a_model_keras_cannot_rebuild_is_audited_as_built_and_says_so():
    model = _Opaque(table=object())
    x = np.ones((2, 3), "float32")
    raw = keras.backend.standardize_dtype(model(x).dtype)  # raw Keras: as built
    with pytest.raises((TypeError, NotImplementedError)):  # raw Keras cannot remake it
        type(model).from_config(model.get_config())
    report = check_model(model, x, policy=POLICY)
    assert report.policy_override is None
    [note] = [n for n in report.notes if "not applied" in n]
    assert POLICY in note and "audited as built" in note
    assert next(c for c in report.layers if c.final_output).outputs[0].dtype == raw


class _Reloadable(keras.Model):
    """A subclassed model with a config: Keras makes it again from it (as loading does)."""

    def __init__(self, units=2, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.dense = layers.Dense(units, name="dense")

    def call(self, x):
        return self.dense(x)

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def test_a_subclassed_model_is_made_again_under_the_policy_as_raw_keras_does():
    x = np.ones((2, 3), "float32")
    model = _Reloadable()
    model(x)
    raw = _raw_under(_Reloadable, POLICY, [])
    raw(x)
    raw.set_weights(model.get_weights())
    report = check_model(model, x, policy=POLICY)
    assert report.policy_override == POLICY
    [dense] = [c for c in report.layers if c.path.endswith("/dense")]
    assert dense.compute_dtype == raw.dense.compute_dtype
    assert dense.outputs[0].dtype == keras.backend.standardize_dtype(raw(x).dtype)
    assert any("made again from its config" in n for n in report.notes)


def test_a_tiny_bert_backbone_is_audited_under_the_policy():
    import keras_hub  # a test dependency: missing, the test fails

    config = dict(
        vocabulary_size=30,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=8,
    )
    model = keras_hub.models.BertBackbone(**config)
    x = {
        "token_ids": np.array([[1, 2, 3, 0]], "int32"),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.array([[1, 1, 1, 0]], "int32"),
    }
    raw = keras_hub.models.BertBackbone(**config, dtype=POLICY)
    raw.set_weights(model.get_weights())
    expected = {k: keras.backend.standardize_dtype(v.dtype) for k, v in raw(x).items()}
    report = check_model(model, x, policy=POLICY)
    assert report.policy_override == POLICY
    finals = sorted(c.outputs[0].dtype for c in report.layers if c.final_output)
    assert set(finals) == set(expected.values())
    assert not [n for n in report.notes if "not applied" in n]


def _compiled_classifier():
    inputs = keras.Input((784,))
    x = layers.Dense(64, activation="relu", name="hidden")(inputs)
    x = layers.BatchNormalization(name="norm")(x)
    outputs = layers.Dense(10, activation="softmax", name="head")(x)
    model = keras.Model(inputs, outputs, name="clf")
    model.compile(loss="sparse_categorical_crossentropy", optimizer="rmsprop")
    return model


def test_under_mixed_float16_both_modes_audit_the_policy_and_loss_scale_raw_keras_gives():
    """policy= is "as if built under it": raw Keras's model built under mixed_float16 has
    that policy itself, and its compile() wraps RMSprop in a LossScaleOptimizer. The call
    audit (on the policy's clone) said the model was float32 with no loss scaling, while the
    fit audit said mixed_float16 with loss scaling on."""
    model = _compiled_classifier()
    x = np.ones((2, 784), "float32")
    raw = _raw_under(_compiled_classifier, "mixed_float16", model.get_weights())
    assert raw.dtype_policy.name == "mixed_float16"
    assert isinstance(raw.optimizer, keras.optimizers.LossScaleOptimizer)
    for mode in ("call", "fit"):
        report = check_model(model, x, policy="mixed_float16", mode=mode)
        [root] = [c for c in report.layers if c.depth == 0]
        assert root.policy == raw.dtype_policy.name, mode
        assert not report.by_kind("no-loss-scaling"), mode
    assert report.fit.loss_scaling and report.fit.optimizer == "LossScaleOptimizer(RMSprop)"
    assert model.dtype_policy.name == "float32"  # the user's model is unchanged
    assert type(model.optimizer) is keras.optimizers.RMSprop
    assert keras.config.dtype_policy().name == "float32"


def test_a_model_with_an_adapted_vocabulary_is_rebuilt_with_it():
    # a clone's lookup tables are empty (the vocabulary is an asset: neither config nor
    # weights): the rebuilt copy's StringLookup raised "Table not initialized", shown as a
    # call-error of the user's model
    import tensorflow as tf  # this session's backend (conftest)

    text = tf.constant([["this is an example"], ["another example"]])

    def made() -> keras.Model:
        vectorize = keras.layers.TextVectorization(
            max_tokens=10, output_mode="int", output_sequence_length=6, name="vec"
        )
        vectorize.adapt(text)
        inputs = keras.Input(shape=(1,), dtype="string")
        hidden = keras.layers.Embedding(10, 4, name="emb")(vectorize(inputs))
        pooled = keras.layers.GlobalAveragePooling1D()(hidden)
        return keras.Model(inputs, keras.layers.Dense(1, name="head")(pooled), name="m")

    report = check_model(made(), text, policy="mixed_float16")
    assert not report.by_kind("call-error"), [f.message for f in report.findings]
    keras.config.set_dtype_policy("mixed_float16")
    try:
        raw = made()  # raw Keras: the same model built under the policy
    finally:
        keras.config.set_dtype_policy("float32")
    ids = keras.ops.convert_to_numpy(raw.get_layer("vec")(text))
    assert ids.max() > 1  # the vocabulary read, not all out-of-vocabulary
    rows = {c.path: c.outputs[0].dtype for c in report.layers}
    assert rows["m/vec"] == keras.backend.standardize_dtype(ids.dtype)
    assert rows["m/head"] == keras.backend.standardize_dtype(raw(text).dtype) == "float16"
