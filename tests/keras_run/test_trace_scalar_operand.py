"""A Python number an op converts to a tensor before computing is a step that can lose values
(``CastLoss`` step ``operand``), measured where the conversion ran and said on the top-level
step the user's line made: torch's backend makes ``1733500000.0`` a float32 tensor (its
``floatx``) before subtracting it from float64 data, so the float64 result is off by 32, where
tensorflow converts it to the result's dtype and keeps it. Each backend in its own process,
beside raw Keras on the same values."""

from __future__ import annotations

import numpy as np
import pytest

import dtype_explorer as dx
from tests.on_backend import json_on

SCRIPT = """
import json, warnings
import numpy as np, keras
import dtype_explorer as dx
warnings.simplefilter("ignore")  # jax says it truncates float64: measured below
t = np.array([[1733500000.123], [1733500001.456]])  # unix times, float64


def prep(t, offset=1733500000.0):
    return keras.ops.subtract(keras.ops.convert_to_tensor(t), offset)


converted = keras.ops.convert_to_tensor(t)
raw = keras.ops.subtract(converted, 1733500000.0)
exact = np.asarray(keras.ops.convert_to_numpy(converted), "float64") - 1733500000.0
traced = dx.trace(prep, t)
kept = dx.trace(prep, t, 1733499904.0)  # 13542968 x 128: float32 holds it
print(json.dumps({
    "raw_dtype": keras.backend.standardize_dtype(raw.dtype),
    "raw": keras.ops.convert_to_numpy(raw).ravel().tolist(),
    "exact": exact.ravel().tolist(),
    "lost": [[s.op, [x.model_dump(mode="json") for x in s.losses], s.flag_text()]
             for s in traced.lost_steps()],
    "headline": traced.headline(),
    "kept": [s.op for s in kept.lost_steps()],
}))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch", "numpy"])
def test_a_python_float_an_op_rounds_is_lost_values_where_raw_keras_rounds_it(backend):
    out = json_on(backend, SCRIPT)
    off = [abs(r - e) for r, e in zip(out["raw"], out["exact"], strict=True)]
    if backend == "tensorflow":  # converted to the result's float64: every digit kept
        assert out["raw_dtype"] == "float64" and max(off) < 1e-6
        assert out["lost"] == [] and "values lost" not in out["headline"]
        return
    # raw Keras subtracted 1733500032 (the float as float32), not 1733500000: 32 off
    assert out["raw_dtype"] == ("float64" if backend == "torch" else "float32")
    assert min(off) > 31
    [[op, [loss], flag]] = out["lost"]
    assert op == "ops.subtract"
    assert (loss["step"], loss["where"], loss["source"], loss["target"]) == (
        "operand", "a Python float", "float64", "float32",
    )  # fmt: skip
    assert (loss["count"], loss["rounded"], loss["examples"]) == (1, 1, [[1733500000, 1733500032]])
    assert flag == (
        "lost values: a Python float converted inside the op: float64 -> float32: 1 of 1 "
        "integers rounded (1733500000 -> 1733500032; float32 holds integers exactly only up to "
        "16777216)"
    )
    assert "values lost at 1 step(s) (first: ops.subtract, rounding)" in out["headline"]
    assert out["kept"] == []  # a float float32 holds: nothing lost, nothing said


RAW_SUBTRACT = """
import json, warnings
import numpy as np, keras
warnings.simplefilter("ignore")
t = np.array([[1733500000.123], [1733500001.456]])
out = keras.ops.subtract(t, 1733500000.0)  # as the probe calls it: the user's values as given
print(json.dumps({"out": keras.ops.convert_to_numpy(out).ravel().tolist()}))
"""


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_the_op_probe_says_what_the_op_made_of_a_python_float_as_raw_keras_computes(backend):
    raw = json_on(backend, RAW_SUBTRACT)["out"]
    t = np.array([[1733500000.123], [1733500001.456]])
    result = dx.probe("ops.subtract", values=[t, 1733500000.0], backend=backend, use_cache=False)
    [scalar] = [s for s in result.cast_path if s.stage == "converted" and s.index == 1]
    assert scalar.dtype == "python_float"  # as given: what the rules and verdicts read
    if backend == "tensorflow":  # converted to the result's float64: exact
        assert abs(raw[0] - 0.123) < 1e-6
        assert scalar.note.startswith("weak Python scalar: Keras's rules give it")
        return
    assert abs(raw[0] - (1733500000.123 - 1733500032.0)) < 1e-6  # torch: the float as float32
    assert scalar.note == (
        "weak by Keras's rules, yet the op converted it itself: float64 -> float32: 1 of 1 "
        "integers rounded (1733500000 -> 1733500032; float32 holds integers exactly only up to "
        "16777216)"
    )
