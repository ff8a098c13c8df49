"""The values of 16-bit float steps as the op trace reads them (on their bits, not widened:
``float_bits.finite_peak``), on torch (bfloat16 read as its bits, a transposed view included) and
jax, against the same values read by raw Keras in a worker of that backend."""

from __future__ import annotations

import keras
import numpy as np

import dtype_explorer as dx

BACKENDS = ["torch", "jax"]


def half_steps():
    x = keras.ops.convert_to_tensor(np.array([[1.5, -3.0, 0.5], [0.25, 2.0, -7.0]], "float32"))
    b = keras.ops.cast(x, "bfloat16")
    doubled = keras.ops.multiply(b, 2.0)
    turned = keras.ops.transpose(doubled)  # a view of its input on torch: not contiguous
    h = keras.ops.cast(x, "float16")
    grown = keras.ops.exp(keras.ops.multiply(h, 8.0))  # e**16 is beyond float16's 65504
    return turned, grown


def raw_peaks():
    """What raw Keras holds at each step, widened by Keras itself: the largest magnitudes and
    whether the exp made inf."""
    turned, grown = half_steps()
    t = np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(turned, "float32")))
    g = np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(grown, "float32")))
    return float(np.abs(t).max()), bool(np.isinf(g).any()), float(np.abs(g[np.isfinite(g)]).max())


def test_half_float_steps_read_on_their_bits_equal_raw_keras():
    raw = {b: dx.pool.call(b, raw_peaks).result(timeout=600) for b in BACKENDS}
    compared = dx.trace(backend=BACKENDS)(half_steps)
    assert compared.statuses() == dict.fromkeys(BACKENDS, "ok")
    for backend, result in compared.results.items():
        turned_peak, grown_inf, grown_finite_peak = raw[backend]
        transpose = next(s for s in result.steps if s.op == "ops.transpose")
        assert transpose.outputs[0].dtype == "bfloat16" and not transpose.abstract, backend
        assert transpose.max_abs == turned_peak == 14.0, backend
        exp = next(s for s in result.steps if s.op == "ops.exp")
        assert exp.outputs[0].dtype == "float16" and not exp.abstract, backend
        assert grown_inf and exp.float16_overflow and exp.nonfinite, backend
        assert exp.max_abs == grown_finite_peak, backend
        multiply = next(s for s in result.steps if s.op == "ops.multiply")
        assert multiply.max_abs == 14.0 and not multiply.nonfinite, backend
