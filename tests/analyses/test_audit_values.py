"""``%dtype_check`` finds wrong numbers in right dtypes and Keras's rules disagreeing, on every
backend (each in a fresh process running ``audit_values.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import pytest
from swept import SWEPT

import dtype_explorer as dx

SCRIPT = Path(__file__).with_name("audit_values.py")


def _audit(backend: str) -> dict[str, list[dict]]:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", SWEPT)  # openvino: tests/keras_run/test_openvino.py
def test_the_audit_names_wrong_numbers_and_disagreeing_rules(backend: str) -> None:
    found = _audit(backend)
    [wrapped] = [f for f in found["add_uint8"] if f["kind"] == "wraparound"]
    assert wrapped["details"]["element"] == [0, 0]
    assert wrapped["details"]["value"] == 44 and wrapped["details"]["expected"] == 300
    assert "uint8 holds 0..255" in wrapped["message"]

    # issue 38 item 3: the fix is shown once the cast ran on a copy of the layer; raw Keras,
    # given the inputs cast as the fix writes it, returns the exact sum in that dtype
    proof = wrapped["proof"]
    assert proof["proven"] and proof["how"] == "input-cast" and proof["input_dtype"] == "int32"
    assert wrapped["fix"].startswith('inputs = [keras.ops.cast(x, "int32") for x in inputs]')
    assert proof["after"]["received"] == "int32, int32" and not proof["after"]["finding"]
    added = found["raw_add_int32"]
    assert added["values"][0] == 300 and f"it returns {added['dtype']}" in proof["after"]["wrong"]

    [cut] = [f for f in found["layernorm_int32"] if f["kind"] == "truncation"]
    assert cut["details"]["value"] == -1 and cut["details"]["element"] == [0, 0]
    assert -1.1 < cut["details"]["expected"] < -1.0
    # truncated: a wider integer would truncate as well; the fix is the float compute dtype
    assert cut["proof"]["proven"] and cut["proof"]["input_dtype"] == "float32"
    assert cut["fix"].startswith('x = keras.ops.cast(x, "float32")')
    normed = found["raw_layernorm_float32"]
    assert normed["values"][0] == pytest.approx(cut["details"]["expected"], rel=1e-3)

    disagree = [f for f in found["dense_float64"] if f["kind"] == "rules-disagree"]
    # result_type('float64', 'float64') is float32 on torch and numpy; JAX (x64 off) hands the
    # layer float32 already, and TensorFlow's rule says float64
    if backend in ("torch", "numpy"):
        assert disagree and "Keras's rules disagree here" in disagree[0]["message"]
        assert disagree[0]["details"]["result_type"] == "float32"
    else:
        assert not disagree


def test_a_float_model_has_no_value_findings() -> None:
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.LayerNormalization()(keras.layers.Dense(4)(inputs)))
    kinds = {f.kind for f in dx.check_model(model).findings}
    assert not kinds & {"wraparound", "saturation", "truncation", "reference-error"}
