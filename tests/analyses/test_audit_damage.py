"""Issue 38, item 2: damage per layer against the same model in float32, checked against the
float32 and the mixed model run directly by the test (raw Keras, untraced)."""

import numpy as np
import pytest
from tiny_hub import tiny_gpt2

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
        out, ref, rel = _raw_layer_error(mixed, wide, name, sample)
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


def _raw_layer_error(model, wide, name: str, sample):
    """Raw Keras: layer ``name``'s output in ``model`` and in its float32 twin ``wide`` (as
    float64), and their relative RMS error."""
    out = keras.Model(model.inputs, model.get_layer(name).output)(sample)
    ref = keras.Model(wide.inputs, wide.get_layer(name).output)(sample)
    out = keras.ops.convert_to_numpy(out).astype(np.float64)
    ref = keras.ops.convert_to_numpy(ref).astype(np.float64)
    return out, ref, np.sqrt(np.mean((out - ref) ** 2)) / np.sqrt(np.mean(ref**2))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "float16"])
def test_under_policy_each_layers_error_is_the_one_raw_keras_gives(policy):
    """policy= on a float32 model: under a mixed policy the model itself is the float32
    reference (its clone holds the same float32 weights); under float16 the weights are
    rounded, and the reference is the clone's float32 copy. Either way the error is raw
    Keras's, and the model is left as it was."""
    model = _mlp("float32")
    sample = np.random.default_rng(1).normal(size=(4, 8)).astype("float32") * 3
    weights = [w.copy() for w in model.get_weights()]
    got = {d.path: d for d in dx.check_model(model, sample, policy=policy).damage}
    twin = _mlp(policy)  # raw Keras: the model under the policy, its weights set
    twin.set_weights(weights)
    wide = _mlp("float32")  # the reference: float32, with the weights the twin holds
    wide.set_weights(twin.get_weights())
    assert set(got) == {"mlp/d1", "mlp/d2", "mlp/d3"}
    for name in ("d1", "d2", "d3"):
        _, ref, rel = _raw_layer_error(twin, wide, name, sample)
        assert got[f"mlp/{name}"].rel_rms == pytest.approx(rel, rel=1e-6)
        assert got[f"mlp/{name}"].reference_amax == pytest.approx(np.max(np.abs(ref)))
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), weights, strict=True))
    assert {layer.dtype_policy.name for layer in model.layers[1:]} == {"float32"}


def test_a_float32_model_runs_no_reference():
    model = _mlp("float32")
    report = dx.check_model(model, np.ones((2, 8), "float32"))
    assert report.damage == () and "Where precision goes" not in str(report)


# --------------------------------------------------------------------------- keras-hub


def _leaves(layer, path: str):
    """Every leaf layer below ``layer`` with its path (names joined by '/'), in build order."""
    for child in layer._flatten_layers(include_self=False, recursive=False):
        below = f"{path}/{child.name}"
        if list(child._flatten_layers(include_self=False, recursive=False)):
            yield from _leaves(child, below)
        else:
            yield below, child


def _first_outputs(model, pairs, sample):
    """Raw Keras: ``model`` called once on ``sample``, each leaf layer's first output kept
    (its ``call`` wrapped on the instance; the model is the test's own, made for this)."""
    seen = {}
    for key, layer in pairs:

        def call(*args, _call=layer.call, _key=key, **kwargs):
            out = _call(*args, **kwargs)
            seen.setdefault(_key, keras.ops.convert_to_numpy(keras.tree.flatten(out)[0]))
            return out

        layer.call = call
    model(sample)
    return seen


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_a_keras_hub_backbones_error_per_layer_is_the_one_raw_keras_gives(policy):
    mixed = tiny_gpt2(policy)
    sample = {
        "token_ids": np.arange(16).reshape(2, 8) % 50,
        "padding_mask": np.ones((2, 8), "int32"),
    }
    report = dx.check_model(mixed, sample)
    # raw Keras: the same weights in the backbone built under float32, each leaf layer's
    # output read directly (both built from one config: their leaves line up in build order)
    wide = tiny_gpt2("float32")
    wide.set_weights(mixed.get_weights())
    leaves = list(_leaves(mixed, mixed.name))
    pairs = list(zip(leaves, [layer for _, layer in _leaves(wide, wide.name)], strict=True))
    out = _first_outputs(mixed, [(path, layer) for (path, layer), _ in pairs], sample)
    ref = _first_outputs(wide, [(path, twin) for (path, _), twin in pairs], sample)
    floats = {p for p, v in out.items() if v.dtype.kind == "f" or v.dtype.name == "bfloat16"}
    got = {d.path: d for d in report.damage if d.output == 0 and d.call_index == 0}
    # every leaf with a float output is compared, the attention softmax too (auto-named: the
    # rebuilt float32 copy names it afresh)
    assert set(got) == floats and any("/softmax" in p for p in got)
    for path, d in got.items():
        o, r = out[path].astype(np.float64), ref[path].astype(np.float64)
        rel = np.sqrt(np.mean((o - r) ** 2)) / np.sqrt(np.mean(r**2))
        assert d.dtype == policy.removeprefix("mixed_") and d.reference == "float32"
        assert d.rel_rms == pytest.approx(rel, rel=1e-6, abs=1e-12), path
        assert d.max_abs_error == pytest.approx(np.max(np.abs(o - r)), rel=1e-6), path
        assert d.amax == pytest.approx(np.max(np.abs(o))), path
    assert max(d.rel_rms for d in got.values()) > 0  # a 16-bit model is not exact


