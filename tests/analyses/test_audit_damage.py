"""Issue 38, item 2: damage per layer against the same model in float32, checked against the
float32 and the mixed model run directly by the test (raw Keras, untraced)."""

import numpy as np
import pytest

import dtype_explorer as dx

keras = pytest.importorskip("keras")


def _mlp(policy: str):
    inputs = keras.Input((8,), name="x")
    x = keras.layers.Dense(16, activation="relu", dtype=policy, name="d1")(inputs)
    x = keras.layers.Dense(16, activation="tanh", dtype=policy, name="d2")(x)
    outputs = keras.layers.Dense(4, dtype=policy, name="d3")(x)
    return keras.Model(inputs, outputs, name="mlp")


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_each_layers_error_is_the_one_raw_keras_gives(policy):
    mixed = _mlp(policy)
    sample = np.random.default_rng(0).normal(size=(4, 8)).astype("float32") * 3
    report = dx.check_model(mixed, sample)
    # raw Keras: the same weights in a float32 model, each layer's output read directly
    wide = _mlp("float32")
    wide.set_weights(mixed.get_weights())
    got = {d.path: d for d in report.damage}
    assert set(got) == {"mlp/d1", "mlp/d2", "mlp/d3"}
    for name in ("d1", "d2", "d3"):
        out = keras.Model(mixed.inputs, mixed.get_layer(name).output)(sample)
        ref = keras.Model(wide.inputs, wide.get_layer(name).output)(sample)
        out = keras.ops.convert_to_numpy(out).astype(np.float64)
        ref = keras.ops.convert_to_numpy(ref).astype(np.float64)
        rel = np.sqrt(np.mean((out - ref) ** 2)) / np.sqrt(np.mean(ref**2))
        d = got[f"mlp/{name}"]
        assert d.dtype == policy.removeprefix("mixed_") and d.reference == "float32"
        assert d.rel_rms == pytest.approx(rel, rel=1e-6)
        assert d.max_abs_error == pytest.approx(np.max(np.abs(out - ref)), rel=1e-6)
        assert d.amax == pytest.approx(np.max(np.abs(out)))
        big = float(np.finfo(np.float16).max) if policy == "mixed_float16" else 3.3895e38
        assert d.top_bits == pytest.approx(np.log2(big / np.max(np.abs(out))), rel=1e-3)
        assert d.rel_rms > 0  # a 16-bit model is not exact
    ranked, _ = report.precision_goes()
    assert ranked[0].rel_rms == max(d.rel_rms for d in report.damage)
    text = str(report)
    assert "Where precision goes" in text and "mlp/d1" in text
    assert "error vs float32" in report._repr_html_()


def test_a_float32_model_runs_no_reference():
    model = _mlp("float32")
    report = dx.check_model(model, np.ones((2, 8), "float32"))
    assert report.damage == () and "Where precision goes" not in str(report)
