"""The model audit on real Keras models (in-process backend: tensorflow, see conftest)."""

from __future__ import annotations

import concurrent.futures
import threading

import keras
import numpy as np
import pytest
from keras import layers, ops

import dtype_explorer as dx
from dtype_explorer import AuditReport, check_model
from dtype_explorer.errors import InvalidSpecError


def kinds(report: AuditReport) -> dict[str, list[str]]:
    """Finding kind -> the layer paths it was found at."""
    found: dict[str, list[str]] = {}
    for finding in report.findings:
        found.setdefault(finding.kind, []).append(finding.path)
    return found


def only(report: AuditReport, kind: str):
    [finding] = report.by_kind(kind)
    return finding


def row(report: AuditReport, path: str):
    [call] = [c for c in report.layers if c.path == path]
    return call


@pytest.fixture
def restore_policy():
    """Build a model under a global policy; the test's own setting is undone afterwards."""
    yield keras.config.set_dtype_policy
    keras.config.set_dtype_policy("float32")


def test_public_name_is_the_audit():
    assert dx.check_model is check_model
    assert dx.AuditReport is AuditReport


# ----------------------------------------------------------------------------- clean models


def test_clean_float32_model_has_no_findings_and_records_every_layer():
    inner = keras.Sequential(
        [layers.Dense(4, activation="relu", name="a"), layers.Dense(4, name="b")], name="inner"
    )
    inputs = keras.Input((6,), name="x")
    outputs = layers.Dense(3, activation="softmax", name="head")(
        inner(layers.Dense(4, name="stem")(inputs))
    )
    model = keras.Model(inputs, outputs, name="clean")

    report = check_model(model)

    assert report.findings == ()
    paths = ["clean", "clean/stem", "clean/inner", "clean/inner/a", "clean/inner/b", "clean/head"]
    assert [c.path for c in report.layers] == paths
    head = row(report, "clean/head")
    assert head.final_output and head.softmax
    assert [t.dtype for t in head.outputs] == ["float32"]
    assert head.variables["kernel"].stored == head.variables["kernel"].read == "float32"
    assert report.sample[0].shape == (2, 6) and report.sample[0].dtype == "float32"
    assert "no findings" in str(report)


def test_check_leaves_weights_policy_and_global_state_alone():
    model = keras.Sequential(
        [keras.Input((4,)), layers.Dense(3), layers.BatchNormalization(), layers.Dropout(0.5)]
    )
    weights = [w.copy() for w in model.get_weights()]
    policy, floatx = keras.config.dtype_policy().name, keras.config.floatx()
    original_dunder = keras.layers.Layer.__call__

    check_model(model, np.full((2, 4), 3.0), policy="mixed_float16")
    check_model(model)

    assert all(np.array_equal(a, b) for a, b in zip(weights, model.get_weights(), strict=True))
    assert model.dtype_policy.name == "float32" and all(
        layer.dtype_policy.name == "float32" for layer in model.layers
    )
    assert (keras.config.dtype_policy().name, keras.config.floatx()) == (policy, floatx)
    assert keras.layers.Layer.__call__ is original_dunder
    assert all("call" not in vars(layer) for layer in model._flatten_layers())


def gated_model(name: str) -> tuple[keras.Model, threading.Event, threading.Event]:
    """A model whose one layer, once built, says it is running and waits to be let go."""
    inside, go = threading.Event(), threading.Event()
    go.set()

    class Gate(layers.Layer):
        def call(self, x):
            inside.set()
            go.wait(60)
            return x

    model = keras.Sequential([keras.Input((2,)), Gate(name=name)])
    inside.clear()
    go.clear()
    return model, inside, go


def test_audits_in_two_threads_take_turns_and_leave_layer_call_alone():
    original_dunder = keras.layers.Layer.__call__
    first, first_inside, first_go = gated_model("first")
    second, second_inside, second_go = gated_model("second")
    with concurrent.futures.ThreadPoolExecutor(2) as threads:
        first_audit = threads.submit(check_model, first)
        assert first_inside.wait(60)
        second_audit = threads.submit(check_model, second)
        overlapped = second_inside.wait(2)  # it must wait for the first audit to end
        first_go.set()
        first_report = first_audit.result(60)
        second_go.set()
        second_report = second_audit.result(60)
    assert not overlapped
    assert keras.layers.Layer.__call__ is original_dunder
    assert [c.path.split("/")[-1] for c in first_report.layers][-1] == "first"
    assert [c.path.split("/")[-1] for c in second_report.layers][-1] == "second"


