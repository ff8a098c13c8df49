"""An audit under a policy builds the model's clone once per policy and reuses it while the
model's config and weights' layout stay the same (issue 44), the model's current weights
copied in: its outputs are those of a clone raw Keras builds afresh beside it."""

import json

import keras
import numpy as np

from dtype_explorer.keras_run import policy_clone

POLICY = "mixed_bfloat16"


def _fresh_clone(model):
    """Raw Keras: the model cloned with every layer under POLICY, its weights copied."""

    def under(layer):
        return type(layer).from_config({**layer.get_config(), "dtype": POLICY})

    clone = keras.models.clone_model(model, clone_function=under)
    clone.set_weights(model.get_weights())
    return clone


def _model():
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(4)(h))


def test_the_clone_is_reused_with_the_models_current_weights():
    model = _model()
    x = np.random.default_rng(0).uniform(-3, 3, (2, 8)).astype("float32")
    first = policy_clone(model, POLICY)
    assert policy_clone(model, POLICY) is first
    kernel = model.layers[1].kernel
    kernel.assign(keras.ops.convert_to_numpy(kernel) * 2.0 + 1.0)  # the user trains on
    again = policy_clone(model, POLICY)
    assert again is first
    mine = keras.ops.convert_to_numpy(again(x)).astype("float32")
    raw = keras.ops.convert_to_numpy(_fresh_clone(model)(x)).astype("float32")
    assert np.array_equal(mine, raw)
    assert [layer.dtype_policy.name for layer in again.layers[1:]] == [POLICY, POLICY]
    assert model.layers[1].dtype_policy.name == "float32"  # the model is never changed
    assert policy_clone(model, "mixed_float16") is not first  # one clone per policy


def test_a_model_whose_layout_changed_is_cloned_again():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    first = policy_clone(model, POLICY)
    model.add(keras.layers.Dense(3))
    again = policy_clone(model, POLICY)
    assert again is not first and len(again.layers) == len(model.layers) == 2
    x = np.ones((2, 8), "float32")
    raw = keras.ops.convert_to_numpy(_fresh_clone(model)(x)).astype("float32")
    assert np.array_equal(keras.ops.convert_to_numpy(again(x)).astype("float32"), raw)


def test_the_clones_own_float32_copy_is_reused_and_follows_its_weights():
    """The float32 reference of a clone (the tool's own copy, its config not written out
    again) is reused, holds the clone's current weights, and answers as raw Keras's float32
    model does; the audit's question still carries the clone's config as Keras writes it."""
    import dtype_explorer as dx

    model = _model()
    x = np.random.default_rng(1).uniform(-3, 3, (2, 8)).astype("float32")
    clone = policy_clone(model, POLICY)
    reference = policy_clone(clone, "float32")
    assert policy_clone(clone, "float32") is reference
    kernel = model.layers[1].kernel
    kernel.assign(keras.ops.convert_to_numpy(kernel) - 0.5)
    assert policy_clone(policy_clone(model, POLICY), "float32") is reference
    raw = keras.ops.convert_to_numpy(model(x))  # the model is float32 in every layer
    assert np.array_equal(keras.ops.convert_to_numpy(reference(x)), raw)
    for _ in range(2):  # the second audit reads the config written by the first
        question = dx.check_model(model, x, policy=POLICY).question
        written = json.loads(json.dumps(keras.saving.serialize_keras_object(clone)))
        assert question.config == written
