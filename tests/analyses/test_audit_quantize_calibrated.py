"""``check_model(..., quantize=GPTQConfig(...) | AWQConfig(...))`` on a tiny keras-hub
``GPT2CausalLM`` (2 blocks, hidden 16, random weights, no download), against raw Keras
quantizing an identical model (same seed, same weights) with ``model.quantize(mode,
config=...)``: the same layers quantized, the same stored variables (dtypes, shapes), the same
output dtype, and the same output error against the float model. The calibration data is
token ids; Keras asks a tokenizer even then (``ByteTokenizer`` needs no vocabulary file)."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest
from tiny_hub import tiny_gpt2

from dtype_explorer import check_model
from dtype_explorer.errors import InvalidSpecError

try:
    import keras_hub
except ImportError as error:  # the hub extra is part of the test environment
    keras_hub = None
    MISSING = f"keras-hub is needed (pip install 'dtype-explorer[hub]'): {error}"

IDS = np.random.default_rng(0).integers(0, 256, (4, 8)).astype("int32")
SAMPLE = {"token_ids": IDS[:2], "padding_mask": np.ones((2, 8), "int32")}


@pytest.fixture
def hub():
    if keras_hub is None:
        pytest.fail(MISSING)
    return keras_hub


def tiny_causal_lm(hub):
    """The same tiny GPT-2 every time: seeded, 2 blocks, a byte-sized vocabulary."""
    keras.utils.set_random_seed(0)
    backbone = tiny_gpt2(vocabulary_size=256)
    return hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)


def config(hub, mode, **kwargs):
    make = keras.quantizers.GPTQConfig if mode == "gptq" else keras.quantizers.AWQConfig
    group = {"group_size": 8} if mode == "gptq" else {"group_size": -1}
    tokenizer = hub.tokenizers.ByteTokenizer()
    return make(IDS, tokenizer, num_samples=4, sequence_length=8, **group, **kwargs)


def state(model):
    return (
        [keras.ops.convert_to_numpy(v.value).tobytes() for v in model.weights],
        [str(v.dtype) for v in model.weights],
        [layer.dtype_policy.name for layer in model._flatten_layers()],
    )


def leaves(model):
    return [layer for layer in model._flatten_layers() if len(list(layer._flatten_layers())) == 1]


def structure(model):
    """A structure the user writes, naming the model's own layers."""
    backbone = model.backbone
    return {
        "pre_block_layers": [backbone.token_embedding],
        "sequential_blocks": backbone.transformer_layers,
    }


