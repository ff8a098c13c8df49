"""Issue 39, item 8: a loss or metric *instance* gets the value check its class name gets:
inf/NaN from finite values, and (a loss) the reference error against its config rebuilt in
a wider dtype. Each answer is compared with the same instance called by raw Keras here and on
the tensorflow backend's worker."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import dtype_explorer as dx

pytestmark = pytest.mark.timeout(600)


def test_a_loss_instance_is_value_checked_as_its_class_name_is():
    yt, yp = np.array([[0.0, 1.0]], "float32"), np.array([[0.2, 0.5]], "float32")
    raw = float(keras.losses.MeanSquaredError()(yt, yp))
    mine = dx.probe(keras.losses.MeanSquaredError(), values=[yt, yp])
    named = dx.probe("losses.MeanSquaredError", values=[yt, yp])
    assert mine.numerics is not None and named.numerics is not None
    assert mine.numerics.outputs[0].head[0] == pytest.approx(raw, rel=1e-6)
    assert mine.numerics.reference_dtype == named.numerics.reference_dtype
    assert mine.numerics.max_rel_error == pytest.approx(named.numerics.max_rel_error, abs=1e-9)


def test_a_float16_loss_instance_overflowing_is_flagged_as_raw_keras_overflows():
    """``BinaryCrossentropy(dtype="float16")`` on [[0.]] vs [[1.]]: raw Keras gives inf."""
    t, p = np.array([[0.0]], "float16"), np.array([[1.0]], "float16")
    raw = float(keras.losses.BinaryCrossentropy(dtype="float16")(t, p))
    got = dx.probe(
        keras.losses.BinaryCrossentropy(dtype="float16"), values=[t, p], backend="tensorflow"
    )
    assert got.ok and got.output_dtype == "float16"
    assert got.numerics is not None
    assert bool(got.numerics.nonfinite_from_finite) == (not np.isfinite(raw))
    assert "nonfinite" in [f.kind for f in got.numerics.findings]


def test_a_metric_instance_counts_inf_as_raw_keras_computes_it():
    """A metric's state is its own: no reference run, but its inf is counted."""
    x = np.array([60000.0, 60000.0], "float32")
    raw = float(keras.metrics.Mean(dtype="float16")(x))
    got = dx.probe(keras.metrics.Mean(dtype="float16"), values=[x])
    assert got.numerics is not None
    assert bool(got.numerics.nonfinite_from_finite) == (not np.isfinite(raw))
