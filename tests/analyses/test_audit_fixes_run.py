"""Issue 38 item 3, the rest of the rule "a fix is shown only once the tool has run it and seen
it work": the findings whose old advice was never run (float64 end to end, a layer in float32,
an Input in float32, a LossScaleOptimizer) now get the change the audit ran on a copy, and
each test applies that change again with raw Keras, without the tool, and sees it work. A
change the audit cannot run (a custom layer's own code), or one it ran without seeing it work,
shows no fix: its proof says why. Small models, one audit each (in-process backend)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import layers

import dtype_explorer as dx
from tests.on_backend import json_on


def _clone(model, change):
    """``model`` cloned with ``change(layer, config)`` applied to each layer's config."""

    def clone(layer):
        return type(layer).from_config(change(layer, layer.get_config()))

    copy = keras.models.clone_model(model, clone_function=clone)
    copy.set_weights(model.get_weights())
    return copy


def _in_float32(*names):
    return lambda layer, config: {**config, "dtype": "float32"} if layer.name in names else config


def _numpy(x) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(x))


# ------------------------------------------------------------------ float64 data, a float32 model


def test_float64_data_gets_the_model_in_float64_and_raw_keras_keeps_every_digit():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, layers.Dense(2, name="d")(inputs), name="fun")
    x = np.array([[0.1, 1 / 3, 2.0**-30 + 1.0, 7.0]] * 2)  # float64 digits float32 drops
    [finding] = dx.check_model(model, x).by_kind("silent-downcast")
    proof = finding.proof
    assert proof.proven and proof.how == "model-dtype" and finding.fix == proof.change
    assert (proof.before.computes, proof.after.computes) == ("float32", "float64")
    assert 'keras.Input(shape=(4,), dtype="float64")' in finding.fix
    # the fix, as its code says, with raw Keras: every layer and the Input in float64
    fixed = keras.models.clone_model(
        model,
        input_tensors=keras.Input(shape=(4,), dtype="float64"),
        clone_function=lambda la: type(la).from_config({**la.get_config(), "dtype": "float64"}),
    )
    fixed.set_weights(model.get_weights())
    kernel, bias = (w.astype("float64") for w in model.get_weights())
    exact = x @ kernel + bias
    got, was = _numpy(fixed(x)), _numpy(model(x))
    assert got.dtype == np.float64 and np.abs(got - exact).max() < 1e-12
    assert was.dtype == np.float32 and np.abs(was - exact).max() > 1e-9


@pytest.mark.parametrize("times", [False, True], ids=["features", "unix-times"])
def test_float64_data_narrowed_is_measured_against_the_model_in_float64_as_raw_keras_runs_it(
    times,
):
    inputs = keras.Input((1,) if times else (4,))
    if times:
        out = layers.Normalization(mean=1733500000.0, variance=1.0, name="last")(inputs)
        x = np.array([[1733500000.123], [1733500001.456]])
    else:
        out = layers.Dense(3, name="last")(layers.Dense(8, activation="relu")(inputs))
        x = np.random.default_rng(0).random((4, 4))  # float64, as NumPy makes it
    model = keras.Model(inputs, out, name="m")
    report = dx.check_model(model, x)
    [finding] = report.by_kind("silent-downcast")
    last = report.damage[-1]
    assert (last.path, last.dtype, last.reference) == ("m/last", "float32", "float64")
    # raw Keras: the same model made again in float64 (its Input too, same weights)
    wide = keras.models.clone_model(
        model,
        input_tensors=keras.Input(shape=x.shape[1:], dtype="float64"),
        clone_function=lambda la: type(la).from_config({**la.get_config(), "dtype": "float64"}),
    )
    wide.set_weights(model.get_weights())
    ref, got = _numpy(wide(x)).ravel(), _numpy(model(x)).astype("float64").ravel()
    assert ref.dtype == np.float64
    rel = np.sqrt(np.mean((got - ref) ** 2)) / np.sqrt(np.mean(ref**2))
    assert last.rel_rms == pytest.approx(rel, rel=1e-6)
    assert last.max_abs_error == pytest.approx(np.abs(got - ref).max(), rel=1e-6)
    said = "Against the same model in float64, at its last layer's output (m/last): relative RMS"
    assert said in finding.message
    if times:  # the narrowing erased the times' differences: all of the output is error
        assert rel > 0.99 and "beyond float32's tolerance" in finding.message
    else:  # float32's rounding of features: within its tolerance, and said so
        assert rel < 1e-6 and "within float32's tolerance" in finding.message
    assert finding.proof.proven  # float64 end to end is still the fix, run on a copy