@pytest.mark.parametrize("mode", ["gptq", "awq"])
def test_calibrated_quantization_against_raw_keras_and_the_model_untouched(hub, mode):
    model = tiny_causal_lm(hub)
    before = state(model)
    # awq with a structure the user wrote: the audit maps it onto its copy's layers
    extra = {"quantization_layer_structure": structure(model)} if mode == "awq" else {}
    report = check_model(model, SAMPLE, quantize=config(hub, mode, **extra))
    assert state(model) == before  # bitwise: the user's layers were never calibrated
    q = report.quantization
    assert q.refused is None and q.mode == mode
    raw = tiny_causal_lm(hub)
    assert [w.tobytes() for w in raw.get_weights()] == [w.tobytes() for w in model.get_weights()]
    float_out = keras.ops.convert_to_numpy(raw(SAMPLE))
    extra = {"quantization_layer_structure": structure(raw)} if mode == "awq" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw.quantize(mode, config=config(hub, mode, **extra))
    raw_out = raw(SAMPLE)
    # per layer: the same outcome, policy and stored variables as raw Keras
    rows = [r for r in q.layers if r.has_weights]  # weightless layers' names are counters'
    quantized = 0
    for row, layer in zip(rows, [la for la in leaves(raw) if la.weights], strict=True):
        assert row.path.endswith("/" + layer.path), (row.path, layer.path)
        assert (row.status == "quantized") == (layer.quantization_mode == mode), row.path
        assert row.policy == layer.dtype_policy.name
        assert [(v.name, v.dtype, v.shape) for v in row.variables] == [
            (v.name, keras.backend.standardize_dtype(v.dtype), tuple(v.shape))
            for v in layer.weights
        ]
        if row.status == "quantized":
            quantized += 1
            kernel = next(v for v in row.variables if v.name == "kernel")
            assert kernel.dtype == "uint8" and kernel.packed  # 4 bits, two to a byte
            assert row.steps[0] == "kernel stored uint8, dequantized to float32 on every call"
            assert row.error is not None
        else:
            assert row.why, row.path  # what Keras said when it skipped the layer
    assert quantized == 12  # q, k, v, output and the two feed-forward Dense, in 2 blocks
    emb = next(r for r in rows if r.path.endswith("token_embedding"))
    assert f"quantization_mode={mode}" in emb.why and report.by_kind("not-quantized")
    assert q.bytes < q.float_bytes
    # the output: Keras's dtype and, within float round-off, Keras's error
    top = report.layers[0]  # the audited quantized copy's own call
    assert top.path == model.name
    assert [o.dtype for o in top.outputs] == [keras.backend.standardize_dtype(raw_out.dtype)]
    raw_out = keras.ops.convert_to_numpy(raw_out)
    expected = np.max(np.abs(raw_out - float_out)) / np.max(np.abs(float_out))
    assert q.output_error == pytest.approx(expected, rel=1e-4, abs=1e-6)


def test_calibration_needs_blocks_and_the_models_own_layers(hub):
    # a Functional model names no blocks: Keras's own refusal
    inputs = keras.Input((8,), dtype="int32")
    x = keras.layers.Embedding(256, 16, name="emb")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(4, name="head")(x), name="net")
    report = check_model(model, IDS[:2], quantize=config(hub, "gptq"))
    assert "a valid quantization structure must be provided" in report.quantization.refused.message
    (finding,) = report.by_kind("quantize-refused")
    # the blocks are the model's own structure: no placeholder code (issue 38 item 3), the reason
    assert finding.fix == "" and "quantization_layer_structure" in finding.proof.not_tried
    # a structure naming a layer outside the model is refused before any work
    other = keras.layers.Dense(4)
    asked = config(hub, "gptq", quantization_layer_structure={"sequential_blocks": [other]})
    with pytest.raises(InvalidSpecError, match="must be one of the model's own layers"):
        check_model(model, IDS[:2], quantize=asked)


def test_a_layer_set_to_gptq_but_outside_the_blocks_is_named_uncalibrated(hub):
    """Keras sets every Dense to gptq, then calibrates only the blocks it is given: a layer
    outside them keeps computing with its float kernel (``is_gptq_calibrated`` is False)."""
    model = tiny_causal_lm(hub)
    first = dict(structure(model), sequential_blocks=model.backbone.transformer_layers[:1])
    report = check_model(
        model, SAMPLE, quantize=config(hub, "gptq", **{"quantization_layer_structure": first})
    )
    rows = [
        r
        for r in report.quantization.layers
        if r.has_weights and r.layer_class != "LayerNormalization"
    ]
    late = [r for r in rows if "transformer_layer_1/" in r.path]
    assert len(late) == 6 and all(r.status == "skipped" for r in late)
    assert all("never calibrated" in r.why for r in late)
    assert sum(r.status == "quantized" for r in rows) == 6  # block 0's
    raw = tiny_causal_lm(hub)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw.quantize(
            "gptq",
            config=config(
                hub,
                "gptq",
                quantization_layer_structure=dict(
                    structure(raw), sequential_blocks=raw.backbone.transformer_layers[:1]
                ),
            ),
        )
    block = raw.backbone.transformer_layers[1]
    assert not any(
        getattr(layer, "is_gptq_calibrated", True)
        for layer in leaves(block)
        if layer.weights and type(layer).__name__ != "LayerNormalization"
    )
