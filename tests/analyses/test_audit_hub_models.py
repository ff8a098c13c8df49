"""Tiny keras-hub models (2 layers, small configs, random weights, no download) audited under
mixed_float16 and int8: Gemma, Llama, BERT and ViT. The layers keras-hub keeps in float32 on
purpose are facts (a note of the report, not a finding), each checked against the model's own
layers; an overflow provoked with large attention kernels is named at its op and its line in
keras-hub's source, checked against raw Keras (the same weights overflow under float16 and
not under float32); int8 quantizes the layers raw ``model.quantize`` quantizes; one fit step
runs on a tiny BertTextClassifier. keras-hub is the ``hub`` extra: without it these tests
fail, they do not skip."""

from __future__ import annotations

import linecache
import os

import keras
import numpy as np
import pytest

from dtype_explorer import check_model

try:
    import keras_hub
except ImportError as error:  # the hub extra is part of the test environment
    keras_hub = None
    MISSING = f"keras-hub is needed (pip install 'dtype-explorer[hub]'): {error}"

TOKENS = {"token_ids": np.arange(16).reshape(2, 8) % 64, "padding_mask": np.ones((2, 8), "int32")}
SAMPLES = {
    "gemma": TOKENS,
    "llama": TOKENS,
    "bert": {**TOKENS, "segment_ids": np.zeros((2, 8), "int32")},
    "vit": np.random.default_rng(0).random((2, 16, 16, 3)).astype("float32"),
}


@pytest.fixture
def hub():
    if keras_hub is None:
        pytest.fail(MISSING)
    return keras_hub


def tiny(hub, name: str, policy: str = "float32"):
    """A 2-layer keras-hub backbone from a small config, built under ``policy``, its weights
    drawn from seed 0: unseeded, they came from whatever the tests before left in the global
    generators, and about one draw in seventy (seed 28 on Gemma) provoked no float16 overflow
    in the large-attention test below."""
    models = hub.models
    configs = {
        "gemma": lambda: models.GemmaBackbone(
            vocabulary_size=64,
            num_layers=2,
            num_query_heads=2,
            num_key_value_heads=1,
            hidden_dim=16,
            intermediate_dim=32,
            head_dim=8,
        ),
        "llama": lambda: models.LlamaBackbone(
            vocabulary_size=64,
            num_layers=2,
            num_query_heads=2,
            num_key_value_heads=1,
            hidden_dim=16,
            intermediate_dim=32,
        ),
        "bert": lambda: models.BertBackbone(
            vocabulary_size=64,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=16,
        ),
        "vit": lambda: models.ViTBackbone(
            image_shape=(16, 16, 3),
            patch_size=8,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            mlp_dim=32,
        ),
    }
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    try:
        return configs[name]()
    finally:
        keras.config.set_dtype_policy("float32")


def bits(model):
    return [keras.ops.convert_to_numpy(v.value).tobytes() for v in model.variables]


def leaf(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@pytest.mark.parametrize("name", ["gemma", "llama", "bert", "vit"])
def test_mixed_float16_lists_the_layers_kept_float32_on_purpose_as_facts(hub, name):
    model = tiny(hub, name, "mixed_float16")
    before = bits(model)
    report = check_model(model, SAMPLES[name])
    assert bits(model) == before and keras.config.dtype_policy().name == "float32"
    raw = model(SAMPLES[name])
    top = next(iter(raw.values())) if isinstance(raw, dict) else raw
    assert keras.backend.standardize_dtype(top.dtype) in report.layers[0].outputs[0].dtype
    # raw Keras: the model's own layers whose policy computes in float32
    kept = sorted(
        layer.name
        for layer in model._flatten_layers()
        if layer is not model and layer.compute_dtype == "float32"
    )
    facts = [n for n in report.notes if n.startswith("Kept in float32 on purpose")]
    listed = sorted(leaf(c.path) for c in report.layers if any(f"{c.path} (" in n for n in facts))
    assert listed == kept and len(facts) == (1 if kept else 0)
    if name in ("gemma", "llama"):  # keras-hub builds their attention softmax in float32
        assert kept and all("softmax" in p for p in kept)
        assert "(Softmax in " in facts[0] and "Attention)" in facts[0]
    assert not [f for f in report.findings if f.kind == "float32-only-layer"]


def large_attention(model, value: float = 30.0):
    for layer in model._flatten_layers():
        if layer.name in ("query", "key") and layer.weights:
            layer.kernel.assign(keras.ops.ones_like(layer.kernel) * value)
    return model


@pytest.mark.parametrize("name", ["gemma", "llama"])
def test_the_first_op_that_overflows_float16_is_named_with_its_keras_hub_line(hub, name):
    model = large_attention(tiny(hub, name, "mixed_float16"))
    report = check_model(model, SAMPLES[name])
    overflows = report.by_kind("overflow")
    assert overflows, [f.kind for f in report.findings]
    first = overflows[0]
    assert first.path.endswith("attention") and first.step.op == "ops.einsum"
    source = first.step.source
    assert os.path.dirname(hub.__file__) in source.file  # keras-hub's own source
    assert linecache.getline(source.file, source.line).strip() == source.text.strip()
    assert f"{os.path.basename(source.file)}:{source.line}" in first.where()
    # raw Keras: those weights overflow under float16, and not under float32
    wide = tiny(hub, name)
    wide.set_weights([w.astype("float32") for w in model.get_weights()])
    half_out = keras.ops.convert_to_numpy(model(SAMPLES[name]))
    assert not np.isfinite(half_out.astype("float32")).all()
    assert np.isfinite(keras.ops.convert_to_numpy(wide(SAMPLES[name]))).all()


@pytest.mark.parametrize("name", ["gemma"])  # quantize() costs ~1 s a layer here (gc)
def test_int8_quantizes_what_raw_quantize_does_and_names_the_rest(hub, name):
    model = tiny(hub, name)
    before = bits(model)
    report = check_model(model, SAMPLES[name], quantize="int8")
    assert bits(model) == before
    raw = tiny(hub, name)
    raw.set_weights(model.get_weights())
    raw.quantize("int8")
    raw_quantized = sorted(layer.name for layer in raw._flatten_layers() if layer.quantization_mode)
    rows = report.quantization.layers
    assert sorted(leaf(r.path) for r in rows if r.status == "quantized") == raw_quantized
    skipped = {leaf(f.path) for f in report.by_kind("not-quantized")}
    assert skipped and all("norm" in p or "embedding" in p for p in skipped)
    assert report.quantization.bytes < report.quantization.float_bytes
    raw_out = keras.ops.convert_to_numpy(keras.tree.flatten(raw(SAMPLES[name]))[0])
    assert report.quantization.output_error is not None and np.isfinite(raw_out).all()


def test_fit_on_a_tiny_bert_text_classifier(hub):
    classifier = hub.models.BertTextClassifier(
        backbone=tiny(hub, "bert"), num_classes=2, preprocessor=None
    )
    before = bits(classifier)
    report = check_model(classifier, SAMPLES["bert"], mode="fit", labels=np.array([0, 1]))
    assert report.fit is not None and report.fit.gradients
    assert bits(classifier) == before
    assert not report.by_kind("call-error")
