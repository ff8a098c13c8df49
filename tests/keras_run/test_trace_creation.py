"""A creation op asked for numbers its 16-bit ``dtype=`` cannot hold is a step that loses
values (``CastLoss`` step ``creation``): ``ops.arange(seq_len, dtype=self.compute_dtype)``
under ``mixed_float16`` holds 2048 where position 2049 was asked, and every odd position above
it is rounded, with no error; a ``full`` of an epsilon below float16's smallest subnormal holds
zeros. The trace runs the op again in float32 and says what the user's call lost, on the step
the user's line made. Each backend in its own process, beside raw Keras on the same call."""

from __future__ import annotations

import pytest

from tests.on_backend import json_on

SCRIPT = """
import json, warnings
import numpy as np, keras
import dtype_explorer as dx
warnings.simplefilter("ignore")


def positions(n):
    return keras.ops.arange(n, dtype="float16")


def epsilon():
    return keras.ops.full((2,), 1e-8, dtype="float16")


raw = np.asarray(keras.ops.convert_to_numpy(positions(3000)), "float64")
wrong = np.flatnonzero(raw != np.arange(3000))
long, short, tiny = dx.trace(positions, 3000), dx.trace(positions, 2048), dx.trace(epsilon)
print(json.dumps({
    "raw_wrong": len(wrong), "raw_first": int(wrong[0]), "raw_at": float(raw[wrong[0]]),
    "raw_tiny": keras.ops.convert_to_numpy(epsilon()).tolist(),
    "lost": [[s.op, [x.model_dump(mode="json") | {"cause": x.cause} for x in s.losses],
              s.flag_text()]
             for s in long.lost_steps()],
    "headline": long.headline(),
    "short": [s.op for s in short.lost_steps()],
    "tiny": [[s.op, [x.cause for x in s.losses]] for s in tiny.lost_steps()],
}))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch", "numpy"])
def test_positions_a_float16_arange_rounds_are_lost_values_as_raw_keras_rounds_them(backend):
    out = json_on(backend, SCRIPT)
    # raw Keras: 2049 is the first position float16 cannot hold; every odd one above is off
    assert (out["raw_wrong"], out["raw_first"]) == (476, 2049)
    [[op, [loss], flag]] = out["lost"]
    assert op == "ops.arange"
    assert (loss["step"], loss["where"], loss["source"], loss["target"], loss["cause"]) == (
        "creation", "ops.arange", "float32", "float16", "rounding",
    )  # fmt: skip
    assert (loss["count"], loss["rounded"], loss["first_index"]) == (3000, 476, [2049])
    assert loss["examples"][0] == [2049, out["raw_at"]]  # the value raw Keras holds there
    assert flag.startswith(
        "lost values: the values ops.arange was asked for (made again in float32): float32 -> "
        f"float16: 476 of 3000 integers rounded (2049 -> {out['raw_at']:g}"
    )
    assert "values lost at 1 step(s) (first: ops.arange, rounding)" in out["headline"]
    assert out["short"] == []  # up to 2048 float16 holds every position: nothing said
    # an epsilon below float16's smallest subnormal: raw Keras holds zeros, said as underflow
    assert out["raw_tiny"] == [0.0, 0.0]
    assert out["tiny"] == [["ops.full", ["underflow"]]]
