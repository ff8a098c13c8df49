"""Issue 23.5: a training step that fails for the model's own reasons (an XLA gradient dtype
mismatch on TensorFlow with ``jit_compile=True``, keras-team/keras#20931: the bilinear
``UpSampling2D`` gradient comes back float32 into a float16 ReLU) is the model's finding,
``call-error`` at the step, with TensorFlow's real cause whole; the labels are blamed only
when the step runs with labels fitting the outputs."""

import keras
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError, keras_message

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="jit_compile=True fit: TensorFlow's XLA"
)
CAUSE = "Seen floating point types of different precisions"


def _upsampling_model():
    saved = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = keras.Input((4, 4, 2))
        x = keras.layers.Conv2D(2, 1, activation="relu")(inputs)
        x = keras.layers.UpSampling2D(interpolation="bilinear")(x)
        x = keras.layers.Conv2D(2, 1, activation="relu")(x)
        out = keras.layers.Dense(1, dtype="float32")(keras.layers.Flatten()(x))
        model = keras.Model(inputs, out)
    finally:
        keras.config.set_dtype_policy(saved)
    model.compile(optimizer="adam", loss="mse", jit_compile=True)
    return model


X = np.ones((2, 4, 4, 2), "float32")
Y = np.zeros((2, 1), "float32")


def test_raw_keras_fails_the_step_with_an_xla_dtype_mismatch():
    with pytest.raises(Exception, match="Graph execution error") as raised:
        _upsampling_model().fit(X, Y, verbose=0)
    assert CAUSE in keras_message(str(raised.value)).splitlines()[0]


def test_the_models_own_error_is_a_finding_not_the_labels():
    """The old code raised "failed with the labels given ((2, 1) float32): InternalError: Graph
    execution error:." and cut the cause off."""
    model = _upsampling_model()
    before = [w.copy() for w in model.get_weights()]
    report = dx.check_model(model, X, mode="fit", labels=Y)
    (finding,) = report.by_kind("call-error")
    assert finding.path == model.name and finding.severity == "error"
    assert CAUSE in finding.message and "not the labels" in finding.message
    # issue 38 item 3: the fix is shown once the step ran on the copy compiled without XLA;
    # raw Keras, compiled so, trains
    assert finding.proof.proven and finding.proof.how == "jit-off"
    assert "jit_compile=False" in finding.fix and finding.fix == finding.proof.change
    raw = _upsampling_model()
    raw.compile(optimizer="adam", loss="mse", jit_compile=False)
    assert np.isfinite(raw.fit(X, Y, verbose=0).history["loss"][0])
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))


def test_without_labels_the_cause_is_shown_whole():
    """The old code said "raised where the eager training=True call ran: InternalError: Graph
    execution error:."."""
    (finding,) = dx.check_model(_upsampling_model(), X, mode="fit").by_kind("mode-divergence")
    assert CAUSE in finding.message
    assert finding.proof.proven and "jit_compile=False" in finding.fix  # run on the copy


def test_labels_keras_refuses_are_still_blamed():
    inputs = keras.Input((4,))
    dense = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    with pytest.raises(InvalidSpecError, match="failed with the labels given"):
        dx.check_model(dense, np.ones((2, 4), "float32"), mode="fit", labels=np.zeros((5, 7)))