@pytest.mark.parametrize("training", [False, True], ids=["call", "training-call"])
def test_a_float64_audit_makes_the_model_in_float64_once_for_its_reference_and_its_fix(
    monkeypatch, training
):
    """The per-layer float64 reference and the float64 fix run the same copy (on a ResNet50
    each copy is most of a second); a call that trains gets two, since the reference's call
    moves the copy's BatchNormalization statistics."""
    from dtype_explorer.keras_run.model import _input_fix

    made = []
    real = _input_fix.cloned_with_weights

    def counted(model, clone, what, **kwargs):
        made.append(what)
        return real(model, clone, what, **kwargs)

    monkeypatch.setattr(_input_fix, "cloned_with_weights", counted)
    inputs = keras.Input((4,))
    hidden = layers.BatchNormalization(name="bn")(layers.Dense(8, name="d")(inputs))
    model = keras.Model(inputs, layers.Dense(3, name="last")(hidden), name="m")
    x = np.random.default_rng(0).random((4, 4))  # float64, as NumPy makes it
    report = dx.check_model(model, x, call_kwargs={"training": True} if training else None)
    [finding] = report.by_kind("silent-downcast")
    assert report.damage[-1].reference == "float64" and finding.proof.proven
    in_float64 = [w for w in made if w.endswith("in float64")]
    assert len(in_float64) == (2 if training else 1), made


JAX_FLOAT64 = """
import json, warnings
import numpy as np, keras
import dtype_explorer as dx
warnings.simplefilter("ignore")  # jax says it truncates float64: what is measured here
inputs = keras.Input((1,))
model = keras.Model(inputs, keras.layers.Normalization(mean=1733500000.0, variance=1.0,
                                                       name="norm")(inputs), name="m")
t = np.array([[1733500000.123], [1733500001.456]])  # unix times: float32 keeps 128 s steps
fixed = keras.models.clone_model(  # the fix the audit would show, run with raw Keras
    model,
    input_tensors=keras.Input(shape=(1,), dtype="float64"),
    clone_function=lambda la: type(la).from_config({**la.get_config(), "dtype": "float64"}),
)
fixed.set_weights(model.get_weights())
report = dx.check_model(model, t)
[finding] = report.by_kind("silent-downcast")
proof = finding.proof
print(json.dumps({
    "damage": len(report.damage), "notes": report.notes,
    "x64": bool(__import__("jax").config.jax_enable_x64),
    "raw_fixed": keras.ops.convert_to_numpy(fixed(t)).ravel().tolist(),
    "raw_model": keras.ops.convert_to_numpy(model(t)).ravel().tolist(),
    "fix": finding.fix, "proven": proof.proven, "how": proof.how,
    "after": [proof.after.finding, proof.after.received, proof.after.computes],
    "lines": proof.lines(),
}))
"""


def test_float64_data_on_jax_without_x64_gets_no_float64_fix_that_raw_keras_shows_fails():
    out = json_on("jax", JAX_FLOAT64)
    # raw Keras on jax (x64 off, its default): the model "in float64" still gets float32 data
    assert not out["x64"] and out["raw_fixed"] == out["raw_model"] == [0.0, 0.0]
    assert out["how"] == "model-dtype" and not out["proven"] and not out["fix"]
    assert out["after"] == [True, "float32", "float64"]  # measured: still narrowed
    summary, *rest = out["lines"]
    assert summary.endswith("and it did not clear the finding")
    assert any("m/norm still receives float32: the backend did not keep float64" in line
               for line in rest)  # fmt: skip
    # no float64 reference to measure the cost against: said, never a float32 one shown
    assert out["damage"] == 0 and any(
        n.startswith("No per-layer float64 reference: ValueError: its float64 copy computed in "
                     "float32 on this backend") for n in out["notes"]
    )  # fmt: skip


