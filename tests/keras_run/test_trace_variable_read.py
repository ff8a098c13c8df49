"""What reading a variable in another dtype lost (issue 38 item 1): a float32 kernel read as
float16 under a mixed policy (weights beyond 65504 become inf, tiny ones zero), measured at
the op that read it, and checked against raw Keras's own read of the variable inside its
``AutocastScope`` (in-process on this session's backend; on the four backends in a fresh
process each, the audit, ``dx.trace`` and its views beside the raw read and the raw output).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras.src.backend.common.variables import AutocastScope

from dtype_explorer.keras_run.trace._op_trace import op_trace
from tests.on_backend import json_on


def _variable(values, name):
    return keras.Variable(np.asarray(values, "float32"), name=name)


def _raw_read(variable, dtype="float16"):
    """Raw Keras: the variable as it reads inside an autocast scope of ``dtype``."""
    with AutocastScope(dtype):
        return np.asarray(keras.ops.convert_to_numpy(variable.value)).astype("float64")


def test_a_read_beside_a_scalar_operand_is_paired_with_its_own_variable():
    """Old patch: a scalar operand is an input entry with no value kept, so pairing the values
    with the entries in order gave the variable's value to the scalar's entry (no loss)."""
    big = _variable([1e5, 2.0, 1e-9], "big")
    with op_trace() as trace, AutocastScope("float16"):
        keras.ops.subtract(1.0, big)
    step = next(s for s in trace.steps() if s.op == "ops.subtract")
    assert [t.kind for t in step.inputs] == ["scalar", "variable"]
    raw = _raw_read(big)
    (loss,) = step.losses
    assert (loss.step, loss.where, loss.source, loss.target) == (
        "variable-read", "variable big", "float32", "float16",
    )  # fmt: skip
    assert loss.overflowed == int(np.isinf(raw).sum()) == 1
    assert loss.underflowed == int(((raw == 0) & (big.numpy() != 0)).sum()) == 1
    assert loss.examples[0] == (1e5, raw[0]) and loss.first_index == (0,)
    # the read made the inf: the op is not blamed for it
    assert not step.nonfinite and not step.float16_overflow
    assert "lost values: variable big: float32 -> float16: 1 of 3" in step.flag_text()


def test_every_variable_read_is_kept_and_each_is_measured_once_per_trace():
    a, b = _variable([7e4, 1.0], "a"), _variable([1.0, -9e4], "b")
    kept = _variable([1.0, 2.0], "kept")
    with op_trace() as trace, AutocastScope("float16"):
        keras.ops.add(a, b)
        keras.ops.multiply(a, kept)
    add, multiply = (s for s in trace.steps() if s.op in ("ops.add", "ops.multiply"))
    assert [x.where for x in add.losses] == ["variable a", "variable b"]
    assert [x.first_index for x in add.losses] == [(0,), (1,)]
    assert [x.examples[0][1] for x in add.losses] == [_raw_read(a)[0], _raw_read(b)[1]]
    # a's second read is the first one's measurement (no second conversion of the kernel);
    # the op it ran (one level down) reads the same variable: said once, on the step
    assert multiply.losses == (add.losses[0],) and multiply.losses[0] is add.losses[0]
    assert not any(c.losses for c in (*add.children, *multiply.children))


def test_a_read_that_keeps_its_values_or_is_not_autocast_is_no_loss():
    small = _variable([1.0, 2.5, 1e-3], "small")
    with op_trace() as trace, AutocastScope("float16"):
        keras.ops.add(small, 1.0)
    with op_trace() as plain:  # no autocast scope: read as stored
        keras.ops.add(_variable([1e5], "big"), 1.0)
    assert not [s for s in (*trace.steps(), *plain.steps()) if s.losses]


SCRIPT = r"""
import json, keras, numpy as np
from keras.src.backend.common.variables import AutocastScope
import dtype_explorer as dx

