"""Issue 38, item 3: an overflow's fix is run on a copy, and shown only when it clears the
overflow; the test re-runs the fix itself with raw Keras, without the tool."""

import numpy as np
import pytest

import dtype_explorer as dx

keras = pytest.importorskip("keras")

SAMPLE = np.full((2, 100), 1e3, "float32")  # a sum of 1e5 overflows float16 (65504)


def _model(dtypes: dict[str, str]):
    """Dense "big" sums 100 inputs of 1e3 (1e5); "next" passes it on; both mixed_float16
    unless ``dtypes`` says otherwise."""
    inputs = keras.Input((100,))
    x = keras.layers.Dense(
        4, kernel_initializer="ones", dtype=dtypes.get("big", "mixed_float16"), name="big"
    )(inputs)
    if "next" in dtypes:
        x = keras.layers.Dense(2, dtype=dtypes["next"], name="next")(x)
    return keras.Model(inputs, x, name="m")


def _finite(model) -> bool:
    return bool(np.isfinite(keras.ops.convert_to_numpy(model(SAMPLE))).all())


def test_a_dense_that_overflows_gets_a_fix_that_clears_it():
    model = _model({})
    assert not _finite(model)  # raw Keras: the overflow is real
    report = dx.check_model(model, SAMPLE)
    [overflow] = report.by_kind("overflow")
    assert overflow.details["proven"] is True
    assert overflow.details["float32_layers"] == ["big"]
    assert overflow.details["nonfinite_before"] > 0 and overflow.details["nonfinite_after"] == 0
    assert 'name="big", dtype="float32"' in overflow.fix
    # the fix, run by the test without the tool: the same weights, "big" in float32
    fixed = _model({"big": "float32"})
    fixed.set_weights(model.get_weights())
    assert _finite(fixed)


def test_advice_that_does_not_clear_it_is_not_shown():
    """Old code: "this layer in float32" for the layer that overflowed, never run; here its
    float32 output (1e5) overflows again on entry to the next float16 layer."""
    model = _model({"next": "mixed_float16"})
    assert not _finite(model)
    alone = _model({"big": "float32", "next": "mixed_float16"})
    alone.set_weights(model.get_weights())
    assert not _finite(alone)  # raw Keras: the one-layer advice does not fix it
    report = dx.check_model(model, SAMPLE)
    [overflow] = report.by_kind("overflow")
    assert overflow.details["float32_layers"] == ["big", "next"]
    assert overflow.details["proven"] is True
    both = _model({"big": "float32", "next": "float32"})
    both.set_weights(model.get_weights())
    assert _finite(both)  # the set it shows does
