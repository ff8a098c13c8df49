"""Issue 38, item 3, on a keras-hub GPT-2 backbone built tiny from a config (no download) under
mixed_float16: an overflow in a layer a block makes inside its own code, out of clone_model's
reach, gets a fix the audit ran on a copy (a DTypePolicyMap keyed by layer paths, or the block
around it in float32), which the test applies again with raw Keras and sees clear the
overflow; the advice that would not clear it, re-run raw here, is not the one shown. Weights
are scaled, as a trained model's activations grow, to make the overflow happen. One backbone
for the module."""

from __future__ import annotations

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
FEEDFORWARD = "transformer_layer_0/feedforward_intermediate_dense"
ATTENTION = "transformer_layer_0/self_attention"


@pytest.fixture(scope="module")
def built():
    """The tiny backbone under mixed_float16 and its initial weights."""
    if keras_hub is None:
        pytest.fail(MISSING)
    # named: the paths below, whatever other modules built first
    backbone = tiny_gpt2("mixed_float16", name="gpt2_backbone")
    return backbone, backbone.get_weights()


def _scaled(built, ends: tuple[str, ...], factor: float):
    backbone, weights = built
    backbone.set_weights(weights)
    for variable in backbone.weights:
        if variable.path.endswith(ends):
            variable.assign(keras.ops.convert_to_numpy(variable.value) * factor)
    return backbone


def _finite(model) -> bool:
    return bool(np.isfinite(keras.ops.convert_to_numpy(model(SAMPLE))).all())


def _with_map(backbone, default: str, keys: dict[str, str]):
    """Raw keras-hub: the backbone made again with a DTypePolicyMap as its dtype."""
    policy_map = keras.dtype_policies.DTypePolicyMap(default_policy=default)
    for key, policy in keys.items():
        policy_map[key] = policy
    copy = type(backbone).from_config({**backbone.get_config(), "dtype": policy_map})
    copy.set_weights(backbone.get_weights())
    return copy


def test_a_nested_dense_overflow_gets_a_policy_map_that_clears_it(built):
    backbone = _scaled(built, (f"{FEEDFORWARD}/kernel",), 1e6)
    assert not _finite(backbone)  # raw Keras: the overflow is real
    overflows = check_model(backbone, SAMPLE).by_kind("overflow")
    assert [f.path for f in overflows] == [f"gpt2_backbone/{FEEDFORWARD}"]
    proof = overflows[0].proof
    assert proof.proven and proof.how == "policy-map", proof.lines()
    assert proof.default_policy == "mixed_float16" and "DTypePolicyMap" in overflows[0].fix
    assert proof.before.nonfinite > 0 and proof.after.nonfinite == 0 and not proof.after.finding
    # the map the tool shows, applied again by the test with raw Keras: the overflow is gone
    fixed = _with_map(backbone, proof.default_policy, proof.policy_map)
    assert _finite(fixed)
    inner = {la.path: la.compute_dtype for la in fixed._flatten_layers() if la.path}
    assert inner[FEEDFORWARD] == "float32" and inner[ATTENTION] == "float16"  # the rest as was
    # the advice of old, that layer alone in float32, does not clear it: it is not shown
    alone = {FEEDFORWARD: "float32"}
    assert not _finite(_with_map(backbone, "mixed_float16", alone))
    assert proof.policy_map != alone and proof.tried[0].startswith(f"gpt2_backbone/{FEEDFORWARD}")


def test_an_attention_overflow_is_fixed_where_a_map_cannot_reach_its_softmax(built):
    backbone = _scaled(built, (f"{ATTENTION}/query/kernel", f"{ATTENTION}/key/kernel"), 1e4)
    assert not _finite(backbone)
    [overflow] = check_model(backbone, SAMPLE).by_kind("overflow")
    assert overflow.path == f"gpt2_backbone/{ATTENTION}"
    # raw Keras: the attention and its sublayers by path in float32 leave its Softmax in
    # float16 (a layer with no build() gets no path) and still overflow
    keys = {ATTENTION: "float32", f"{ATTENTION}/.*": "float32"}
    mapped = _with_map(backbone, "mixed_float16", keys)
    assert not _finite(mapped)
    softmax = [la for la in mapped._flatten_layers() if type(la).__name__ == "Softmax"]
    assert softmax and all(la.path is None and la.compute_dtype == "float16" for la in softmax)
    proof = overflow.proof
    assert "DTypePolicyMap" in proof.tried[0] and "no path" in proof.tried[0]
    assert proof.proven and proof.how == "layer-dtype"
    assert proof.layers == ("gpt2_backbone/transformer_layer_0",)
    assert "clone_model" in overflow.fix and "DTypePolicyMap" not in overflow.fix

    # the fix shown, applied by the test with raw Keras: the block in float32 clears it
    def in_float32(layer):
        config = layer.get_config()
        if layer.name == "transformer_layer_0":
            config["dtype"] = "float32"
        return type(layer).from_config(config)

    fixed = keras.models.clone_model(backbone, clone_function=in_float32)
    fixed.set_weights(backbone.get_weights())
    assert _finite(fixed)
