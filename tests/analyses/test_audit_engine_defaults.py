"""Issue 23.7: ``check_model(engine=...)`` asks the older release about the layer its users
build: the arguments the user did not set (this release's defaults, an explicit
``dtype="float32"`` among them) are left out of the config sent there, so the older release
fills in its own defaults. On a real engine, Keras 3.11.3 (tests/conftest.py)."""

import json

import keras
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer.analyses.audit._engine import user_set_only

BOUNDARIES = [0.5, 1.5]


def _discretization_model():
    inputs = keras.Input((3,))
    return keras.Model(inputs, keras.layers.Discretization(bin_boundaries=BOUNDARIES)(inputs))


def _layer(report, cls):
    return next(call for call in report.layers if call.layer_class == cls)


def test_the_older_release_builds_the_layer_with_its_own_defaults(keras_3_11_engine):
    """The old code sent 3.15.1's explicit ``dtype="float32"``: Keras 3.11.3 then answered
    float32, while its users' Discretization (no dtype) answers int64."""
    x = np.array([[0.1, 1.0, 2.0]], "float32")
    own = dx.probe(
        "Discretization",
        "float32",
        backend=keras.backend.backend(),
        kwargs={"bin_boundaries": BOUNDARIES},
        engine=keras_3_11_engine.spec,
    )
    assert own.ok and own.versions["keras"] == "3.11.3"
    report = dx.check_model(_discretization_model(), x, engine=keras_3_11_engine.spec)
    assert report.keras == "3.11.3"
    call = _layer(report, "Discretization")
    assert call.outputs[0].dtype == own.output_dtype == "int64"


def test_a_layer_given_no_dtype_takes_the_global_policy_there(keras_3_11_engine):
    """Without an explicit dtype, the rebuilt layer takes the global policy the user's layer
    was built under (sent along), not the engine worker's float32 (the old code passed this
    too: it sent every dtype explicitly)."""
    saved = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = keras.Input((3,))
        model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    finally:
        keras.config.set_dtype_policy(saved)
    report = dx.check_model(model, np.ones((1, 3), "float32"), engine=keras_3_11_engine.spec)
    dense = _layer(report, "Dense")
    assert (dense.policy, dense.outputs[0].dtype) == ("mixed_float16", "float16")
    assert keras.config.dtype_policy().name == saved.name


def test_only_arguments_the_user_set_are_sent():
    inputs = keras.Input((3,))
    out = keras.layers.Dense(2, use_bias=False, dtype="float64", name="d")(inputs)
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(keras.Model(inputs, out))))
    sent = user_set_only(config)
    dense = next(layer for layer in sent["config"]["layers"] if layer["class_name"] == "Dense")
    assert set(dense["config"]) == {"name", "units", "use_bias", "dtype"}
    assert dense["config"]["dtype"]["config"]["name"] == "float64"
    inputs_layer = sent["config"]["layers"][0]
    assert inputs_layer == config["config"]["layers"][0]  # the input signature kept whole


@pytest.mark.parametrize("cls", ["Dropout", "GaussianNoise"])
def test_leaving_defaults_out_draws_nothing_from_pythons_stream(cls):
    import random

    inputs = keras.Input((3,))
    out = getattr(keras.layers, cls)(0.1)(inputs)
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(keras.Model(inputs, out))))
    state = random.getstate()
    user_set_only(config)
    assert random.getstate() == state


def test_an_argument_the_user_gave_is_sent_even_at_this_releases_default():
    """``Discretization(dtype="float32")`` and ``Discretization()`` write the same config in
    3.15; what the user passed tells them apart (3.11.3 answers float32 for the first, int64
    for the second)."""
    from dtype_explorer.keras_run import arguments_given

    inputs = keras.Input((3,))
    x = keras.layers.Discretization(BOUNDARIES, dtype="float32", name="given")(inputs)
    out = keras.layers.Discretization(BOUNDARIES, name="left")(x)
    model = keras.Model(inputs, out)
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
    sent = user_set_only(config, arguments_given(model))
    by_name = {layer["config"]["name"]: layer["config"] for layer in sent["config"]["layers"]}
    assert set(by_name["given"]) == {"name", "bin_boundaries", "dtype"}
    assert set(by_name["left"]) == {"name", "bin_boundaries"}
