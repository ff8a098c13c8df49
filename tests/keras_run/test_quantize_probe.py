"""Issue 24 (probe part, across releases): a single layer quantized as ``Model.quantize`` does
it (``dx.probe(..., quantize=)``) or built under a quantized policy, checked against raw Keras
(``layer.quantize(mode)`` then a call) in this process (tensorflow) and in the numpy worker;
Keras's refusals are the answer; a release without a mode says which release added it (the
real keras==3.11.3 engine: int8 and int4, no gptq)."""

import keras
import pytest
from packaging.version import Version

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run.probe._quantize_layer import ADDED_IN
from dtype_explorer.records import ProbeSpec
from tests.on_backend import json_on

#: Raw Keras: Dense(4) built, quantized, called; its output dtype, variables and the dtype
#: Keras's own matmul gives int8 x int8 on this backend (the accumulate dtype).
RAW = """
import json, keras, numpy as np
mode, policy = {mode!r}, {policy!r}
layer = keras.layers.Dense(4, dtype=policy)
layer.build((2, 4))
said = None
try:
    if mode:
        layer.quantize(mode)
except Exception as error:
    said = [type(error).__name__, str(error)]
out = None if said else keras.backend.standardize_dtype(layer(np.ones((2, 4), "float32")).dtype)
acc = keras.ops.matmul(np.ones((2, 4), "int8"), np.ones((4, 4), "int8"))
print(json.dumps({{
    "output": out, "refused": said,
    "variables": [[v.name, keras.backend.standardize_dtype(v.dtype), list(v.shape)]
                  for v in layer.weights],
    "accumulate": keras.backend.standardize_dtype(acc.dtype),
}}))
"""


def _variables(result):
    return [[v.name, v.dtype, list(v.shape)] for v in result.quantization.variables]


@pytest.mark.parametrize("backend", [None, "numpy"])
def test_int8_dense_matches_raw_keras(backend):
    r = dx.probe("Dense", "float32", kwargs={"units": 4}, quantize="int8", backend=backend)
    raw = json_on(r.backend, RAW.format(mode="int8", policy="float32"))
    assert r.status == "ok", r.error
    assert r.output_dtype == raw["output"]
    q = r.quantization
    assert sorted(_variables(r)) == sorted(raw["variables"])
    assert q.policy == "int8_from_float32" and q.via == "quantize"
    assert q.float_bytes == 4 * 4 * 4 + 4 * 4  # the float kernel and bias
    assert q.bytes == 16 + 16 + 16  # int8 kernel, float32 bias and kernel scale
    assert q.steps[0] == "quantize inputs: float32 → int8"
    assert q.steps[1].startswith(f"integer matmul: int8 x int8 → {raw['accumulate']}")
    assert q.steps[-1] == "bias: add in float32"
    # drawn by the text view and the card
    assert "integer matmul" in str(r) and "quantize int8" in str(r)
    assert "Compute path" in r._repr_html_() and "kernel_scale" in r._repr_html_()


def test_int4_is_weight_only_and_packed():
    r = dx.probe("Dense", "float32", kwargs={"units": 4}, quantize="int4", backend="numpy")
    raw = json_on("numpy", RAW.format(mode="int4", policy="float32"))
    assert r.status == "ok", r.error
    assert sorted(_variables(r)) == sorted(raw["variables"])
    kernel = next(v for v in r.quantization.variables if v.name == "kernel")
    assert (
        kernel.packed and kernel.dtype == "int8" and kernel.shape == (4, 2)
    )  # 4 x 4 int4, two a byte
    assert "kernel stored int8, dequantized to float32 on every call" in r.quantization.steps


def test_quantized_policy_is_described_like_quantize():
    r = dx.probe("Dense", "float32", kwargs={"units": 4}, policy="int8_from_float32")
    raw = json_on(r.backend, RAW.format(mode=None, policy="int8_from_float32"))
    assert r.quantization.via == "policy" and r.quantization.mode == "int8"
    assert sorted(_variables(r)) == sorted(raw["variables"])
    assert any(s.startswith("integer matmul: int8 x int8") for s in r.quantization.steps)


