"""Issue 24: ``dx.survey(..., quantize=[None, "int8"])`` and the atlas build: each layer also
quantized as ``Model.quantize`` does it, its cells on the policy axis as
``"<policy>+quantize=<mode>"``, each cached on its own; Keras's refusal (Conv2D has no
``quantize``) is the cell's answer. Real Keras on numpy, checked against raw Keras here."""

from __future__ import annotations

import keras
import pytest

import dtype_explorer as dx
from dtype_explorer.analyses import build_atlas
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import axis_policy

LAYERS = ["Dense", "EinsumDense", "Embedding", "Conv2D"]
ASKED = dict(input_dtypes=["float32"], policies=["float32"], backends=["numpy"], progress=False)


def _raw_refusal() -> str:
    layer = keras.layers.Conv2D(2, 3)
    layer.build((1, 5, 5, 1))
    with pytest.raises(NotImplementedError) as raised:
        layer.quantize("int8")
    return str(raised.value).split("\n")[0]


def test_quantize_is_a_column_of_the_policy_axis():
    s = dx.survey(LAYERS, quantize=[None, "int8"], **ASKED)
    label = axis_policy("float32", "int8")
    assert s.policies == ("float32", label) and s.quantize == (None, "int8")
    assert s.compute_dtypes[label] == "float32"
    frame = s.to_frame()
    assert set(frame["policy"]) == {"float32", label} and len(frame) == 8
    for target in ("Dense", "EinsumDense", "Embedding"):
        cell = s.cell(target, "float32", label)
        r = cell.results["numpy"]
        assert r.ok and r.quantization.mode == "int8" and r.quantization.via == "quantize"
        assert r.spec.quantize == "int8" and r.spec.policy == "float32"
        assert any(v.dtype == "int8" for v in r.quantization.variables)
        assert s.cell(target, "float32", "float32").results["numpy"].quantization is None
    conv = s.cell("Conv2D", "float32", label)
    r = conv.results["numpy"]
    assert conv.classification == "raises" and r.error.where == "quantize"
    assert r.error.message.split("\n")[0].startswith(_raw_refusal())
    assert s.cell("Conv2D", "float32", "float32").results["numpy"].ok
    again = dx.survey(LAYERS, quantize=[None, "int8"], **ASKED)  # each cell cached apart
    assert all(r.cached for r in again.results)
    assert {r.spec.cache_key() for r in again.results} == {r.spec.cache_key() for r in s.results}
    assert len({r.spec.cache_key() for r in s.results}) == 8


def test_ops_are_surveyed_unquantized_and_bad_modes_are_told():
    s = dx.survey(["Dense", "ops.add"], quantize=["int8"], **ASKED)
    assert {(r.spec.target, r.spec.quantize) for r in s.results} == {("Dense", "int8")}
    with pytest.raises(InvalidSpecError, match="Received: 8"):
        dx.survey(["Dense"], quantize=[None, 8], **ASKED)
    with pytest.raises(InvalidSpecError, match="unknown quantization mode 'int9'; did you mean"):
        dx.survey(["Dense"], quantize=["int9"], **ASKED)  # as dx.probe and check_model say it


def test_the_atlas_shows_the_quantized_column():
    atlas = build_atlas(["Dense", "Conv2D"], quantize=[None, "int8"], **ASKED)
    label = axis_policy("float32", "int8")
    assert atlas.policies == ("float32", label)
    assert atlas.cell("Dense", "float32", label).classification == "casts-to-compute"
    assert atlas.cell("Conv2D", "float32", label).classification == "raises"
    assert f'"{label}"' in atlas.to_json()
    frame = atlas.to_frame()
    assert set(frame["policy"]) == {"float32", label}