inputs = keras.Input((3,))
dense = keras.layers.Dense(2, dtype="mixed_float16", name="big")
model = keras.Model(inputs, dense(inputs), name="m")
kernel = np.full((3, 2), 0.5, "float32")
kernel[0, 0], kernel[2, 1] = 1e5, 1e-9
dense.kernel.assign(kernel)
x = np.ones((1, 3), "float32")
# raw Keras: the kernel as the layer reads it (inside its autocast scope), and its output
with AutocastScope(dense.compute_dtype):
    value = dense.kernel.value
    read = np.asarray(keras.ops.convert_to_numpy(value)).astype("float64")
raw_out = np.asarray(keras.ops.convert_to_numpy(model(x))).astype("float64")
report = dx.check_model(model, x)
call = next(c for c in report.layers if c.path == "m/big")
traced = dx.trace(lambda: dense(x))
print(json.dumps({
    "read_dtype": keras.backend.standardize_dtype(value.dtype),
    "inf": np.argwhere(np.isinf(read)).tolist(),
    "zero": np.argwhere((read == 0) & (kernel != 0)).tolist(),
    "read_00": None if np.isinf(read[0, 0]) else read[0, 0],
    "raw_inf": bool(np.isinf(raw_out).any()),
    "reads": [x.model_dump(mode="json") for x in call.losses if x.step == "variable-read"],
    "events": call.row()["events"],
    "overflow": [[f.message, f.step.op, f.details.get("cause"), f.loss.where]
                 for f in report.by_kind("overflow")],
    "lossy": [f.message for f in report.by_kind("lossy-cast")],
    "blamed": [s.op for s in call.trace if s.nonfinite or s.float16_overflow],
    "lost": [[s.op, s.flag_text()] for s in traced.lost_steps()],
    "headline": traced.headline(),
    "text": str(traced),
    "html": "lost values: variable kernel" in traced._repr_html_(),
}))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch", "numpy"])
def test_a_kernel_beyond_float16_is_lost_at_its_read_as_raw_keras_reads_it(backend):
    out = json_on(backend, SCRIPT)
    # raw Keras autocasts the read on this backend: 1e5 became inf, 1e-9 zero, the output inf
    assert out["read_dtype"] == "float16" and out["read_00"] is None and out["raw_inf"]
    assert out["inf"] == [[0, 0]] and out["zero"] == [[2, 1]]
    (read,) = out["reads"]
    assert (read["step"], read["where"], read["source"], read["target"]) == (
        "variable-read", "variable kernel", "float32", "float16",
    )  # fmt: skip
    assert read["overflowed"] == len(out["inf"]) and read["underflowed"] == len(out["zero"])
    assert read["first_index"] == out["inf"][0] and read["examples"][0] == [1e5, float("inf")]
    assert "lost reading variable kernel: float32 -> float16: 1 of 6" in out["events"]
    # the audit names the read as the overflow's cause, at the op that read it
    (overflow,) = out["overflow"]
    message, op, cause, where = overflow
    assert "reading the float32 variable kernel in float16 overflowed 1 weight" in message
    assert (op, cause, where) == ("ops.matmul", "variable-read", "variable kernel")
    assert out["lossy"] == [] and out["blamed"] == []  # counted once; the matmul not blamed
    # dx.trace: the step that read it, in the text and the card
    assert out["lost"] == [
        [
            "ops.matmul",
            "lost values: variable kernel: float32 -> float16: 1 of 6 finite values "
            "overflowed to inf (100000 -> inf; float16 holds at most 65504), first at [0, 0]; "
            "also 1 of 6 non-zero values underflowed to zero (float16's smallest normal is "
            "6.1e-05, its smallest subnormal 5.96e-08)",
        ]
    ]
    assert "values lost at 1 step(s) (first: ops.matmul, overflow)" in out["headline"]
    assert "!! lost values: variable kernel" in out["text"] and "first inf/NaN" not in out["text"]
    assert out["html"]
