"""Issue 38, item 3: an overflow's fix is run on a copy, and shown only when it clears the
overflow; the test re-runs the fix itself with raw Keras, without the tool. Advice that was
not run (a subclassed model, another mode) is never shown as a fix: the proof says why."""

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
    proof = overflow.proof
    assert proof.proven and proof.how == "layer-dtype" and proof.layers == ("m/big",)
    assert proof.before.finding and proof.before.nonfinite > 0
    assert not proof.after.finding and proof.after.nonfinite == 0
    assert proof.before.dtype == "float16" and proof.after.dtype == "float32"
    assert proof.after.headroom_bits > proof.before.headroom_bits
    assert overflow.fix == proof.change and 'name="big", dtype="float32"' in overflow.fix
    # the fix, run by the test without the tool: the same weights, "big" in float32
    fixed = _model({"big": "float32"})
    fixed.set_weights(model.get_weights())
    assert _finite(fixed)
    # each view shows the fix with its before and after
    text, html = str(report), report._repr_html_()
    for shown in (text, html):
        assert proof.summary() in shown and "the finding is gone" in shown
    assert "fix:" in text and "dx-finding" in html


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
    assert overflow.proof.proven and overflow.proof.layers == ("m/big", "m/next")
    assert 'name="next", dtype="float32"' in overflow.fix
    both = _model({"big": "float32", "next": "float32"})
    both.set_weights(model.get_weights())
    assert _finite(both)  # the set it shows does
    # issue 38 item 3: the set is chosen from the measured ranges, not grown by re-runs: one
    # copy ran, and "next" is there because what it receives in float32 (big's 1e5) is
    # beyond float16's range
    assert len(overflow.proof.tried) == 1
    hidden = keras.Model(both.inputs, both.get_layer("big").output)
    peak = float(np.abs(keras.ops.convert_to_numpy(hidden(SAMPLE))).max())
    assert peak > 65504  # raw Keras: next's input cannot be float16
    assert "beyond float16's 65504" in overflow.proof.chosen_by["m/next"]
    # one combined set on the report, with before and after
    combined = report.float32_set
    assert combined is not None and combined.proven and combined.layers == ("m/big", "m/next")
    assert combined.before.nonfinite > 0 and combined.after.nonfinite == 0
    assert "Keep these layers in float32" in str(report)


class _Net(keras.Model):
    """A subclassed model: clone_model cannot copy it, and its Dense keeps its own dtype."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.big = keras.layers.Dense(
            4, kernel_initializer="ones", dtype="mixed_float16", name="big"
        )

    def call(self, x):
        return self.big(x)


def test_a_subclassed_model_shows_no_unproven_fix():
    net = _Net(name="net")
    assert not np.isfinite(keras.ops.convert_to_numpy(net(SAMPLE))).all()
    [overflow] = dx.check_model(net, SAMPLE).by_kind("overflow")
    assert overflow.fix == "" and not overflow.proof.proven
    assert overflow.proof.not_tried or overflow.proof.tried  # said why, or what ran
    assert "no fix shown" in overflow.proof.summary()


def test_other_modes_say_why_no_fix_was_run():
    [overflow] = dx.check_model(_model({}), SAMPLE, mode="training").by_kind("overflow")
    assert overflow.fix == "" and "mode 'call' only" in overflow.proof.not_tried