FLOAT32_INSIDE = """
import json, warnings
import numpy as np, keras
import dtype_explorer as dx
warnings.simplefilter("ignore")


@keras.saving.register_keras_serializable("t")
class Float32Inside(keras.layers.Layer):
    def call(self, x):  # float32 whatever its policy: no float64 copy computes in float64
        return keras.ops.cast(x, "float32") * 2.0


inputs = keras.Input((1,))
model = keras.Model(inputs, Float32Inside(name="f")(inputs), name="m")
t = np.array([[1733500000.123], [1733500001.456]])
wide = Float32Inside(dtype="float64")  # raw Keras: the layer in float64 still returns float32
report = dx.check_model(model, t)
print(json.dumps({
    "raw": keras.backend.standardize_dtype(wide(t).dtype),
    "damage": len(report.damage), "notes": report.notes,
}))
"""


def test_a_float64_copy_that_computes_in_float32_off_jax_names_no_jax_setting():
    out = json_on("tensorflow", FLOAT32_INSIDE)
    assert out["raw"] == "float32"  # raw Keras: this layer computes float32 in float64 too
    assert out["damage"] == 0 and out["notes"] == [
        "No per-layer float64 reference: ValueError: its float64 copy computed in float32 on "
        "this backend."
    ]  # the cause is the layer's, not a jax setting: none is named


FLOAT64_MODEL = """
import json, warnings
import numpy as np, keras
import dtype_explorer as dx
warnings.simplefilter("ignore")
keras.config.set_floatx("float64")  # the model built in float64, as a user would on jax too
inputs = keras.Input((1,))
dense = keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros", name="d")
model = keras.Model(inputs, dense(inputs), name="m")
keras.config.set_floatx("float32")
t = np.array([[1733500000.123], [1733500001.456]])
out = model(t)
report = dx.check_model(model, t)
print(json.dumps({
    "declared": dense.kernel.dtype,
    "held": keras.backend.standardize_dtype(dense.kernel.value.dtype),
    "out": keras.backend.standardize_dtype(out.dtype),
    "found": [[f.kind, f.path, f.message, f.fix, f.proof.proven if f.proof else None]
              for f in report.findings],
}))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_a_float64_model_that_computes_in_float32_is_said_where_raw_keras_holds_float32(backend):
    out = json_on(backend, FLOAT64_MODEL)
    assert out["declared"] == "float64"  # what Keras says of the variable, on both
    if backend == "tensorflow":  # float64 kept: nothing to say
        assert (out["held"], out["out"], out["found"]) == ("float64", "float64", [])
        return
    # raw Keras on jax (x64 off): the kernel holds float32, the output is float32
    assert (out["held"], out["out"]) == ("float32", "float32")
    [[kind, path, message, fix, proven]] = out["found"]
    assert (kind, path, fix, proven) == ("silent-downcast", "m/d", "", False)
    assert message.startswith(
        "Dense computes in float64 by its policy, yet it received float32 and returned float32: "
        "jax did not keep float64 (it holds float64 only with jax_enable_x64 set)"
    )


# ------------------------------------------------------------------ uint8 into a float layer


def test_uint8_into_conv1d_gets_a_float32_input_that_raw_keras_runs():
    inputs = keras.Input((8, 3), dtype="uint8")
    x = layers.Flatten()(layers.Conv1D(2, 3, name="conv")(inputs))
    model = keras.Model(inputs, layers.Dense(2, name="head")(x), name="images")
    pixels = np.full((2, 8, 3), 200, "uint8")
    [finding] = dx.check_model(model, pixels).by_kind("int-into-float-layer")
    assert finding.proof.proven and finding.proof.how == "input-dtype"
    assert (finding.proof.before.received, finding.proof.after.received) == ("uint8", "float32")
    assert finding.fix == finding.proof.change and 'dtype="float32"' in finding.fix
    fixed = keras.models.clone_model(model, input_tensors=keras.Input((8, 3), dtype="float32"))
    fixed.set_weights(model.get_weights())
    got = _numpy(fixed(pixels))
    reference = _numpy(fixed(pixels.astype("float32")))
    assert np.isfinite(got).all() and np.array_equal(got, reference)  # exact: 0..255 in float32
    conv = fixed.get_layer("conv")
    assert keras.backend.standardize_dtype(conv.input.dtype) == "float32"


# ------------------------------------------- ids into float16, a float32-only layer: one model


class Only32(layers.Layer):
    """A user's layer that takes float32 only (as a SavedModel signature does)."""

    def call(self, x):
        if keras.backend.standardize_dtype(x.dtype) != "float32":
            raise TypeError(f"Only32 takes float32, received {x.dtype}")
        return x * 2.0

    def compute_output_spec(self, x):
        return keras.KerasTensor(x.shape, dtype=self.compute_dtype)