def test_an_overflowing_layer_is_measured_on_its_finite_values_and_its_float32_ranges():
    """Issue 38 item 3: the float32 set is chosen from each layer's float32 output and input
    ranges (``reference_amax``, ``reference_input_amax``); an output holding inf is compared
    on its finite values, its inf counted. Each against raw Keras in float32 and in 16 bits."""

    def model(policy: str):
        inputs = keras.Input((100,), name="x")
        big = keras.layers.Dense(4, kernel_initializer="ones", dtype=policy, name="big")
        hidden = big(inputs)
        outputs = keras.layers.Dense(2, dtype=policy, name="next")(hidden)
        return keras.Model(inputs, outputs, name="m"), hidden

    sample = np.linspace(1e2, 9e2, 200).reshape(2, 100).astype("float32")  # sums beyond 65504
    (mixed, _), (wide, wide_hidden) = model("mixed_float16"), model("float32")
    wide.set_weights(mixed.get_weights())
    report = dx.check_model(mixed, sample)
    got = {d.path: d for d in report.damage}
    ref = keras.ops.convert_to_numpy(keras.Model(wide.inputs, wide_hidden)(sample))
    out = keras.ops.convert_to_numpy(
        keras.Model(mixed.inputs, mixed.get_layer("big").output)(sample)
    )
    big = got["m/big"]
    assert big.nonfinite == int((~np.isfinite(out)).sum()) > 0
    assert big.reference_amax == pytest.approx(np.abs(ref).max(), rel=1e-6) and ref.max() > 65504
    assert big.reference_input_amax == pytest.approx(np.abs(sample).max())
    assert got["m/next"].reference_input_amax == pytest.approx(np.abs(ref).max(), rel=1e-6)
    finite = np.isfinite(out)
    if finite.any():  # the error is the finite values' against float32's
        o, r = out[finite].astype(np.float64), ref[finite].astype(np.float64)
        rel = np.sqrt(np.mean((o - r) ** 2)) / np.sqrt(np.mean(r**2))
        assert big.rel_rms == pytest.approx(rel, rel=1e-6, abs=1e-12)
    # issue 38 item 4: the output's float16-output finding says what was measured: its inf/NaN
    # (raw Keras's count), and an error only over values finite in both (it said "relative RMS
    # error 0 (beyond float16's tolerance)" for an output of inf alone)
    raw_out = keras.ops.convert_to_numpy(mixed(sample))
    wide_out = keras.ops.convert_to_numpy(wide(sample))
    both = np.isfinite(raw_out) & np.isfinite(wide_out)
    (half,) = report.by_kind("float16-output")
    assert half.path == "m/next" and half.severity == "warning"
    assert f"{int((~np.isfinite(raw_out)).sum())} of its values are inf/NaN" in half.message
    if both.any():
        assert f"over the {int(both.sum())} values finite in both" in half.message
    else:
        assert "no error is measured" in half.message
        assert "relative RMS error" not in half.message and "tolerance" not in half.message


def test_an_audit_compares_a_layer_that_returns_a_scalar():
    """A mixed_float16 model whose last layer returns a 0-d mean: every layer keeps its damage
    row (a scalar output lost the whole per-layer reference once), and the scalar's error is
    raw Keras's: the model against the same model rebuilt in float32 with its weights."""
    import keras

    @keras.saving.register_keras_serializable("dx_tests")
    class Mean(keras.layers.Layer):
        def call(self, x):
            return keras.ops.mean(x)

    def build(policy: str) -> keras.Model:
        keras.config.set_dtype_policy(policy)
        try:
            inputs = keras.Input((4,))
            out = Mean(name="t")(keras.layers.Dense(3, name="d")(inputs))
            return keras.Model(inputs, out, name="m")
        finally:
            keras.config.set_dtype_policy("float32")

    model, wide = build("mixed_float16"), build("float32")
    wide.set_weights(model.get_weights())
    x = np.linspace(-2, 2, 8, dtype="float32").reshape(2, 4)
    report = dx.check_model(model, x)
    got = {d.path: d for d in report.damage}
    assert set(got) == {"m/d", "m/t"}, report.notes
    out = float(keras.ops.convert_to_numpy(model(x)))
    ref = float(keras.ops.convert_to_numpy(wide(x)))
    assert got["m/t"].rel_rms == pytest.approx(abs(out - ref) / abs(ref), rel=1e-6)
