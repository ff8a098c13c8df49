"""What a cast in the user's own code lost (issue 38 item 1): ``dx.trace`` measures each
``ops.cast`` and ``convert_to_tensor`` on its own values, and the pairs it reports are the
values raw Keras gives for the same code, untraced, on each backend (in a fresh process)."""

from __future__ import annotations

import pytest

from tests.on_backend import json_on

SCRIPT = r"""
import json, keras, numpy as np
import dtype_explorer as dx

def case():
    ids = keras.ops.convert_to_tensor(np.array([[19999, 2049, 5]], "int32"))
    as_half = keras.ops.cast(ids, "float16")
    big = keras.ops.cast(keras.ops.convert_to_tensor(np.array([3.0e5, 1.0], "float32")), "int16")
    return as_half, big

raw = [np.asarray(keras.ops.convert_to_numpy(v)).astype("float64").reshape(-1).tolist()
       for v in case()]
r = dx.trace(case)
lost = [s for s in r.steps if s.losses]
print(json.dumps({
    "raw": raw,
    "lost": [[s.op, x.cause, x.source, x.target, x.count, [list(e) for e in x.examples]]
             for s in lost for x in s.losses],
    "flags": [s.flag_text() for s in lost],
    "headline": r.headline(),
}))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch", "numpy"])
def test_each_lossy_cast_is_measured_as_raw_keras_gives_its_values(backend):
    out = json_on(backend, SCRIPT)
    half, big = out["raw"]
    # what raw Keras gives: 19999 and 2049 are not float16 integers; 3e5 is beyond int16
    assert half[:2] != [19999.0, 2049.0] and half[2] == 5.0
    rounded, clipped = out["lost"]
    assert rounded[:5] == ["ops.cast", "rounding", "int32", "float16", 3]
    assert rounded[5] == [[19999.0, half[0]], [2049.0, half[1]]]
    assert clipped[2:5] == ["float32", "int16", 2]
    assert clipped[5] == [[300000.0, big[0]]]
    # a saturating backend clips, a wrapping one wraps: the cause is the one its value shows
    assert clipped[1] == ("saturation" if big[0] == 32767 else "wrap")
    assert "lost values: int32 -> float16: 2 of 3 integers rounded" in out["flags"][0]
    assert "values lost at 2 step(s) (first: ops.cast, rounding)" in out["headline"]


def test_ids_wrapped_by_jax_conversion_are_named_at_that_step():
    out = json_on(
        "jax",
        r"""
import json, keras, numpy as np
import dtype_explorer as dx
ids = np.array([2**31 + 5, 7])
raw = np.asarray(keras.ops.convert_to_tensor(ids)).tolist()
r = dx.trace(lambda: keras.ops.convert_to_tensor(ids))
s = r.steps[0]
print(json.dumps({"raw": raw, "op": s.op, "cause": s.losses[0].cause,
                  "examples": [list(e) for e in s.losses[0].examples]}))
""",
    )
    assert out["raw"][0] != 2**31 + 5  # raw jax, x64 off: the id is not kept
    assert out["op"] == "ops.convert_to_tensor" and out["cause"] == "wrap"
    assert out["examples"] == [[float(2**31 + 5), float(out["raw"][0])]]