@pytest.mark.parametrize(
    ("target", "kwargs", "policy", "shape"),
    [
        ("Conv2D", {"filters": 2, "kernel_size": 1}, "float32", (2, 2, 2, 3)),
        ("Dense", {"units": 4}, "float16", None),
    ],
)
def test_keras_refusals_are_the_answer_in_its_words(target, kwargs, policy, shape):
    """A layer without ``quantize`` (Conv2D), int8 under float16: Keras's error, at
    ``"quantize"``, its message as raw Keras raises it."""
    import keras

    r = dx.probe(target, "float32", policy=policy, kwargs=kwargs, quantize="int8", shape=shape)
    layer = getattr(keras.layers, target)(**kwargs, dtype=policy)
    layer.build(shape or (2, 4))
    with pytest.raises(Exception) as raised:
        layer.quantize("int8")
    assert r.status == "error" and r.error.where == "quantize"
    assert r.error.type == type(raised.value).__name__
    assert r.error.message.split("\n")[0] == str(raised.value).split("\n")[0]
    assert r.quantization.status == "refused"
    assert "quantize" in r.headline or r.error.type in r.headline


def test_bad_quantize_input_is_told_clearly():
    # an unknown mode is refused as check_model refuses it: raised, the same words
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(InvalidSpecError) as audit:
        dx.check_model(model, quantize="int9")
    for backend in (None, "numpy"):
        with pytest.raises(InvalidSpecError) as probe:
            dx.probe("Dense", kwargs={"units": 4}, quantize="int9", backend=backend)
        assert str(probe.value) == str(audit.value)
        assert "unknown quantization mode 'int9'; did you mean 'int8'?" in str(probe.value)
    r = dx.probe("Dense", kwargs={"units": 4}, quantize="gptq")
    assert r.status == "invalid" and "check_model" in r.error.message
    with pytest.raises(InvalidSpecError, match="no weights to quantize"):
        dx.probe("ops.add", ["float32", "float32"], quantize="int8")
    with pytest.raises(ValueError, match="Received: quantize='INT8 '"):
        ProbeSpec(target="Dense", quantize="INT8 ")


def test_the_cache_key_includes_quantize():
    plain = ProbeSpec(target="Dense", kwargs={"units": 4})
    asked = plain.model_copy(update={"quantize": "int8"})
    assert "quantize" not in plain.cache_key()  # answers stored before it still answer
    assert '"quantize":"int8"' in asked.cache_key()
    assert asked.cache_key() != plain.cache_key()


def test_a_release_without_the_mode_names_the_release_that_added_it(keras_3_11_engine):
    """keras==3.11.3 has int8, float8 and int4 (asked of it: QUANTIZATION_MODES), not gptq:
    its own quantize() refuses, and the answer names 3.12."""
    common = {"kwargs": {"units": 4}, "backend": "numpy", "engine": keras_3_11_engine.spec}
    r = dx.probe("Dense", "float32", quantize="int4", **common)
    assert r.versions["keras"] == "3.11.3"
    assert r.status == "ok", r.error
    assert set(r.quantization.modes) == {"int8", "float8", "int4"}
    assert all(Version(ADDED_IN[m]) <= Version("3.11") for m in r.quantization.modes)
    # 3.11.3's int4 Dense unpacks the kernel and multiplies in integers (3.15's dequantizes)
    assert r.quantization.steps[1] == "integer matmul: int8 x int8 → int32 (accumulated in int32)"
    r = dx.probe("Dense", "float32", quantize="gptq", **common)
    assert r.status == "error" and r.error.where == "quantize", r.error
    assert "Keras 3.11.3 has no 'gptq' quantization mode" in r.error.message
    assert "Keras added gptq in 3.12" in r.error.message
    r = dx.probe("Dense", "float32", quantize="int4/32", **common)
    assert r.status == "invalid" and "Int4QuantizationConfig" in r.error.message


def test_a_survey_takes_quantized_policies_as_an_axis():
    """Quantized policies are policies: each cell carries its layer's quantization."""
    s = dx.survey(
        ["Dense"], ["float32"], ["float32", "int8_from_mixed_bfloat16"], ["numpy"], progress=False
    )
    by_policy = {r.spec.policy: r for r in s.results}
    assert by_policy["float32"].quantization is None
    q = by_policy["int8_from_mixed_bfloat16"]
    assert q.output_dtype == "bfloat16" and q.quantization.via == "policy"
    assert q.quantization.steps[0] == "quantize inputs: bfloat16 → int8"