@pytest.fixture(scope="module")
def mixed():
    """int32 ids into a float16 Dense ("ids": 2909 becomes 2908, then scaled by 2**-12), then
    a float32-only layer under mixed_float16 ("only": raises on float16), audited once."""
    inputs = keras.Input((2,), dtype="int32")
    scale = keras.initializers.Identity(gain=2.0**-12)  # out of float16's integers after it
    x = layers.Dense(2, dtype="mixed_float16", kernel_initializer=scale, name="ids")(inputs)
    x = Only32(dtype="mixed_float16", name="only")(x)
    model = keras.Model(inputs, layers.Dense(1, name="head")(x), name="m")
    sample = np.array([[2049, 2909]] * 2, "int32")
    return model, sample, dx.check_model(model, sample)


def test_ids_rounded_in_float16_get_that_layer_in_float32_and_raw_keras_keeps_them(mixed):
    model, sample, report = mixed
    [lost] = report.by_kind("precision-loss")
    assert lost.path == "m/ids" and lost.proof.proven and lost.proof.layers == ("m/ids",)
    assert (lost.proof.before.computes, lost.proof.after.computes) == ("float16", "float32")
    assert 'name="ids", dtype="float32"' in lost.fix
    fixed = _clone(model, _in_float32("ids", "only"))
    ids = fixed.get_layer("ids")
    kernel, bias = ids.get_weights()
    assert np.array_equal(_numpy(ids(sample)), sample.astype("float32") @ kernel + bias)
    half = _numpy(model.get_layer("ids")(sample))  # raw Keras in float16: 2909 became 2908
    assert half[0, 1] * 4096 == 2908.0


def test_a_float32_only_layer_gets_dtype_float32_and_raw_keras_runs_it(mixed):
    model, sample, report = mixed
    [only] = report.by_kind("float32-only-layer")
    assert only.proof.proven and only.proof.layers == ("m/only",)
    assert (only.proof.before.received, only.proof.after.received) == ("float16", "float32")
    assert 'Only32(..., name="only", dtype="float32")' in only.fix
    with pytest.raises(TypeError, match="float32"):
        model(sample)  # raw Keras: the model as built raises
    fixed = _clone(model, _in_float32("only"))
    assert np.isfinite(_numpy(fixed(sample))).all()


def test_one_combined_float32_set_covers_both_and_raw_keras_runs_it(mixed):
    model, sample, report = mixed
    combined = report.float32_set
    assert combined is not None and combined.proven
    assert set(combined.layers) == {"m/ids", "m/only"}
    assert {"precision-loss at m/ids", "float32-only-layer at m/only"} <= set(combined.covers)
    assert combined.before.findings >= 2 and combined.after.findings == 0
    assert "Keep these layers in float32" in str(report)
    assert "Keep these layers in float32" in report._repr_html_()
    fixed = _clone(model, _in_float32("ids", "only"))
    ids = fixed.get_layer("ids")
    assert ids.compute_dtype == fixed.get_layer("only").compute_dtype == "float32"
    assert np.isfinite(_numpy(fixed(sample))).all()


# ------------------------------------------------------------------ an autocast that lost values