# ----------------------------------------------------------------------------- finding kinds


def test_silent_downcast_float64_into_float32_model():
    sequential = keras.Sequential([keras.Input((4,)), layers.Dense(2)], name="seq")
    inputs = keras.Input((4,))
    functional = keras.Model(inputs, layers.Dense(2)(inputs), name="fun")
    data = np.linspace(0, 1, 8).reshape(2, 4)  # float64

    seq_report = check_model(sequential, data)
    fun_report = check_model(functional, data)

    finding = only(seq_report, "silent-downcast")
    assert finding.path == "seq" and finding.severity == "warning"
    assert "float64" in finding.message and "float32" in finding.message
    # issue 38 item 3: the fix shown is the one the audit ran on a copy (the model in float64)
    assert finding.proof.proven and 'keras.Input(shape=(4,), dtype="float64")' in finding.fix
    assert row(seq_report, "seq").autocast == ("input 0: float64 → float32",)
    assert "keras.Input" in only(fun_report, "silent-downcast").message


def test_float64_model_fed_float64_is_not_a_downcast():
    model = keras.Sequential([keras.Input((4,), dtype="float64"), layers.Dense(2, dtype="float64")])
    report = check_model(model, np.ones((2, 4)))
    assert "silent-downcast" not in kinds(report)
    assert [t.dtype for t in report.layers[-1].outputs] == ["float64"]


def test_int_into_float_layer_conv1d_raises_on_tensorflow_and_the_fix_is_verified():
    inputs = keras.Input((8, 3), dtype="uint8")
    x = layers.Flatten()(layers.Conv1D(2, 3, name="conv")(inputs))
    model = keras.Model(inputs, layers.Dense(2)(x), name="images")

    report = check_model(model)

    finding = only(report, "int-into-float-layer")
    assert finding.path == "images/conv" and finding.severity == "error"
    assert "uint8" in finding.message and "Conv1D" in finding.message
    # issue 38 item 3: the fix shown is the one run on a copy (the Input in float32), not
    # the Rescaling advice of old code, which nothing ran
    assert finding.proof.proven and finding.proof.after.received == "float32"
    assert 'keras.Input(shape=(8, 3), dtype="float32")' in finding.fix
    conv = row(report, "images/conv")
    assert (
        conv.error is not None and conv.retried and [t.dtype for t in conv.outputs] == ["float32"]
    )
    assert report.layers[-1].outputs[0].dtype == "float32"  # the pass went on


def test_int_into_batchnormalization_that_works_here_is_a_warning():
    model = keras.Sequential(
        [
            keras.Input((28, 28), dtype="uint8"),
            layers.Flatten(name="flatten"),
            layers.BatchNormalization(name="bn"),
        ],
        name="mnist",
    )
    report = check_model(model)
    assert kinds(report) == {"int-into-float-layer": ["mnist/bn"]}
    assert only(report, "int-into-float-layer").severity == "warning"
    assert row(report, "mnist/flatten").outputs[0].dtype == "uint8"  # Flatten passes uint8 on


def test_embedding_indices_are_not_int_into_float():
    model = keras.Sequential(
        [keras.Input((5,), dtype="int32"), layers.Embedding(10, 4), layers.Dense(2)]
    )
    assert check_model(model).findings == ()


def test_float16_output_under_mixed_policy_and_its_fix(restore_policy):
    restore_policy("mixed_float16")
    bad = keras.Sequential(
        [keras.Input((4,)), layers.Dense(8), layers.Dense(3, activation="softmax", name="probs")],
        name="bad",
    )
    good = keras.Sequential(
        [
            keras.Input((4,)),
            layers.Dense(8),
            layers.Dense(3, activation="softmax", dtype="float32"),
        ],
        name="good",
    )
    restore_policy("float32")

    finding = only(check_model(bad), "float16-output")
    assert finding.path == "bad/probs" and "float16" in finding.message
    # measured against the same model in float32, and no fix shown that was not run
    assert "Against the same model in float32: relative RMS error" in finding.message
    assert finding.fix == "" and "within_tolerance" in finding.details
    assert check_model(good).findings == ()


