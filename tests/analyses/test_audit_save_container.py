"""Issue 39, item 13: ``mode="save"`` never reports the functional container's own policy
as a round-trip error. Raw Keras saves no dtype for a ``Functional`` (it loads under the
global policy) and the loaded model's outputs are the same dtypes and values: compared here
with the same model saved and loaded by raw Keras. And a bfloat16 output whose values change
in the round trip is compared (ml_dtypes' bfloat16 is NumPy's dtype kind 'V': the comparison
once skipped it and said 0). And a model whose own call raises (raw Keras refuses it too)
gets a report saying so in Keras's words, as mode "call" does, not Keras's exception."""

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


@keras.saving.register_keras_serializable(package="dx_test_save_bfloat16")
class _Scale(keras.layers.Layer):
    """Its ``factor`` set after construction is not in its config: not saved."""

    def __init__(self, factor=1.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor


def _scaled(dtype: str) -> keras.Model:
    inputs = keras.Input((4,))
    model = keras.Model(inputs, _Scale(3.0, dtype=dtype, name="scale")(inputs))
    model.get_layer("scale").factor = 5.0
    return model


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_16_bit_output_changed_by_the_round_trip_is_compared(tmp_path, dtype):
    x = np.arange(8, dtype="float32").reshape(2, 4)
    model = _scaled(dtype)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    raw_before, raw_after = model(x), loaded(x)
    assert keras.backend.standardize_dtype(raw_before.dtype) == dtype
    raw = np.abs(np.asarray(raw_before, "float64") - np.asarray(raw_after, "float64")).max()
    assert raw == 14.0  # raw Keras: 7 * 5 -> 7 * 3

    report = dx.check_model(_scaled(dtype), x, mode="save")
    keras_trip = next(t for t in report.roundtrip.trips if t.format == ".keras")
    assert keras_trip.loaded_output_dtypes == (dtype,)
    assert keras_trip.max_abs_difference == raw
    assert "roundtrip-values" in [f.kind for f in report.findings]


def _uint8_conv() -> keras.Model:
    inputs = keras.Input((8, 3), dtype="uint8")
    return keras.Model(inputs, keras.layers.Conv1D(2, 3, name="conv")(inputs))


def test_a_model_whose_own_call_raises_is_answered_not_raised():
    x = np.full((2, 8, 3), 7, "uint8")
    with pytest.raises(Exception) as raw:  # raw Keras: the model's own call raises
        _uint8_conv()(x)

    report = dx.check_model(_uint8_conv(), x, mode="save")
    said = report.roundtrip.call_error
    assert report.roundtrip.trips == () and said is not None
    assert said.type == type(raw.value).__name__
    assert said.message.split("\n")[0] in str(raw.value)
    found = [f for f in report.findings if f.kind == "call-error"]
    assert len(found) == 1 and "(Keras's error.)" in found[0].message
    assert "round trip not run: the model's own call" in str(report)