def test_integers_an_autocast_rounds_get_the_layer_in_float32_and_a_note_gets_no_copy():
    inputs = keras.Input((4,))
    model = keras.Model(
        inputs,
        layers.Dense(1, dtype="mixed_float16", kernel_initializer="ones", name="d")(inputs),
        name="m",
    )
    counts = np.array([[2049.0, 2909.0, 5.0, 7.0]] * 2, "float32")  # float16 rounds two
    [lost] = [f for f in dx.check_model(model, counts).by_kind("lossy-cast") if f.path == "m/d"]
    assert lost.severity == "warning" and lost.loss.step == "autocast" and lost.loss.rounded == 4
    assert lost.proof.proven and 'name="d", dtype="float32"' in lost.fix
    assert _numpy(model(counts))[0, 0] != counts[0].sum()  # raw Keras: 2049 and 2909 rounded
    fixed = _clone(model, _in_float32("d"))
    assert _numpy(fixed(counts))[0, 0] == counts[0].sum()
    # a note (values made zero on the way in: a fact of float16's range) runs no copy
    tiny = np.full((2, 4), 1e-9, "float32")
    [note] = [f for f in dx.check_model(model, tiny).by_kind("lossy-cast") if f.path == "m/d"]
    assert note.severity == "info" and note.fix == ""
    assert "a note, not a fault" in note.proof.not_tried


# ------------------------------------------------------------------ loss scaling


def _compiled(name: str):
    inputs = keras.Input((4,))
    x = layers.Dense(1, dtype="mixed_float16", kernel_initializer="ones", name="d")(inputs)
    model = keras.Model(inputs, layers.Activation("linear", dtype="float32")(x), name=name)
    model.compile(optimizer="adam", loss="mse")
    return model


def test_float16_gradients_that_underflow_get_a_loss_scale_raw_keras_trains_with():
    """x = 1e-5 on a float16 Dense: each kernel gradient (about 8e-10) is zero in float16,
    so one unscaled step leaves the kernel where it was; a LossScaleOptimizer moves it."""
    model = _compiled("m")
    x, y = np.full((2, 4), 1e-5, "float32"), np.zeros((2, 1), "float32")
    [finding] = dx.check_model(model, x).by_kind("no-loss-scaling")
    proof = finding.proof
    assert proof.proven and proof.how == "loss-scale" and finding.fix == proof.change
    assert proof.before.underflowed == 4 and proof.after.underflowed == 0
    assert "LossScaleOptimizer(keras.optimizers.Adam())" in finding.fix
    moved = {}
    for scaled in (False, True):
        raw = _compiled(f"raw_{scaled}")
        raw.set_weights(model.get_weights())
        optimizer = keras.optimizers.Adam()
        if scaled:
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        raw.compile(optimizer=optimizer, loss="mse")
        raw.fit(x, y, batch_size=4, epochs=1, verbose=0)
        moved[scaled] = int((raw.get_layer("d").get_weights()[0] != 1.0).sum())
    assert moved == {False: 0, True: 4}  # raw Keras: only the scaled step trains the kernel


def _glorot(seed: int):
    return keras.initializers.GlorotUniform(seed=seed)


def _mixed_classifier(name: str):
    inputs = keras.Input((784,))
    x = layers.Dense(
        64, "relu", kernel_initializer=_glorot(1), dtype="mixed_float16", name="hidden"
    )(inputs)
    x = layers.BatchNormalization(dtype="mixed_float16", name="norm")(x)
    outputs = layers.Dense(
        10, "softmax", kernel_initializer=_glorot(2), dtype="mixed_float16", name="head"
    )(x)
    model = keras.Model(inputs, outputs, name=name)
    model.compile(optimizer="rmsprop", loss="sparse_categorical_crossentropy")
    return model