def test_a_bfloat16_output_is_named_bfloat16_where_the_float16_output_kind_is_shown(
    restore_policy,
):
    """The kind (API) names the 16-bit floats after float16; a bfloat16 output's summary lines
    read 'float16-output' alone: they now say the dtype raw Keras returns."""
    restore_policy("mixed_bfloat16")
    model = keras.Sequential(
        [keras.Input((4,)), layers.Dense(3, activation="softmax", name="probs")], name="bf"
    )
    restore_policy("float32")
    x = np.linspace(-2, 2, 8, dtype="float32").reshape(2, 4)
    raw = keras.backend.standardize_dtype(model(x).dtype)
    assert raw == "bfloat16"
    report = check_model(model, x)
    finding = only(report, "float16-output")
    assert f"the model's output is {raw} (from Dense)" in finding.message
    assert finding.heading() == f"float16-output ({raw})"
    assert f"float16-output ({raw}) at bf/probs" in str(report)
    assert f"<code>float16-output ({raw})</code>" in report._repr_html_()
    assert f"info: float16-output ({raw}) at bf/probs" in report.as_code().script


def test_policy_option_audits_a_clone_under_that_policy():
    model = keras.Sequential([keras.Input((4,)), layers.Dense(3, name="out")], name="plain")
    report = check_model(model, policy="mixed_float16")
    assert report.policy_override == "mixed_float16"
    out = row(report, "plain/out")
    assert out.compute_dtype == "float16" and out.variables["kernel"].stored == "float32"
    assert out.variables["kernel"].read == "float16"
    assert kinds(report) == {"float16-output": ["plain/out"]}
    assert model.layers[0].dtype_policy.name == "float32"


@pytest.fixture(scope="module")
def float32_saved_model(tmp_path_factory):
    """A SavedModel whose serving signature takes float32 only (scenario 5)."""
    import tensorflow as tf

    class Pretrained(tf.Module):
        def __init__(self):
            self.w = tf.Variable(tf.ones((4, 3)))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def serve(self, x):
            return {"features": tf.matmul(x, self.w)}

    module = Pretrained()
    path = str(tmp_path_factory.mktemp("saved") / "pretrained")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    return path


def _tfsm_model(path: str, *, fixed: bool):
    dtype = "float32" if fixed else None
    inputs = keras.Input((4,))
    x = layers.Dense(4, name="adapter")(inputs)
    features = layers.TFSMLayer(
        path, call_endpoint="serving_default", name="pretrained", dtype=dtype
    )(x)["features"]
    outputs = layers.Dense(3, activation="softmax", name="classifier", dtype=dtype)(features)
    return keras.Model(inputs, outputs, name="transfer")


def test_float32_only_savedmodel_under_mixed_float16(float32_saved_model, restore_policy):
    restore_policy("mixed_float16")
    model = _tfsm_model(float32_saved_model, fixed=False)
    restore_policy("float32")

    report = check_model(model)

    assert kinds(report) == {
        "float32-only-layer": ["transfer/pretrained"],
        "float16-output": ["transfer/classifier"],
    }
    finding = only(report, "float32-only-layer")
    assert (
        finding.severity == "error"
        and "TFSMLayer" in finding.message
        and "float16" in finding.message
    )
    # issue 38 item 3: the fix, the layer in float32, was run on a copy and cleared the finding
    # (the copy remakes the user's own live TFSMLayer outside Keras's safe mode, which refuses
    # its config); the next test builds it that way with raw Keras
    proof = finding.proof
    assert proof.proven and proof.layers == ("transfer/pretrained",)
    assert proof.before.finding and not proof.after.finding
    assert 'TFSMLayer(..., name="pretrained", dtype="float32")' in finding.fix
    # raw Keras: the model as built fails in the SavedModel, which takes float32 only
    with pytest.raises(Exception, match="float") as raised:
        model(np.ones((2, 4), "float32"))
    assert type(raised.value).__module__.startswith(("tensorflow", "keras")), raised.value
    assert row(report, "transfer/pretrained").outputs[0].dtype == "float32"


