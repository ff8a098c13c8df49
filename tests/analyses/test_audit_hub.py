"""keras-hub models audited from tiny configs with random weights (no download): a GPT-2
backbone under mixed_float16 (each float16 finding traced to its op and line), and one real
fit step of a GPT-2 causal LM copied by Keras (clone_model, else a .keras round trip). keras-hub
is the ``hub`` extra: without it these tests fail, they do not skip."""

from __future__ import annotations

import os
import tempfile

import keras
import numpy as np
import pytest
from tiny_hub import tiny_gpt2

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


def test_gpt2_backbone_under_mixed_float16_names_each_float16_op_and_line(hub):
    backbone = tiny_gpt2("mixed_float16")
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
    backbone = tiny_gpt2()
    report = check_model(backbone, SAMPLE, quantize="int8", mode="save")
    quantized = [r for r in report.quantization.layers if r.status == "quantized"]
    assert quantized and report.quantization.bytes < report.quantization.float_bytes
    keras_trip = next(t for t in report.roundtrip.trips if t.format == ".keras")
    assert keras_trip.outcome == "compared", keras_trip.text()
    assert keras_trip.dtype_changes == () and keras_trip.max_abs_difference == 0.0


def test_fit_on_a_tiny_gpt2_causal_lm(hub):
    lm = hub.models.GPT2CausalLM(backbone=tiny_gpt2(), preprocessor=None)
    before = [w.copy() for w in lm.get_weights()]
    report = check_model(lm, SAMPLE, mode="fit", labels=np.zeros((2, 8), "int32"))
    assert report.fit is not None and report.fit.gradients
    assert all(a.tobytes() == b.tobytes() for a, b in zip(before, lm.get_weights()))


def raw_preset_load(hub, model, **kwargs):
    """Raw keras-hub: ``save_to_preset`` then ``from_preset``; the loaded model or the error."""
    with tempfile.TemporaryDirectory() as tmp:
        model.save_to_preset(os.path.join(tmp, "p"))
        try:
            return type(model).from_preset(os.path.join(tmp, "p"), **kwargs)
        except Exception as error:
            return error


def test_a_quantized_backbone_reloads_from_keras_format_but_its_preset_is_an_error(hub):
    backbone = tiny_gpt2()
    report = check_model(backbone, SAMPLE, quantize="int8", mode="save")
    trips = {t.format: t for t in report.roundtrip.trips}
    assert trips[".keras"].outcome == "compared" and not trips[".keras"].dtype_changes
    assert {"preset", "preset, dtype=float32"} <= set(trips)
    # raw keras-hub 0.32.0 on the same quantized backbone: from_preset raises
    quantized = tiny_gpt2()
    quantized.quantize("int8")
    raw = raw_preset_load(hub, quantized)
    assert isinstance(raw, Exception)
    for fmt in ("preset", "preset, dtype=float32"):
        trip = trips[fmt]
        assert (trip.outcome, trip.stage, trip.error.type) == ("raised", "load", type(raw).__name__)
        assert trip.error.message[:80] == str(raw)[:80]
    errors = {f.details["format"]: f for f in report.by_kind("roundtrip-error")}
    assert {"preset", "preset, dtype=float32"} <= set(errors)
    assert "could not be loaded" in errors["preset"].message
    assert "model.keras" in errors["preset"].fix  # the format that did bring it back


def test_a_bfloat16_preset_loads_float32_without_dtype_and_bfloat16_with_it(hub):
    backbone = tiny_gpt2("bfloat16")
    report = check_model(backbone, SAMPLE, mode="save")
    trips = {t.format: t for t in report.roundtrip.trips}
    # raw keras-hub: as saved only with dtype=; else Keras's global policy
    plain = raw_preset_load(hub, backbone)
    given = raw_preset_load(hub, backbone, dtype="bfloat16")
    assert trips["preset"].loaded_output_dtypes == (
        keras.backend.standardize_dtype(plain(SAMPLE).dtype),
    )
    assert trips["preset"].output_dtypes == ("bfloat16",) != trips["preset"].loaded_output_dtypes
    assert any(plain.dtype_policy.name in c for c in trips["preset"].dtype_changes)
    with_dtype = trips["preset, dtype=bfloat16"]
    assert with_dtype.outcome == "compared" and with_dtype.dtype_changes == ()
    assert with_dtype.loaded_output_dtypes == (
        keras.backend.standardize_dtype(given(SAMPLE).dtype),
    )
    found = [f for f in report.by_kind("roundtrip-dtype") if f.details["format"] == "preset"]
    policy = next(f for f in found if "policy" in f.message)
    policies = [c for c in trips["preset"].dtype_changes if ": policy " in c]
    assert len(policy.details["layers"]) == len(policies) > 10  # one finding for all of them
    assert "dtype=" in policy.fix
    assert not [f for f in report.findings if f.details.get("format") == "preset, dtype=bfloat16"]