def test_a_loss_scale_that_skips_its_first_steps_is_judged_on_the_step_it_applies():
    """Its scale starts at 2**15: here the first scaled gradients overflow float16, and the
    LossScaleOptimizer skips those steps and halves its scale, as it is designed to. The proof
    ran one step and rejected it for that step's inf/NaN; it is now judged on the first step
    it applies, after the same skips raw Keras's LossScaleOptimizer makes."""
    model = _mixed_classifier("m")
    x = np.random.default_rng(0).random((4, 784)).astype("float32") * 1e-3
    y = np.zeros((4,), "int32")  # the targets the audit's steps use
    [finding] = dx.check_model(model, x).by_kind("no-loss-scaling")
    proof = finding.proof
    raw = _mixed_classifier("raw")
    raw.set_weights(model.get_weights())
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.RMSprop())
    raw.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    skipped = 0
    while int(optimizer.iterations) == 0 and skipped < 20:
        raw.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
        skipped += int(optimizer.iterations) == 0
    scale = float(_numpy(optimizer.dynamic_scale))
    assert 0 < skipped < 20  # raw Keras: steps skipped, then one applied
    assert proof.proven and finding.fix == proof.change
    assert (
        f"skipped {skipped} step(s)" in proof.tried[0] and f"scale to {scale:g}" in proof.tried[0]
    )
    assert proof.after.nonfinite_gradients == 0
    assert proof.after.underflowed < proof.before.underflowed


# ------------------------------------------------------------------ no change to run


def test_a_custom_layers_own_code_is_no_fix_the_audit_can_run():
    class Stubborn(layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(shape[-1],), dtype="float64", name="w")

        def call(self, x):
            return x * keras.ops.cast(self.w, x.dtype)

    inputs = keras.Input((4,))
    model = keras.Model(inputs, Stubborn(name="stubborn")(inputs), name="custom")
    [finding] = dx.check_model(model, np.ones((2, 4), "float32")).by_kind("custom-variable-dtype")
    assert finding.fix == "" and not finding.proof.proven
    assert "own code" in finding.proof.not_tried and "build()" in finding.proof.not_tried


# ------------------------------------------------------- positions a layer makes in float16

POSITIONS = """
import json, warnings
import numpy as np, keras
import dtype_explorer as dx
warnings.simplefilter("ignore")


class AddPositions(keras.layers.Layer):  # as a hand-written positional layer makes them
    def call(self, x):
        pos = keras.ops.arange(keras.ops.shape(x)[1], dtype=self.compute_dtype)
        return x + pos[None, :, None]


inputs = keras.Input((3000, 1))
model = keras.Model(inputs, AddPositions(dtype="mixed_float16", name="pos")(inputs), name="m")
x = np.zeros((1, 3000, 1), "float32")
[f] = dx.check_model(model, x).by_kind("lossy-cast")
fixed = keras.models.clone_model(  # the change the audit shows, run with raw Keras
    model, clone_function=lambda la: type(la).from_config({**la.get_config(), "dtype": "float32"})
)
print(json.dumps({
    "raw": keras.ops.convert_to_numpy(model(x)).astype("float64").ravel().tolist(),
    "fixed": keras.ops.convert_to_numpy(fixed(x)).astype("float64").ravel().tolist(),
    "found": [f.path, f.severity, f.loss.step, f.loss.where, f.loss.rounded,
              list(f.loss.first_index), f.message],
    "fix": f.fix, "proven": f.proof.proven,
}))
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_positions_a_float16_layer_makes_get_the_layer_in_float32_as_raw_keras_agrees(backend):
    out = json_on(backend, POSITIONS)
    # raw Keras: the layer adds 2048 at position 2049, and 476 positions are off
    raw = np.array(out["raw"])
    assert raw[2049] == 2048 and np.count_nonzero(raw != np.arange(3000)) == 476
    path, severity, step, where, rounded, first, message = out["found"]
    assert (path, severity, step, where, rounded, first) == (
        "m/pos", "warning", "creation", "ops.arange", 476, [2049],
    )  # fmt: skip
    assert message.startswith(
        "An array made from the numbers asked (ops.arange of AddPositions 'm/pos') lost values: "
        "float32 -> float16: 476 of 3000 integers rounded (2049 -> 2048"
    )
    # the fix shown was run on a copy; raw Keras with that change keeps every position
    assert out["proven"] and 'dtype="float32"' in out["fix"]
    assert out["fixed"] == list(range(3000))