def test_the_proposed_savedmodel_fix_clears_the_findings(float32_saved_model, restore_policy):
    restore_policy("mixed_float16")
    model = _tfsm_model(float32_saved_model, fixed=True)
    restore_policy("float32")
    report = check_model(model)
    assert report.findings == ()
    assert row(report, "transfer/pretrained").autocast == ("input 0: float16 → float32",)


class Scale(layers.Layer):
    """Scenario 4 done right: variables follow the policy."""

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1],), initializer="ones", name="w")

    def call(self, x):
        return x * self.w


class Stubborn(layers.Layer):
    """Creates a float16 variable and computes in float32, whatever its policy says."""

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1],), initializer="ones", dtype="float16")

    def call(self, x):
        return ops.cast(x, "float32") * ops.cast(self.w, "float32")


def test_custom_layer_against_its_policy(restore_policy):
    restore_policy("mixed_float16")
    model = keras.Sequential(
        [
            keras.Input((4,)),
            Scale(name="scale"),
            Stubborn(name="stubborn"),
            layers.Dense(2, dtype="float32"),
        ],
        name="custom",
    )
    restore_policy("float32")

    report = check_model(model)

    assert kinds(report) == {"custom-variable-dtype": ["custom/stubborn"]}
    message = only(report, "custom-variable-dtype").message
    assert "stored as float16" in message and "returns float32" in message
    scale = row(report, "custom/scale")  # scenario 4: float16 in, float32 stored, float16 read
    assert scale.received[0].dtype == "float16"
    assert (scale.variables["w"].stored, scale.variables["w"].read) == (
        "float32",
        "float16",
    )


def overflowing_net() -> keras.Model:
    """A float16 Dense whose weights (1000) overflow float16 on inputs of 100."""
    return keras.Sequential(
        [
            keras.Input((8,)),
            layers.Dense(
                4,
                kernel_initializer=keras.initializers.Constant(1000.0),
                dtype="mixed_float16",
                name="big",
            ),
            layers.Dense(1, dtype="float32"),
        ],
        name="net",
    )


def test_overflow_in_float16_compute_and_on_entry():
    model = overflowing_net()
    inside = only(check_model(model, np.full((2, 8), 100.0, "float32")), "overflow")
    entry = only(check_model(model, np.full((2, 8), 1e6, "float32")), "overflow")
    assert inside.path == entry.path == "net/big" and inside.severity == "error"
    assert "computing in float16" in inside.message
    assert "on entry" in entry.message
    assert "overflow" not in kinds(check_model(model, np.full((2, 8), 1.0, "float32")))


def test_no_loss_scaling_when_only_the_layers_are_mixed(restore_policy):
    layers_mixed = keras.Sequential(
        [
            keras.Input((4,)),
            layers.Dense(4, dtype="mixed_float16"),
            layers.Dense(1, dtype="float32"),
        ],
        name="m",
    )
    layers_mixed.compile(optimizer="adam", loss="mse")
    restore_policy("mixed_float16")
    model_mixed = keras.Sequential(
        [keras.Input((4,)), layers.Dense(4), layers.Dense(1, dtype="float32")]
    )
    model_mixed.compile(optimizer="adam", loss="mse")
    restore_policy("float32")

    finding = only(check_model(layers_mixed), "no-loss-scaling")
    # issue 38 item 3: one fit step with and without loss scaling ran on copies; no gradient
    # underflowed on this sample, so the LossScaleOptimizer was not seen to work: no fix
    assert finding.path == "m" and finding.fix == ""
    assert finding.proof.before.underflowed == 0 and "not seen to work" in finding.proof.summary()
    assert "no-loss-scaling" not in kinds(check_model(model_mixed))


