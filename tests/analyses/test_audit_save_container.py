"""Issue 39, item 13: ``mode="save"`` never reports the functional container's own policy
as a round-trip error. Raw Keras saves no dtype for a ``Functional`` (it loads under the
global policy) and the loaded model's outputs are the same dtypes and values: compared here
with the same model saved and loaded by raw Keras."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import dtype_explorer as dx

pytestmark = pytest.mark.timeout(600)


def _built_under(policy: str) -> keras.Model:
    before = keras.config.dtype_policy().name
    keras.config.set_dtype_policy(policy)
    try:
        inp = keras.Input((3,))
        return keras.Model(inp, keras.layers.Dense(1, kernel_initializer="ones")(inp))
    finally:
        keras.config.set_dtype_policy(before)


def test_the_functional_containers_own_policy_is_no_roundtrip_error(tmp_path):
    model = _built_under("mixed_float16")
    x = np.ones((2, 3), "float32")
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    raw_before, raw_after = model(x), loaded(x)
    assert model.dtype_policy.name != loaded.dtype_policy.name  # not saved, raw Keras says
    assert keras.backend.standardize_dtype(raw_before.dtype) == "float16"
    assert raw_before.dtype == raw_after.dtype
    np.testing.assert_array_equal(np.asarray(raw_before), np.asarray(raw_after))

    report = dx.check_model(model, x, mode="save")
    assert [f for f in report.findings if f.kind.startswith("roundtrip")] == []
    keras_trip = next(t for t in report.roundtrip.trips if t.format == ".keras")
    assert keras_trip.outcome == "compared" and keras_trip.dtype_changes == ()
    assert keras_trip.output_dtypes == keras_trip.loaded_output_dtypes == ("float16",)
    assert keras_trip.max_abs_difference == 0.0
