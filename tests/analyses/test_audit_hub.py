"""keras-hub models audited from tiny configs with random weights (no download): a GPT-2
backbone under mixed_float16 (each float16 finding traced to its op and line), and one real
fit step of a GPT-2 causal LM copied by Keras (clone_model, else a .keras round trip). keras-hub
is the ``hub`` extra: without it these tests fail, they do not skip."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from dtype_explorer import check_model

try:
    import keras_hub
except ImportError as error:  # the hub extra is part of the test environment
    keras_hub = None
    MISSING = f"keras-hub is needed (pip install 'dtype-explorer[hub]'): {error}"

SAMPLE = {"token_ids": np.arange(16).reshape(2, 8) % 50, "padding_mask": np.ones((2, 8), "int32")}


@pytest.fixture
def hub():
    if keras_hub is None:
        pytest.fail(MISSING)
    return keras_hub


def tiny_gpt2(hub, policy: str | None = None):
    keras.config.set_dtype_policy(policy or "float32")
    try:
        return hub.models.GPT2Backbone(
            vocabulary_size=50,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=16,
        )
    finally:
        keras.config.set_dtype_policy("float32")


def test_gpt2_backbone_under_mixed_float16_names_each_float16_op_and_line(hub):
    backbone = tiny_gpt2(hub, "mixed_float16")
    before = [keras.ops.convert_to_numpy(v.value).tobytes() for v in backbone.variables]
    report = check_model(backbone, SAMPLE)
    assert [keras.ops.convert_to_numpy(v.value).tobytes() for v in backbone.variables] == before
    # raw Keras: the backbone's output dtype, and which of its layers compute in float32
    raw = backbone(SAMPLE)
    assert report.layers[0].outputs[0].dtype == keras.backend.standardize_dtype(raw.dtype)
    float32_layers = {
        layer.path for layer in backbone._flatten_layers() if layer.compute_dtype == "float32"
    }
    audited = {c.path.split("/", 1)[-1] for c in report.layers if c.compute_dtype == "float32"}
    assert audited <= {p.split("/", 1)[-1] for p in float32_layers} | {""}
    halves = report.by_kind("float16-output")
    assert halves and all(f.step is not None and f.step.source is not None for f in halves)
    assert all(f.where() for f in halves)  # the op and its line
    overflows = report.by_kind("overflow")
    assert all(f.step is not None for f in overflows)


def test_gpt2_backbone_int8_round_trips_through_keras_format(hub):
    backbone = tiny_gpt2(hub)
    report = check_model(backbone, SAMPLE, quantize="int8", mode="save")
    quantized = [r for r in report.quantization.layers if r.status == "quantized"]
    assert quantized and report.quantization.bytes < report.quantization.float_bytes
    keras_trip = next(t for t in report.roundtrip.trips if t.format == ".keras")
    assert keras_trip.outcome == "compared", keras_trip.text()
    assert keras_trip.dtype_changes == () and keras_trip.max_abs_difference == 0.0


def test_fit_on_a_tiny_gpt2_causal_lm(hub):
    lm = hub.models.GPT2CausalLM(backbone=tiny_gpt2(hub), preprocessor=None)
    before = [w.copy() for w in lm.get_weights()]
    report = check_model(lm, SAMPLE, mode="fit", labels=np.zeros((2, 8), "int32"))
    assert report.fit is not None and report.fit.gradients
    assert all(a.tobytes() == b.tobytes() for a, b in zip(before, lm.get_weights()))