@pytest.mark.slow
def test_backend_divergence_through_the_pool():
    inputs = keras.Input((8, 3), dtype="uint8")
    model = keras.Model(inputs, layers.Conv1D(2, 3, name="conv")(inputs), name="images")

    report = check_model(model, backends=["jax"], timeout=300)  # cold workers on a busy machine

    finding = only(report, "backend-divergence")
    assert finding.path == "images/conv" and finding.severity == "error"
    assert finding.details["jax"] == "returns float32"
    assert finding.details["tensorflow"].startswith("raises")
    assert report.backends == ("jax",)
    # issue 38 item 3: the cast is shown once the layer, re-probed with its input cast on each
    # backend, returned one dtype everywhere; raw Keras here, given the input cast, agrees
    proof = finding.proof
    assert proof.proven and proof.how == "backend-cast" and proof.input_dtype == "float32"
    assert finding.fix == proof.change
    assert finding.fix.startswith('x = keras.ops.cast(x, "float32")')
    x = keras.ops.cast(np.ones((2, 8, 3), "uint8"), "float32")
    raw = keras.backend.standardize_dtype(layers.Conv1D(2, 3)(x).dtype)
    assert proof.after.outcomes == {"tensorflow": f"returns {raw}", "jax": f"returns {raw}"}


def test_a_dict_sample_is_routed_by_input_name_as_keras_routes_it():
    """Inputs named in an order that is not sorted: Keras takes {name: array}; so must the audit
    (it used to sort the keys and match them by position, refusing a sample Keras accepts)."""
    b, a = keras.Input((3,), name="b"), keras.Input((5,), name="a")
    joined = layers.Concatenate()([layers.Dense(2, name="from_b")(b), layers.Dense(2)(a)])
    model = keras.Model([b, a], joined, name="two")
    sample = {"a": np.ones((2, 5), "float64"), "b": np.ones((2, 3), "float32")}
    assert tuple(model(sample).shape) == (2, 4)  # Keras itself accepts it
    report = check_model(model, sample)
    assert row(report, "two/from_b").given[0].dtype == "float32"  # b's array reached b
    assert only(report, "silent-downcast").details["from"] == "float64"  # a's float64, cast
    with pytest.raises(InvalidSpecError, match="input names"):
        check_model(model, {"a": sample["a"], "c": sample["b"]})


def test_string_inputs_get_a_sample_when_none_is_given():
    words = keras.Input((1,), dtype="string", name="words")
    model = keras.Model(words, layers.StringLookup(vocabulary=["red", "green"])(words))
    report = check_model(model)  # this session's backend is TensorFlow: strings are tensors
    assert [t.dtype for t in report.sample] == ["string"]
    assert report.layers[-1].outputs[0].dtype == "int64"


def test_a_default_sample_too_large_is_refused_as_a_probe_shape_is():
    # 6,000,000 elements: past the limit, yet small enough that building it would not hurt
    inputs = keras.Input((3000, 1000), name="long")
    model = keras.Model(inputs, layers.GlobalAveragePooling1D()(inputs))
    assert model.outputs[0].shape == (None, 1000)  # raw Keras: built, nothing allocated
    with pytest.raises(InvalidSpecError) as refused_probe:
        dx.probe("GlobalAveragePooling1D", input_dtype="float32", shape=(2, 3000, 1000))
    limit = str(refused_probe.value).rsplit("the limit is ", 1)[1]
    with pytest.raises(InvalidSpecError) as refused:
        check_model(model)
    said = str(refused.value)
    assert "'long'" in said and "(2, 3000, 1000), holds 6000000 elements" in said
    assert f"the limit is {limit}. Pass a sample: check_model(model, sample=x)" in said
    assert model.outputs[0].shape == (None, 1000)


def test_backends_all_means_every_installed_and_allowed_backend(monkeypatch):
    """As on Binder, where torch is not installed: "all" asks only the backends there are."""
    from dtype_explorer import pool

    monkeypatch.setitem(pool._config, "backends", ["jax", "tensorflow"])
    inputs = keras.Input((3,))
    model = keras.Model(inputs, layers.Dense(2)(inputs), name="plain")
    assert check_model(model, backends="all").backends == ("jax", "tensorflow")
    with pytest.raises(InvalidSpecError, match="installed and allowed"):
        check_model(model, backends=["torch"])


