"""A representative op of each class, probed on every backend through the worker pool, against
bare Keras calls of the same op in a fresh process of that backend (``raw_ops.py``); and what
``floatx="bfloat16"`` changes in the documented answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import pytest

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.keras_run import make_spec, run_probe

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "tests" / "keras_run" / "raw_ops.py"
#: raw_ops.py case -> (target, input dtypes, floatx)
CASES = {
    "binary ops.add(int8, float16)": ("ops.add", ("int8", "float16"), None),
    "binary ops.add(int32, python_float)": ("ops.add", ("int32", "python_float"), None),
    "float ops.sqrt(int32)": ("ops.sqrt", ("int32",), None),
    "reduction ops.sum(int8)": ("ops.sum", ("int8",), None),
    "index ops.argmax(float16)": ("ops.argmax", ("float16",), None),
    "creation ops.zeros(dtype=int8)": ("ops.zeros", ("int8",), None),
    "nn ops.gelu(bfloat16)": ("ops.nn.gelu", ("bfloat16",), None),
    "image ops.image.resize(uint8)": ("ops.image.resize", ("uint8",), None),
    "linalg ops.linalg.inv(float32)": ("ops.linalg.inv", ("float32",), None),
    "python ops.size(float32)": ("ops.size", ("float32",), None),
    "bfloat16 ops.sqrt(int32)": ("ops.sqrt", ("int32",), "bfloat16"),
    "bfloat16 ops.add(int32, int32)": ("ops.add", ("int32", "int32"), "bfloat16"),
}


def _raw(backend: str) -> dict[str, str]:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, str(RAW)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", pool.usable(None))
def test_representative_ops_match_bare_keras(backend: str) -> None:
    raw = _raw(backend)
    for case, (target, dtypes, floatx) in CASES.items():
        result = dx.probe(target, dtypes, backend=backend, floatx=floatx)
        assert result.status == "ok", (case, result.error)
        assert result.output_dtype == raw[case], (backend, case, result.output_dtype, raw[case])
        converted = [s.dtype for s in result.cast_path if s.stage == "converted"]
        if target != "ops.zeros":  # a creation op's dtype goes to dtype=, not to an input
            assert converted == list(dtypes), (backend, case, converted)
    # The probe passes backend tensors of the asked dtype, as a user holding tensors does. With
    # NumPy arrays, JAX under floatx bfloat16 makes every array float32 before the op:
    assert raw["bfloat16 ops.add(int32, int32)"] == "int32"
    if backend == "jax":
        assert raw["bfloat16 numpy ops.add(int32, int32)"] == "float32"


def test_python_values_are_named_not_dropped() -> None:
    backend = keras.backend.backend()
    size = run_probe(make_spec("ops.size", "float32", backend=backend))
    shape = run_probe(make_spec("ops.shape", "float32", backend=backend))
    assert shape.output_dtypes == ("python_int", "python_int")
    assert shape.verdict == "undocumented"  # Keras states no dtype rule for shape
    outputs = [s for s in size.cast_path if s.stage == "output"]
    assert size.output_dtype in {"python_int", "int32", "int64"}
    if size.output_dtype == "python_int":
        assert "not a tensor" in outputs[0].note


def test_bfloat16_floatx_changes_the_documented_answer() -> None:
    """Keras resolves int-to-float results and weak floats at floatx's bit width: under
    floatx bfloat16 that is float16 (result_type), not bfloat16 and not float32."""
    backend = keras.backend.backend()

    def documented(target, dtypes, floatx, **kw):
        spec = make_spec(target, dtypes, backend=backend, floatx=floatx, **kw)
        return run_probe(spec)

    for target, dtypes in [("ops.sqrt", "int32"), ("ops.add", ("int32", "python_float"))]:
        base = documented(target, dtypes, "float32")
        half = documented(target, dtypes, "bfloat16")
        assert base.documented_dtype == "float32", target
        assert half.documented_dtype == "float16", target
        assert "float16" in " ".join(half.basis)
    # where Keras says floatx does not matter, it does not
    assert documented("ops.add", "int8", "bfloat16").documented_dtype == "int8"
    assert documented("ops.zeros", "int8", "bfloat16").documented_dtype == "int8"
    # the explicit dtype= argument is the documented answer; dtype=None is undocumented
    default = documented("ops.zeros", "float32", "bfloat16", kwargs={"dtype": None})
    assert default.documented_dtype is None and default.output_dtype == "bfloat16"
    assert default.verdict == "undocumented"


def test_unreadable_output_values_still_give_the_dtype() -> None:
    """A full bfloat16 reduction on TensorFlow (the tests' in-process backend) is a 0-d tensor
    NumPy cannot read; the probe still answers with its dtype instead of an invalid spec."""
    backend = keras.backend.backend()
    for target in ("ops.sum", "ops.prod", "ops.trace"):
        r = run_probe(make_spec(target, "bfloat16", backend=backend))
        assert r.status == "ok", (target, r.error)
        assert r.output_dtype == "bfloat16" or backend != "tensorflow"
