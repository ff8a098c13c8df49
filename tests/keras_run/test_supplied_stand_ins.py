"""What the tool says it supplied, and the stand-ins it declares with (issue 39 item 23),
beside raw Keras: a Python list given to an op is converted by the op itself (Keras makes an
int32 tensor of ``[1, 2]``, NumPy an int64 array), so the declared spec is taken on what Keras
makes of it; an op reads no dtype policy (raw Keras gives the same answer under another), so
no policy is listed as supplied; ``ops.eye`` takes Python numbers only, so no shape or sample."""

from __future__ import annotations

import keras
import numpy as np

import dtype_explorer as dx


def std(x) -> str:
    return keras.backend.standardize_dtype(x.dtype)


def test_a_python_list_is_declared_as_keras_converts_it():
    given = [[1, 2], np.array([3, 4], "int32")]
    raw = std(keras.ops.add(*given))
    r = dx.probe("ops.add", values=given)
    assert r.status == "ok", r.error
    assert r.output_dtype == raw
    assert r.declared_dtype == raw  # not the result of an int64 stand-in
    assert r.verdict != "declared-mismatch"


def test_an_op_lists_no_policy_as_supplied_as_it_reads_none():
    x = np.ones((2, 3), "float32")
    before = keras.config.dtype_policy()
    try:
        keras.config.set_dtype_policy("mixed_bfloat16")
        under_mixed = std(keras.ops.add(x, x))
    finally:
        keras.config.set_dtype_policy(before)
    assert under_mixed == std(keras.ops.add(x, x))  # raw Keras: the policy changes nothing
    r = dx.probe("ops.add")
    assert "policy" not in [s.part for s in r.supplied]
    assert {"input dtype", "shape", "sample"} <= {s.part for s in r.supplied}
    # a layer reads one: still listed
    assert "policy" in [s.part for s in dx.probe("Dense").supplied]


def test_ops_eye_lists_no_shape_or_sample_as_it_takes_no_tensor():
    raw = std(keras.ops.eye(3))  # Python numbers in, nothing to sample
    r = dx.probe("ops.eye")
    assert r.status == "ok", r.error
    assert r.output_dtype == raw
    parts = [s.part for s in r.supplied]
    assert "shape" not in parts and "sample" not in parts