# ----------------------------------------------------------------------------- structure


class Block(layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.first = layers.Dense(4, name="first")
        self.second = layers.Dense(4, name="second")

    def call(self, x):
        return self.second(self.first(x)) + x


class Net(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.block = Block(name="block")
        self.head = keras.Sequential([layers.Dense(3), layers.Softmax(name="softmax")], name="head")

    def call(self, x):
        return self.head(self.block(x))


def test_subclassed_model_with_layers_inside_layers():
    model = Net(name="net")
    report = check_model(model, np.ones((2, 4), "float32"))
    paths = [c.path for c in report.layers]
    assert paths[:4] == ["net", "net/block", "net/block/first", "net/block/second"]
    assert "net/head/softmax" in paths
    assert row(report, "net/head/softmax").final_output
    assert report.findings == ()


def test_report_round_trips_and_renders():
    model = keras.Sequential([keras.Input((4,)), layers.Dense(2, name="dense")], name="tiny")
    report = check_model(model, np.ones((2, 4)))
    assert AuditReport.from_json(report.to_json()) == report
    frame = report.to_frame()
    assert list(frame["path"]) == ["tiny", "tiny/dense"] and frame.loc[0, "given"] == "float64"
    assert list(report.to_frame("findings")["kind"]) == ["silent-downcast"]
    html = report._repr_html_()
    assert (
        "<table" in html and "silent-downcast" in html and "in_float64" in html and "--jp-" in html
    )
    text = str(report)
    assert "silent-downcast at tiny" in text and "float64" in text


# ----------------------------------------------------------------------------- bad use


def test_not_a_keras_model():
    with pytest.raises(InvalidSpecError, match="needs a Keras model or layer"):
        check_model(np.ones(3))


def test_sample_that_does_not_fit_names_the_expected_input():
    model = keras.Sequential([keras.Input((4,), name="features"), layers.Dense(2)])
    with pytest.raises(InvalidSpecError, match=r"expected shape \(batch, 4\)"):
        check_model(model, np.ones((2, 5)))
    with pytest.raises(InvalidSpecError, match="takes 1 input"):
        check_model(model, [np.ones((2, 4)), np.ones((2, 4))])


def test_dict_sample_must_have_the_input_names():
    a, b = keras.Input((3,), name="a"), keras.Input((2,), name="b")
    model = keras.Model({"a": a, "b": b}, layers.Concatenate()([a, b]))
    assert check_model(model, {"a": np.ones((2, 3)), "b": np.ones((2, 2))}).layers
    with pytest.raises(InvalidSpecError, match=r"expected keys \['a', 'b'\]; got \['a'\]"):
        check_model(model, {"a": np.ones((2, 3))})


def test_subclassed_model_needs_a_sample_and_a_fitting_one():
    model = Net()
    said = r"\(a subclassed model\); pass a sample: check_model\(model, sample=x\)$"
    with pytest.raises(InvalidSpecError, match=said):
        check_model(model)
    check_model(model, np.ones((2, 4), "float32"))
    with pytest.raises(InvalidSpecError, match="does not fit"):
        check_model(model, np.ones((2, 5), "float32"))


def test_bad_policy_and_backend_and_unclonable_model():
    model = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
    with pytest.raises(InvalidSpecError, match="mixed_float16"):
        check_model(model, policy="mixed_flaot16")
    with pytest.raises(InvalidSpecError, match="backend"):
        check_model(model, backends=["jaxx"])
    # a subclassed model is made again from its config under the policy, as raw Keras
    # builds it under that global policy (issue 39 item 15; it was refused)
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        raw = Net()
    finally:
        keras.config.set_dtype_policy(before)
    x = np.ones((2, 4), "float32")
    raw(x)
    report = check_model(Net(), x, policy="mixed_float16")
    assert report.policy_override == "mixed_float16"
    nested = raw._flatten_layers(include_self=False, recursive=True)
    expected = {(type(layer).__name__, layer.compute_dtype) for layer in nested}
    audited = {(c.layer_class, c.compute_dtype) for c in report.layers if c.depth}
    assert audited == expected - {("InputLayer", "float32")}
    assert any("made again from its config" in n for n in report.notes)


# ------------------------------------------------- the op and the line (the op trace)


class _HiddenOverflow(layers.Layer):
    def call(self, x):
        y = ops.exp(x)  # AUDIT-MARK: overflows float16 for x > 11
        return ops.tanh(y)


def test_findings_name_the_op_and_the_line_where_the_problem_first_appears(restore_policy):
    from pathlib import Path

    model = overflowing_net()
    inside = only(check_model(model, np.full((2, 8), 100.0, "float32")), "overflow")
    assert inside.step.op == "ops.matmul" and inside.step.first_nonfinite
    assert inside.step.source.file.endswith("keras/src/layers/core/dense.py")
    assert f"First at ops.matmul (keras/src/layers/core/dense.py:{inside.step.source.line}" in (
        inside.message
    )
    entry = only(check_model(model, np.full((2, 8), 1e6, "float32")), "overflow")
    assert entry.step.op == "backend.cast" and entry.step.float16_overflow
    assert entry.step.source.file.endswith("dtype_policies/dtype_policy.py")
    # the audit card links the line at the installed Keras version
    card = check_model(model, np.full((2, 8), 1e6, "float32"))._repr_html_()
    assert f"href='{entry.step.source.url}'" in card and "first at <code>backend.cast" in card
    # a user's op that overflows although a later op hides it: that line of this file
    line = next(
        i
        for i, text in enumerate(Path(__file__).read_text().splitlines(), 1)
        if "# AUDIT-MARK:" in text
    )
    x = keras.Input((2,))
    hidden = keras.Model(x, _HiddenOverflow(dtype="mixed_float16", name="hide")(x), name="m")
    found = only(check_model(hidden, np.array([[3.0, 12.0], [1.0, 2.0]], "float32")), "overflow")
    assert found.path == "m/hide" and "a later op hid it" in found.message
    assert found.step.op == "ops.exp" and found.step.source.file == __file__
    assert found.step.source.line == line
    # silent downcast: the autocast cast in Keras's dtype policy
    seq = keras.Sequential([keras.Input((4,)), layers.Dense(2)], name="seq")
    down = only(check_model(seq, np.linspace(0, 1, 8).reshape(2, 4)), "silent-downcast")
    assert down.step.op == "backend.cast" and "downcast" in down.step.conversions
    assert "First at backend.cast (keras/src/dtype_policies/dtype_policy.py:" in down.message
    # float16 output: where the last layer's float16 output is made
    restore_policy("mixed_float16")
    bad = keras.Sequential(
        [keras.Input((4,)), layers.Dense(8), layers.Dense(3, activation="softmax", name="probs")],
        name="bad",
    )
    restore_policy("float32")
    out16 = only(check_model(bad), "float16-output")
    assert out16.step is not None and out16.step.outputs[0].dtype == "float16"
    # its input arrived in float16 (from the Dense before): the op that made the output
    assert f"It arrived in float16; made by {out16.step.op} (" in out16.message
    report = check_model(bad)
    assert AuditReport.from_json(report.to_json()) == report
    assert all(c.trace for c in report.layers)


@pytest.mark.parametrize("mode", ["call", "fit"])
def test_an_unbuilt_sequential_is_audited_as_its_first_call_builds_it(mode):
    # keras.Sequential([...]) with no keras.Input, as most bug reports write it: its first
    # call builds its graph on KerasTensors inside the audited call, which the recorder had
    # read as values ("the sample does not fit ...: A KerasTensor is symbolic")
    def unbuilt() -> keras.Sequential:
        model = keras.Sequential([layers.Dense(1, activation="tanh", dtype="float16")])
        model.compile(optimizer="sgd", loss=keras.losses.BinaryCrossentropy())
        return model

    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    y = np.array([[0], [1], [1], [0]])
    model = unbuilt()
    report = check_model(model, x, mode=mode, labels=y if mode == "fit" else None)
    raw = unbuilt()
    expected = keras.backend.standardize_dtype(raw(x).dtype)
    assert [(c.layer_class, c.outputs[0].dtype) for c in report.layers] == [
        ("Sequential", expected),
        ("Dense", expected),
    ]
    assert any("was not built; the audit built it" in n for n in report.notes)
    # built as its own first call builds it: it still trains on another batch size
    assert "loss" in model.fit(np.ones((5, 2)), np.ones((5, 1)), epochs=1, verbose=0).history
    if mode == "fit":
        assert "loss" in raw.fit(x, y, epochs=1, verbose=0).history
        assert {g.dtype for g in report.fit.gradients} == {"float16"}


def _seeded_draws(audit) -> list:
    """What a seeded session draws next (a layer's initial kernel: Python's random seeds its
    initializer; an unseeded random op: Keras's seed generator; NumPy's global stream), after
    ``audit`` ran on the model it built."""
    import random

    keras.utils.set_random_seed(1)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, layers.Dense(2, name="d")(inputs))
    model.compile(optimizer="sgd", loss="mse")
    audit(model)
    following = layers.Dense(3)
    following.build((None, 4))
    return [
        keras.ops.convert_to_numpy(following.kernel).tolist(),
        keras.ops.convert_to_numpy(keras.random.uniform((3,))).tolist(),
        random.random(),
        np.random.rand(),
    ]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"mode": "save"},
        {"mode": "fit"},
        {"quantize": "int8"},
        {"policy": "mixed_bfloat16"},
    ],
)
def test_an_audit_leaves_a_seeded_sessions_random_streams_as_they_were(options):
    # keras.utils.set_random_seed(1) makes a run reproducible; the audits that build layers (a
    # save's load, a quantized copy, a policy's clone) took seeds from Python's random and
    # Keras's seed generator, so the user's next layer got other weights than without them
    x = np.ones((2, 4), "float32")
    raw = _seeded_draws(lambda model: None)
    assert _seeded_draws(lambda model: check_model(model, x, **options)) == raw
    assert _seeded_draws(lambda model: dx.probe("Dense", kwargs={"units": 2})) == raw


