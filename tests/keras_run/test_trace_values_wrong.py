"""``dx.trace``: a step of the user's code computed in a 16-bit float is measured against its
op run again on its inputs widened to float32 (``TraceStep.wrong``), the damage that raises
nothing. A float16 ``cumsum`` of 3000 ones stops at 2048 where the backend sums in float16
(tensorflow, numpy) and is right where it sums in float32 inside (jax, torch): the trace says
which, beside raw Keras run on the same values in both dtypes, in each backend's process."""

from __future__ import annotations

import pytest

from tests.on_backend import json_on

SCRIPT = """
import json
import numpy as np, keras
import dtype_explorer as dx
ones = np.ones(3000, "float16")


def running_total(x):
    return keras.ops.cumsum(x)


def doubled(x):
    return keras.ops.multiply(x, 2.0)


raw16 = keras.ops.convert_to_numpy(keras.ops.cumsum(ones)).astype("float64")
raw32 = keras.ops.convert_to_numpy(keras.ops.cumsum(ones.astype("float32"))).astype("float64")
traced, right = dx.trace(running_total, ones), dx.trace(doubled, ones)
print(json.dumps({
    "raw16_last": float(raw16[-1]), "raw32_last": float(raw32[-1]),
    "scale_error": float(np.abs(raw16 - raw32).max() / np.abs(raw32).max()),
    "wrong": [[s.op, s.wrong.model_dump(mode="json"), s.flag_text()] for s in traced.wrong_steps()],
    "headline": traced.headline(),
    "right": [s.op for s in right.wrong_steps()],
    "returned": traced.returned_dtype,
}))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch", "numpy"])
def test_a_float16_cumsum_is_values_wrong_where_raw_keras_stops_at_2048(backend):
    out = json_on(backend, SCRIPT)
    assert out["raw32_last"] == 3000.0 and out["returned"] == "float16"
    assert out["right"] == []  # a float16 product float16 holds exactly: nothing said
    if out["raw16_last"] == 3000.0:  # the backend sums in float32 inside: right
        assert backend in ("jax", "torch") and out["scale_error"] < 1e-3
        assert out["wrong"] == [] and "values wrong" not in out["headline"]
        return
    # raw Keras's float16 running total stops at 2048: a third of the scale off
    assert backend in ("tensorflow", "numpy") and out["raw16_last"] == 2048.0
    assert out["scale_error"] > 0.3
    [[op, wrong, flag]] = out["wrong"]
    assert op == "ops.cumsum" and wrong["reference_dtype"] == "float32"
    assert wrong["value"] == 2048.0 and wrong["expected"] > 2048.0
    assert flag.startswith("values wrong against the same op in float32: reference-error at ")
    assert "values wrong at 1 step(s) (first: ops.cumsum)" in out["headline"]
