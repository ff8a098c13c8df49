"""A user's instance (layer, model, metric) is probed as it is: its policy, quantization,
weights and adapted state, on every backend (it travels to the workers as a ``.keras``
archive), each answer checked against bare Keras run in that backend's worker
(``raw_instances.py``); the user's object is left bitwise unchanged; and every answer lists
what the tool supplied (``ProbeResult.supplied``)."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
import raw_instances as raw
from swept import SWEPT

import dtype_explorer as dx
from dtype_explorer import pool

BACKENDS = list(SWEPT)
X8 = np.linspace(-1, 1, 16, dtype="float32").reshape(2, 8)


def _raw(backend: str, function, *args):
    return pool.call(backend, function, *args, timeout=120).result()


def _quantized_dense():
    layer = keras.layers.Dense(4, dtype="bfloat16")
    layer.build((None, 8))
    layer.quantize("int8")
    return layer


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_quantized_bfloat16_dense_is_answered_as_raw_keras(backend):
    """The old code rebuilt ``Dense.from_config(config without dtype)``: a float32 kernel and
    a float32 output. Keras keeps the int8 kernel and returns bfloat16."""
    r = dx.probe(_quantized_dense(), "float32", shape=(2, 8), backend=backend)
    want = _raw(backend, raw.quantized_dense, X8)
    assert r.ok, r.error
    assert (r.output_dtype, r.variables["kernel"].stored) == (want["output"], want["kernel"])
    assert (r.output_dtype, r.variables["kernel"].stored) == ("bfloat16", "int8")
    assert r.spec.policy == "int8_from_bfloat16"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_adapted_text_vectorization_keeps_its_vocabulary(backend):
    """The old code sent the config alone: the vocabulary was lost and the call raised
    "Table not initialized"."""
    corpus, texts = ["a b c", "b c d", "c d"], ["a b", "d c"]
    layer = keras.layers.TextVectorization()
    layer.adapt(corpus)
    r = dx.probe(layer, values=[np.array(texts)], backend=backend)
    want = _raw(backend, raw.text_vectorization, corpus, texts)
    assert r.ok, r.error
    assert r.output_dtype == want["output"]
    head = r.numerics.outputs[0].head
    assert list(head[: len(want["numbers"])]) == want["numbers"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float64_dense_instance_is_answered_as_float64(backend):
    """The old code dropped the instance's dtype: a float32 layer (float32 kernel), with no
    note. (On numpy Keras's own output is float32 here: the raw call says so too.)"""
    r = dx.probe(keras.layers.Dense(3, dtype="float64"), "float32", shape=(2, 8), backend=backend)
    want = _raw(backend, raw.float64_dense, X8)
    assert r.ok, r.error
    assert r.output_dtype == want["output"]
    assert r.variables["kernel"].stored == want["kernel"] == "float64"
    assert r.spec.policy == "float64" and "policy" not in {s.part for s in r.supplied}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_trained_layers_weights_are_the_ones_used(backend):
    """The old code built a fresh layer from the config: new random weights, other numbers."""
    rng = np.random.default_rng(7)
    weights = [rng.normal(size=(8, 3)).astype("float32"), rng.normal(size=3).astype("float32")]
    layer = keras.layers.Dense(3)
    layer.build((None, 8))
    layer.set_weights(weights)
    r = dx.probe(layer, values=[X8], backend=backend)
    want = _raw(backend, raw.trained_dense, X8, weights)
    assert r.ok, r.error
    np.testing.assert_allclose(r.numerics.outputs[0].head, want["numbers"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", [None, *BACKENDS])
def test_a_metric_instance_is_probed_with_its_own_dtype(backend):
    """The old code refused a metric instance ("target must be a layer name ..."); as a
    catalog name it is built with dtype=<policy>: a float32 confusion matrix. The instance
    was made here, where Keras gives MeanIoU its default (int64 on tensorflow, int32
    elsewhere: ``raw.mean_iou`` in process); every backend answers for that object."""
    metric = keras.metrics.MeanIoU(num_classes=2)
    metric.update_state([0, 1], [1, 1])
    r = dx.probe(metric, backend=backend)
    here = raw.mean_iou()  # bare Keras on this process's backend: the user's object's dtype
    assert r.ok, r.error
    assert r.variables["total_confusion_matrix"].stored == here["variable"]
    assert r.spec.policy == here["dtype"] == metric.dtype
    assert metric.variables[0].numpy().tolist() == [[0, 1], [0, 1]]  # its state untouched


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_functional_model_instance_is_probed_with_its_weights_and_policies(backend):
    """The old code rebuilt the model from its config: fresh weights, other numbers."""
    model = raw.model()
    x = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    r = dx.probe(model, values=[x], backend=backend)
    want = _raw(backend, raw.functional_model, x, model.get_weights())
    assert r.ok, r.error
    assert r.output_dtype == want["output"]
    np.testing.assert_allclose(r.numerics.outputs[0].head, want["numbers"], rtol=1e-6)


def _fingerprint(obj) -> dict:
    """Everything of an instance a probe could change: every variable's bytes, its policy,
    quantization, built state, config."""
    return {
        "variables": [
            (v.path, str(v.dtype), keras.ops.convert_to_numpy(v.value).tobytes())
            for v in obj.variables
        ],
        "policy": obj.dtype_policy.name,
        "quantization": obj.quantization_mode,
        "built": obj.built,
        "config": json.dumps(obj.get_config(), sort_keys=True, default=str),
        "ids": [id(v) for v in obj.variables],
    }


@pytest.mark.parametrize("backend", [None, "numpy"])
def test_the_users_instance_is_left_bitwise_unchanged(backend):
    """In process the old code called ``from_config`` on the instance's config; the probe now
    works on a copy from its archive, and nothing of the user's object moves."""
    layer = _quantized_dense()
    trained = keras.layers.BatchNormalization()
    trained.build((None, 8))
    trained.moving_mean.assign(np.arange(8, dtype="float32"))
    before = [_fingerprint(layer), _fingerprint(trained)]
    for mode in ("call", "training"):
        assert dx.probe(layer, shape=(2, 8), backend=backend, mode=mode).ok
        assert dx.probe(trained, shape=(2, 8), backend=backend, mode=mode).ok
    assert [_fingerprint(layer), _fingerprint(trained)] == before


def test_a_policy_other_than_the_instances_says_what_the_rebuild_dropped():
    """The old code rebuilt silently: nothing said the weights and quantization were gone."""
    r = dx.probe(_quantized_dense(), policy="float32", shape=(2, 8))
    assert r.ok and r.output_dtype == "float32"
    (note,) = [s for s in r.supplied if s.part == "layer"]
    assert "rebuilt from its config under policy 'float32'" in note.value
    assert "int8 quantization" in note.why and "weights" in note.why


def test_instance_answers_are_never_cached():
    layer = keras.layers.Dense(2)
    assert not dx.probe(layer, backend="numpy").cached
    assert not dx.probe(layer, backend="numpy").cached


def test_an_instance_takes_no_kwargs():
    with pytest.raises(dx.InvalidSpecError, match="probed as it is"):
        dx.probe(keras.layers.Dense(2), kwargs={"units": 3}, backend="numpy")


def test_a_probe_with_every_part_given_lists_nothing_supplied():
    """The old code had no ``supplied``."""
    r = dx.probe(
        "Dense",
        "float32",
        policy="float32",
        kwargs={"units": 4},
        values=[np.ones((2, 3), "float32")],
    )
    assert r.ok and r.supplied == () and r.supplied_text() == ""


def test_a_probe_of_a_name_lists_what_the_tool_supplied():
    r = dx.probe("Dense")
    parts = {s.part: s for s in r.supplied}
    assert set(parts) == {"input dtype", "policy", "shape", "kwargs", "sample"}
    assert parts["kwargs"].value == "units=4" and parts["input dtype"].value == "float32"
    again = dx.ProbeResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert again.supplied == r.supplied
    assert "supplied by dtype-explorer: input dtype: float32" in str(r)


class Scale(keras.layers.Layer):
    """A custom layer with a trained weight: ``x * scale``."""

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(), initializer="ones", name="scale")

    def call(self, x):
        return x * self.scale


def test_a_custom_layer_instance_travels_with_its_class_registered_for_the_load_only():
    """The old code sent the class and config: the trained scale was lost (numbers x * 1)."""
    layer = Scale()
    layer.build((None, 8))
    layer.scale.assign(3.0)
    r = dx.probe(layer, values=[X8], backend="numpy")
    assert r.ok, r.error
    np.testing.assert_allclose(r.numerics.outputs[0].head, (X8 * 3).ravel(), rtol=1e-6)
    assert not any("Scale" in name for name in _raw("numpy", raw.registered))