def test_code_traced_under_the_tools_settings_keeps_the_users_own_draws():
    # dx.trace(policy=...) sets the policy for the user's code and puts it back: the random
    # streams the code drew from are the user's, and stay where the code left them
    import random

    def draws() -> list:
        return [random.random(), np.random.rand(), random.random()]

    random.seed(3), np.random.seed(3)
    raw = draws()
    random.seed(3), np.random.seed(3)
    with dx.trace(policy="mixed_float16"):
        first = [random.random(), np.random.rand()]
    assert [*first, random.random()] == raw  # not rewound after the block


def test_a_fit_audit_on_torch_leaves_torchs_own_stream_as_it_was():
    from on_backend import json_on

    script = (
        "import json, keras, numpy as np, torch\n"
        "import dtype_explorer as dx\n"
        "def drawn(audit):\n"
        "    keras.utils.set_random_seed(0)\n"
        "    inputs = keras.Input((4,))\n"
        "    dropped = keras.layers.Dropout(0.5)(inputs)\n"
        "    model = keras.Model(inputs, keras.layers.Dense(2)(dropped))\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
        "    if audit:\n"
        "        dx.check_model(model, np.ones((2, 4), 'float32'), mode='fit')\n"
        "        dx.check_model(model, np.ones((2, 4), 'float32'), mode='training')\n"
        "    return torch.rand(3).tolist()\n"
        "print(json.dumps([drawn(False), drawn(True)]))\n"
    )
    raw, audited = json_on("torch", script)
    assert audited == raw


def test_a_dataset_given_as_the_sample_is_told_to_pass_one_batch():
    import tensorflow as tf  # this session's backend (conftest)

    inputs = keras.Input((4,))
    model = keras.Model(inputs, layers.Dense(2)(inputs))
    data = tf.data.Dataset.from_tensor_slices((np.ones((8, 4), "float32"), np.ones((8, 2)))).batch(
        4
    )
    with pytest.raises(InvalidSpecError, match=r"the sample is a tf\.data\.Dataset") as refused:
        check_model(model, data)
    assert "next(iter(dataset))" in str(refused.value)
    x, y = next(iter(data))  # what it says to do, as raw Keras gives the batch
    assert check_model(model, x, mode="fit", labels=y).fit is not None
