"""The model audit run the way the model will be used (``check_model(..., mode=)``,
``%dtype_check --mode``): the real ``model.predict`` beside the eager call, one real
``model.fit`` step on a copy. Real Keras: tensorflow in-process (see conftest), jax and torch
in fresh processes; each answer is checked against raw Keras doing the same work, and the
user's model against itself before the audit."""

from __future__ import annotations

import os
import textwrap

import keras
import numpy as np
import pytest
from IPython.core.error import UsageError
from on_backend import json_on

from dtype_explorer import check_model
from dtype_explorer.errors import InvalidSpecError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def uint8_images():
    return np.arange(2 * 4, dtype="uint8").reshape(2, 4) * 30


def rescaling_model(layer_class=keras.layers.Rescaling):
    inputs = keras.Input((4,), dtype="uint8", name="pixels")
    return keras.Model(inputs, layer_class(1 / 255, name="rescale")(inputs), name="pre")


def mixed_float16_net(*, model_policy: str) -> keras.Model:
    """Dense layers under mixed_float16 in a model whose own policy is ``model_policy``
    (compile adds loss scaling only when that is mixed_float16)."""
    keras.config.set_dtype_policy(model_policy)
    try:
        inputs = keras.Input((4,), name="x")
        x = keras.layers.Dense(8, dtype="mixed_float16", name="hidden")(inputs)
        x = keras.layers.Dropout(0.5, dtype="mixed_float16", name="drop")(x)
        outputs = keras.layers.Dense(3, dtype="mixed_float16", name="head")(x)
        return keras.Model(inputs, outputs, name="net")
    finally:
        keras.config.set_dtype_policy("float32")


def snapshot(model):
    optimizer = getattr(model, "optimizer", None)
    return {
        "weights": [w.copy() for w in model.get_weights()],
        "variables": [keras.ops.convert_to_numpy(v.value).copy() for v in model.variables],
        "policy": model.dtype_policy.name,
        "layer_policies": [layer.dtype_policy.name for layer in model.layers],
        "optimizer": optimizer,
        "iterations": None if optimizer is None else int(optimizer.iterations.numpy()),
        "optimizer_variables": None
        if optimizer is None
        else [keras.ops.convert_to_numpy(v.value).copy() for v in optimizer.variables],
        "compiled": getattr(model, "compiled", False),
        "train_function": getattr(model, "train_function", None),
        "predict_function": getattr(model, "predict_function", None),
    }


def assert_unchanged(model, before):
    after = snapshot(model)
    assert len(after["variables"]) == len(before["variables"])
    for a, b in zip(after["variables"], before["variables"], strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()  # bitwise
    for a, b in zip(after["weights"], before["weights"], strict=True):
        assert a.tobytes() == b.tobytes()
    for key in ("policy", "layer_policies", "iterations", "compiled"):
        assert after[key] == before[key], key
    assert after["optimizer"] is before["optimizer"]
    assert after["train_function"] is before["train_function"]
    assert after["predict_function"] is before["predict_function"]
    if before["optimizer_variables"] is not None:
        for a, b in zip(after["optimizer_variables"], before["optimizer_variables"], strict=True):
            assert a.tobytes() == b.tobytes()
    assert keras.config.dtype_policy().name == "float32"


# ------------------------------------------------------------------------------ predict


def test_predict_names_the_preprocessing_layer_whose_dtype_differs_from_the_eager_call():
    """Rescaling (a TFDataLayer) converts its input to its compute dtype inside a TF graph:
    model.predict's tf.function hands it float32 where the eager call hands it uint8."""
    seen: list[tuple[str, str]] = []

    class Spy(keras.layers.Rescaling):
        def call(self, inputs):
            seen.append(keras.backend.standardize_dtype(inputs.dtype))
            return super().call(inputs)

    raw = rescaling_model(Spy)  # raw Keras: what call() receives in each
    raw(uint8_images())
    eager_received = seen[-1]
    raw_predict = raw.predict(uint8_images(), verbose=0)
    predict_received = seen[-1]
    assert eager_received != predict_received  # the fact the audit must find

    model = rescaling_model()
    model.predict(uint8_images(), verbose=0)  # the user predicted before: a predict_function
    before = snapshot(model)
    report = check_model(model, uint8_images(), mode="predict")
    assert report.mode == "predict" and report.compiled is True
    assert "tf.function" in report.execution and "tf.function" in report.summary()
    (diff,) = [d for d in report.predict.differences if d.path == "pre/rescale"]
    assert diff.where == "received"
    assert diff.eager == (eager_received,) and diff.predict == (predict_received,)
    (finding,) = report.by_kind("mode-divergence")
    assert finding.path == "pre/rescale" and "model.predict" in finding.message
    # the layers as the compiled function saw them: dtypes, no values
    rescale = next(c for c in report.layers if c.path == "pre/rescale")
    assert rescale.received[0].dtype == predict_received and rescale.received[0].finite is None
    assert rescale.trace and all(step.abstract for step in rescale.trace)  # ops, traced symbolic
    # values at the outputs: predict's own, beside the eager call's
    assert report.predict.outputs[0].dtype == str(raw_predict.dtype)
    assert report.predict.nonfinite == report.predict.eager_nonfinite == (0,)
    assert_unchanged(model, before)
    text = str(report)
    assert "rescale received: eager uint8, predict float32" in text
    assert "rescale received" in report._repr_html_()


def test_predict_without_differences_and_on_a_model_never_predicted():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs))
    before = snapshot(model)
    assert before["predict_function"] is None
    report = check_model(model, mode="predict")
    assert report.predict.differences == () and report.by_kind("mode-divergence") == []
    assert [c.path.rsplit("/", 1)[-1] for c in report.layers][-1] == "dense"
    assert report.layers[-1].final_output  # credited from the compiled trace's outputs
    assert_unchanged(model, before)


# ---------------------------------------------------------------------------------- fit


def test_fit_under_mixed_float16_with_loss_scaling_on_a_compiled_model():
    model = mixed_float16_net(model_policy="mixed_float16")
    model.compile(optimizer="sgd", loss="mse")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)  # raw Keras
    big = np.full((2, 4), 300.0, "float32")  # scaled by 32768, float16 gradients overflow
    before = snapshot(model)
    report = check_model(model, big, mode="fit")
    fit = report.fit
    assert report.mode == "fit" and fit.compiled is True and report.compiled is True
    assert "tf.function" in fit.execution
    assert fit.loss == "mse" and fit.optimizer == "LossScaleOptimizer(SGD)" and fit.loss_scaling
    stored = {v.path: keras.backend.standardize_dtype(v.dtype) for v in model.trainable_variables}
    assert {g.name: g.variable_dtype for g in fit.gradients} == stored
    assert all(g.dtype == "float32" and g.nonfinite is not None for g in fit.gradients)
    # read from inside the compiled step: the overflow LossScaleOptimizer answers by skipping
    assert fit.nonfinite_gradients and fit.loss_scale == 2.0**15
    assert fit.loss_scale_after == fit.loss_scale / 2
    (note,) = report.by_kind("nonfinite-gradient")
    assert note.severity == "info" and "LossScaleOptimizer skipped the step" in note.message
    assert report.by_kind("no-loss-scaling") == []
    assert "float16-output" in {f.kind for f in report.findings}
    assert_unchanged(model, before)
    assert "training step (model.fit: one training step, compiled by tf.function)" in str(report)


def test_fit_without_loss_scaling_on_a_model_not_compiled():
    model = mixed_float16_net(model_policy="float32")  # layers mixed_float16, model float32
    before = snapshot(model)
    report = check_model(model, mode="fit")
    fit = report.fit
    assert fit.loss == "mean_squared_error" and fit.optimizer == "SGD"
    assert not fit.loss_scaling and fit.loss_scale is None and fit.compiled is True
    assert not fit.nonfinite_gradients and all(g.nonfinite == 0 for g in fit.gradients)
    assert {g.name for g in fit.gradients} == {
        "hidden/kernel",
        "hidden/bias",
        "head/kernel",
        "head/bias",
    }
    assert report.by_kind("no-loss-scaling")  # the copy compiled as Keras compiles the model
    assert "not compiled" in " ".join(report.notes)
    assert_unchanged(model, before)
    assert not getattr(model, "compiled", False)


def test_fit_is_reproducible_with_dropout_and_leaves_the_random_streams_alone():
    import random

    model = mixed_float16_net(model_policy="float32")
    state = random.getstate()
    first = check_model(model, mode="fit").fit
    second = check_model(model, mode="fit").fit
    assert first.loss_value == second.loss_value
    assert random.getstate() == state


def test_training_mode_puts_moving_statistics_back():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.BatchNormalization()(inputs))
    before = snapshot(model)
    report = check_model(model, np.full((2, 4), 5.0, "float32"), mode="training")
    assert report.mode == "training" and report.layers
    assert_unchanged(model, before)


def test_call_kwargs_training_puts_moving_statistics_back_and_a_mode_setting_it_refuses():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.BatchNormalization()(inputs))
    before = snapshot(model)
    report = check_model(model, np.full((2, 4), 5.0, "float32"), call_kwargs={"training": True})
    assert report.layers
    assert_unchanged(model, before)  # the moving statistics a training call updated
    with pytest.raises(InvalidSpecError, match="mode='fit' sets training itself"):
        check_model(
            model, np.full((2, 4), 5.0, "float32"), call_kwargs={"training": True}, mode="fit"
        )


@pytest.mark.parametrize(
    "mode, target, message",
    [
        (
            "dataset",
            "layer",
            "no predict\\(\\) to feed a tf.data.Dataset to; probe a layer mapped over tf.data "
            "with dx.probe\\(layer, mode='dataset'\\); modes that apply: call, training$",
        ),
        (
            "model",
            "model",
            "already runs the model through Model.__call__.*modes that apply: call, training, "
            "predict, fit, save, dataset$",
        ),
        (
            "fit",
            "layer",
            "is a layer, not a keras.Model: it has no fit\\(\\).*modes that apply: call, training$",
        ),
        ("predict", "layer", "no predict\\(\\)"),
        ("fitt", "model", "unknown mode 'fitt'; did you mean 'fit'"),
    ],
)
def test_modes_that_cannot_apply_say_why_and_list_those_that_do(mode, target, message):
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    layer = keras.layers.Dense(2)
    with pytest.raises(InvalidSpecError, match=message):
        check_model(model if target == "model" else layer, np.ones((2, 4)), mode=mode)


def test_labels_belong_to_fit():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    with pytest.raises(InvalidSpecError, match="labels are the targets of a training step"):
        check_model(model, labels=np.zeros((2, 2)))
    report = check_model(model, mode="fit", labels=np.ones((2, 2), "float32"))
    assert report.fit.loss_value is not None


# ------------------------------------------------------------------------------ magic


@pytest.fixture
def namespace(shell):
    model = mixed_float16_net(model_policy="mixed_float16")
    model.compile(optimizer="sgd", loss="mse")
    shell.user_ns.update(
        net=model, pre=rescaling_model(), images=uint8_images(), y=np.zeros((2, 3), "float32")
    )
    yield shell.user_ns
    for name in ("net", "pre", "images", "y", "report"):
        shell.user_ns.pop(name, None)


def test_magic_mode_predict(shell, namespace):
    result = shell.run_cell("report = %dtype_check pre --sample images --mode predict")
    assert result.success
    report = namespace["report"]
    assert report.mode == "predict" and report.by_kind("mode-divergence")


def test_magic_mode_fit_leaves_the_model_alone(shell, namespace):
    before = snapshot(namespace["net"])
    report = shell.run_line_magic("dtype_check", "net --mode fit --labels y")
    assert report.mode == "fit" and report.fit.loss_scaling and report.fit.loss == "mse"
    assert_unchanged(namespace["net"], before)


@pytest.mark.parametrize(
    "line, message",
    [
        ("net --mode model", "%dtype_check: mode 'model' cannot audit"),
        ("net --mode predcit", "did you mean 'predict'"),
        ("net --mode fit --labels nowhere", "--labels 'nowhere' is not defined"),
    ],
)
def test_magic_bad_modes_are_usage_errors(shell, namespace, line, message):
    with pytest.raises(UsageError, match=message):
        shell.run_line_magic("dtype_check", line)


def test_magic_help_documents_mode(shell, capsys):
    shell.run_line_magic("dtype_check", "--help")
    out = capsys.readouterr().out
    assert "--mode" in out and "--labels" in out and "--mode fit" in out


# ------------------------------------------------------------------- jax and torch


_OTHER_BACKEND = textwrap.dedent(
    """
    import json, warnings
    import keras, numpy as np
    import dtype_explorer as dx

    keras.config.set_dtype_policy("mixed_float16")
    inputs = keras.Input((4,))
    x = keras.layers.Dense(8, name="hidden")(inputs)
    outputs = keras.layers.Dense(3, activation="softmax", dtype="float32", name="head")(x)
    model = keras.Model(inputs, outputs, name="net")
    keras.config.set_dtype_policy("float32")
    weights = [w.copy() for w in model.get_weights()]
    predict = dx.check_model(model, mode="predict")
    fit = dx.check_model(model, mode="fit")
    print(json.dumps({
        "predict_compiled": predict.compiled,
        "predict_execution": predict.execution,
        "differences": [d.text() for d in predict.predict.differences],
        "fit": fit.fit.to_dict(),
        "unchanged": all(a.tobytes() == b.tobytes() for a, b in zip(weights, model.get_weights())),
        "compiled_after": getattr(model, "compiled", False),
        "policy": model.dtype_policy.name,
    }))
    """
)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_predict_and_fit_audits_on_other_backends(backend):
    got = json_on(backend, _OTHER_BACKEND)
    fit = got["fit"]
    if backend == "jax":
        assert got["predict_compiled"] is True and "jax.jit" in got["predict_execution"]
        assert fit["compiled"] is True and "jax.jit" in fit["execution"]
    else:
        assert got["predict_compiled"] is False and "eager on torch" in got["predict_execution"]
        assert fit["compiled"] is False and "eager on torch" in fit["execution"]
    assert fit["loss"] == "sparse_categorical_crossentropy" and fit["loss_scaling"] is True
    assert fit["optimizer"] == "LossScaleOptimizer(SGD)" and fit["loss_scale"] == 2.0**15
    assert {g["name"] for g in fit["gradients"]} == {
        "hidden/kernel",
        "hidden/bias",
        "head/kernel",
        "head/bias",
    }
    assert all(g["dtype"] == "float32" and g["nonfinite"] is not None for g in fit["gradients"])
    assert got["differences"] == []
    assert got["unchanged"] and got["compiled_after"] is False and got["policy"] == "mixed_float16"


def test_the_copy_trained_and_the_predict_function_made_are_not_kept():
    import gc
    import weakref

    def models() -> list:
        gc.collect()
        return [o for o in gc.get_objects() if isinstance(o, keras.Model)]

    model = mixed_float16_net(model_policy="float32")
    before = weakref.WeakSet(models())  # other tests' models may go meanwhile: only new ones count
    check_model(model, mode="fit")
    check_model(model, mode="predict")
    assert [m for m in models() if m not in before] == []
    assert model.__dict__.get("predict_function") is None


def test_fit_under_xla_reads_inf_gradients_and_without_loss_scaling_it_is_an_error():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3, name="dense")(inputs), name="m")
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    huge = np.full((2, 4), 1e30, "float32")
    # raw Keras: the same step's kernel gradient, computed eagerly, is not finite
    import tensorflow as tf  # this session's backend (conftest)

    with tf.GradientTape() as tape:
        loss = keras.ops.mean(keras.losses.mean_squared_error(np.zeros((2, 3)), model(huge)))
    raw = tape.gradient(loss, model.trainable_variables)
    raw_bad = [int(np.size(g) - np.isfinite(keras.ops.convert_to_numpy(g)).sum()) for g in raw]
    before = snapshot(model)
    report = check_model(model, huge, mode="fit")
    fit = report.fit
    assert fit.compiled and fit.execution.endswith("compiled by tf.function with XLA")
    assert [g.nonfinite for g in fit.gradients] == raw_bad and raw_bad[0] > 0
    (finding,) = report.by_kind("nonfinite-gradient")
    assert finding.severity == "error" and "no loss scaling guards the step" in finding.message
    assert_unchanged(model, before)
    eager = keras.Model(inputs, model.outputs)
    eager.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    fit = check_model(eager, mode="fit").fit
    assert fit.compiled is False and "run_eagerly=True" in fit.execution


class Unconfigurable(keras.Model):
    """A subclassed model whose constructor takes a layer: Keras cannot rebuild it from config."""

    def __init__(self, layer):
        super().__init__()
        self.inner = layer

    def call(self, x):
        return self.inner(x)


def test_fit_on_a_model_that_cannot_be_copied_says_why_and_what_works():
    model = Unconfigurable(keras.layers.Dense(2))
    x = np.ones((2, 4), "float32")
    model(x)
    before = snapshot(model)
    with pytest.raises(
        InvalidSpecError, match=r"could not be copied: .*get_config.*call, training"
    ):
        check_model(model, x, mode="fit")
    report = check_model(model, x, mode="predict")  # needs no copy
    assert report.predict.outputs[0].dtype == "float32"
    assert_unchanged(model, before)


def _text_model():
    """TextVectorization adapted on the sample (its vocabulary: assets, no weight), seeded."""
    import tensorflow as tf

    text = tf.constant([["this is an example"], ["another example"]])
    vectorize = keras.layers.TextVectorization(
        max_tokens=10, output_mode="int", output_sequence_length=6
    )
    vectorize.adapt(text)
    inputs = keras.Input(shape=(1,), dtype="string")
    x = keras.layers.Embedding(
        10, 4, embeddings_initializer=keras.initializers.RandomUniform(seed=0)
    )
    x = keras.layers.GlobalAveragePooling1D()(x(vectorize(inputs)))
    head = keras.layers.Dense(1, "sigmoid", kernel_initializer=keras.initializers.GlorotUniform(1))
    model = keras.Model(inputs, head(x), name="text")
    model.compile(optimizer="sgd", loss="binary_crossentropy")
    return model, text


def test_fit_of_a_model_with_an_adapted_vocabulary_trains_as_raw_keras_does():
    """A clone's lookup tables are never initialized (the vocabulary is an asset, not a
    weight): the training copy raised "Table not initialized" in StringLookup, shown as the
    model's call-error, though raw Keras's model.fit (and a .keras copy's) trains."""
    model, text = _text_model()
    y = np.array([1.0, 0.0], "float32")
    before = snapshot(model)
    report = check_model(model, text, mode="fit", labels=y)
    raw, _ = _text_model()
    raw_loss = raw.fit(text, y, batch_size=2, epochs=1, verbose=0, shuffle=False)
    assert not report.by_kind("call-error") and report.fit is not None
    assert report.fit.loss_value == pytest.approx(raw_loss.history["loss"][0], rel=1e-5)
    ids = raw.get_layer(index=1)(text)  # raw Keras: the ids the vectorization gives
    [lookup] = [c for c in report.layers if c.layer_class == "TextVectorization"]
    assert lookup.outputs[0].dtype == keras.backend.standardize_dtype(ids.dtype)
    assert_unchanged(model, before)


class _Offset(keras.layers.Layer):
    """Adds ``self.offsets["value"]``, filled after construction: in no config, so no copy
    has it (its output spec declared, so the symbolic calls need none)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.offsets = {}

    def call(self, x):
        return x + self.offsets["value"]

    def compute_output_spec(self, x):
        return keras.KerasTensor(x.shape, x.dtype)


def test_fit_whose_copy_fails_where_the_model_runs_says_it_is_the_copys_failure():
    inputs = keras.Input((3,))
    shift = _Offset(name="shift")
    shift.offsets["value"] = 1.0
    model = keras.Model(inputs, keras.layers.Dense(1)(shift(inputs)), name="shifted")
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((2, 3), "float32"), np.zeros((2, 1), "float32")
    raw = keras.models.clone_model(model)  # raw Keras: a clone has no offset
    with pytest.raises(KeyError):
        raw(x)
    with pytest.raises(
        InvalidSpecError,
        match=r"copy failed where the model itself runs.*"
        r"not of the model\): KeyError.*Modes that need no copy: call, training, predict",
    ):
        check_model(model, x, mode="fit", labels=y)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0)  # raw Keras trains the model itself


def test_fit_on_a_functional_model_keras_cannot_copy_says_what_keras_refused(tmp_path):
    """A float8-quantized Functional model with LoRA: Keras's clone's weights do not line up,
    its .keras archive cannot be written and its own call raises; the error said "subclassed"
    and named only the archive. Each of Keras's refusals is raised beside it here."""
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, name="d1")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(4, name="d2")(hidden))
    model.quantize("float8")
    model.get_layer("d1").enable_lora(2)
    x = np.random.RandomState(0).randn(2, 8).astype("float32")
    raw = {}
    for name, work in (
        ("set_weights", lambda: keras.models.clone_model(model).set_weights(model.get_weights())),
        ("save", lambda: model.save(tmp_path / "copy.keras")),
        ("call", lambda: model(x)),
    ):
        with pytest.raises(Exception) as raised:  # raw Keras refuses each
            work()
        raw[name] = (type(raised.value).__name__, str(raised.value))
    before = snapshot(model)
    with pytest.raises(InvalidSpecError) as refused:
        check_model(model, x, mode="fit")
    said = str(refused.value)
    assert "subclassed" not in said and "Functional" in said
    assert f"model.get_weights()) raised ValueError: {raw['set_weights'][1]}" in said
    assert f"a .keras archive raised {raw['save'][0]}: {raw['save'][1]}" in said
    assert raw["call"][0] == "NotImplementedError" and "_float8_call" in raw["call"][1]
    assert "the model's own call raises as well, NotImplementedError: " in said
    assert "doesn't support LoRA" in said and said.endswith("call, training, predict")
    assert_unchanged(model, before)


def test_predict_converting_the_sample_is_named_at_the_model():
    from keras.src.trainers.data_adapters import get_data_adapter

    inputs = keras.Input((4,), dtype="float64", name="x")
    model = keras.Model(inputs, keras.layers.Discretization([0.0])(inputs), name="disc")
    x = np.linspace(-1, 1, 8).reshape(2, 4)  # float64
    # raw Keras: the batches model.predict's data adapter makes of a float64 array
    batch = next(iter(get_data_adapter(x, batch_size=2).get_numpy_iterator()))
    assert str(batch.dtype) == "float32"
    report = check_model(model, x, mode="predict")
    (finding,) = [f for f in report.by_kind("mode-divergence") if f.path == "disc"]
    assert finding.details == {"where": "received", "eager": ["float64"], "predict": ["float32"]}
    assert "model.predict hands the model float32 where model(x) hands it float64" in (
        finding.message
    )
    # the model converts what it is handed to its keras.Input dtype: its layers see the same
    assert [d.path for d in report.predict.differences] == ["disc"]
    assert finding.severity == "info" and "same dtypes as in the eager call" in finding.message


def test_fit_under_another_policy_keeps_the_models_compile_config():
    """policy= audits a clone; its training step still uses the model's loss and optimizer,
    and compile wraps the optimizer as it would for a model built under that policy."""
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3, name="dense")(inputs), name="m")
    model.compile(optimizer="sgd", loss="mae")
    before = snapshot(model)
    report = check_model(model, policy="mixed_float16", mode="fit")
    assert report.fit.loss == "mae" and report.fit.optimizer == "LossScaleOptimizer(SGD)"
    assert "compiled from the model's compile config" in " ".join(report.notes)
    assert_unchanged(model, before)


class ScaledByItsMax(keras.layers.Layer):
    """Reads a value in Python: fine in model(x), impossible inside a compiled function."""

    def call(self, x):
        return x / float(keras.ops.max(x))

    def compute_output_shape(self, shape):
        return shape


def test_a_layer_that_breaks_only_under_predict_is_an_error_at_that_layer():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, ScaledByItsMax(name="scale")(inputs), name="net")
    x = np.arange(1, 9, dtype="float32").reshape(2, 4)
    model(x)  # raw Keras: the eager call runs ...
    with pytest.raises(Exception) as raised:  # ... and model.predict does not
        model.predict(x, verbose=0)
    model.predict_function = None
    before = snapshot(model)
    report = check_model(model, x, mode="predict")
    assert report.predict.error.type == type(raised.value).__name__
    assert report.predict.failed_at == "net/scale" and report.predict.outputs == ()
    (finding,) = [f for f in report.findings if f.severity == "error"]
    assert finding.kind == "mode-divergence" and finding.path == "net/scale"
    assert "net/scale raised TypeError where the eager call ran" in finding.message
    assert "raised" in report.predict.text()
    # the cause is the layer's own code under a compiled function: no advice the audit did not
    # run is shown as a fix (issue 38 item 3), the reason is
    assert finding.fix == "" and "net/scale's own code" in finding.proof.not_tried
    assert_unchanged(model, before)


def test_a_sample_predict_s_data_adapter_refuses_is_said_to_be_refused_there():
    """A NumPy object array of strings: model(x) takes it, model.predict's data adapter
    raises before any compiled function or layer runs (raw Keras's traceback says where);
    the finding names that adapter, not the model's own code."""
    import traceback

    import tensorflow as tf

    strings = np.array([["this is an example"], ["another example"]], dtype=object)
    inputs = keras.Input(shape=(1,), dtype="string")
    lookup = keras.layers.StringLookup(vocabulary=["this", "another"], name="lookup")
    model = keras.Model(inputs, keras.layers.Embedding(4, 2)(lookup(inputs)), name="net")
    keras.config.disable_traceback_filtering()
    try:
        with pytest.raises(ValueError) as raised:  # raw Keras: predict refuses the array ...
            model.predict(strings, verbose=0)
    finally:
        keras.config.enable_traceback_filtering()
    files = [f.filename.replace(os.sep, "/") for f in traceback.extract_tb(raised.tb)]
    adapter = [f for f in files if "/keras/src/trainers/data_adapters/" in f][-1]
    assert model.predict(tf.constant(strings), verbose=0).dtype == "float32"  # ... not tensors
    model.predict_function = None
    report = check_model(model, strings, mode="predict")
    assert keras.config.is_traceback_filtering_enabled()  # the user's setting, put back
    assert report.predict.error.message == str(raised.value)
    assert adapter.endswith(report.predict.refused_by)
    assert report.predict.failed_at is None
    (finding,) = [f for f in report.findings if f.severity == "error"]
    assert finding.kind == "mode-divergence" and finding.path == "model.predict"
    assert "refused the sample before any compiled function or layer ran" in finding.message
    assert f"Keras's data adapter ({report.predict.refused_by})" in finding.message
    assert "tf.data.Dataset" in finding.message and "own code" not in finding.message
    assert "own code" not in finding.proof.not_tried and finding.fix == ""


def test_a_layer_that_breaks_only_in_the_compiled_step_is_a_finding_bad_labels_an_error():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, ScaledByItsMax(name="scale")(inputs), name="net")
    x = np.arange(1, 9, dtype="float32").reshape(2, 4)
    before = snapshot(model)
    report = check_model(model, x, mode="fit")
    assert report.fit is None and report.compiled is True
    (finding,) = [f for f in report.findings if f.severity == "error"]
    assert finding.kind == "mode-divergence" and "raised where the eager" in finding.message
    assert "TypeError" in finding.message
    # no advice the audit did not run: compiled without XLA (where it was) the step raised too
    assert finding.fix == "" and not finding.proof.proven
    assert "net's own code" in finding.proof.not_tried or "raised" in finding.proof.tried[0]
    assert_unchanged(model, before)
    dense_in = keras.Input((4,))
    dense = keras.Model(dense_in, keras.layers.Dense(3)(dense_in))
    with pytest.raises(InvalidSpecError, match="failed with the labels given"):
        check_model(dense, x, mode="fit", labels=np.zeros((5, 7), "float32"))


_POLICY_COPY_DONATED = textwrap.dedent(
    """
    import json
    import keras, numpy as np
    import dtype_explorer as dx

    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2, name="d")(inputs), name="net")
    x = np.arange(6, dtype="float32").reshape(2, 3)
    weights = [w.copy() for w in model.get_weights()]
    raw = np.asarray(model(x)).copy()
    after = []
    for mode in ("call", "predict", "call", "fit", "predict", "training", "call"):
        said = str(dx.check_model(model, x, mode=mode, policy="mixed_bfloat16"))
        try:  # the user's own call of their model after each audit
            again = np.asarray(model(x))
            same = again.tobytes() == raw.tobytes() and all(
                a.tobytes() == b.tobytes() for a, b in zip(weights, model.get_weights())
            )
        except Exception as error:
            same = f"{type(error).__name__}: {error}"[:300]
        after.append([mode, same, said.splitlines()[0]])
    print(json.dumps(after))
    """
)


def test_the_policys_copy_never_holds_the_users_buffers_on_jax():
    """On jax a variable's ``assign`` keeps the array it is given: the policy's copy, reused
    with the model's weights assigned, held the user's own buffers, and the copy's compiled
    ``model.predict`` donated them, so the user's next ``model(x)`` raised "Buffer has been
    deleted or donated". After every audit, in every mode, under the policy (the copy reused
    from the second on), the user's model calls as it did and holds its weights bitwise."""
    after = json_on("jax", _POLICY_COPY_DONATED)
    assert [same for _, same, _ in after] == [True] * len(after), after
    assert all("mixed_bfloat16 on jax" in said for _, _, said in after), after


_RECURRENT_UNDER_A_POLICY = textwrap.dedent(
    """
    import json
    import keras, numpy as np
    import dtype_explorer as dx

    inputs = keras.Input((6, 8))
    h = keras.layers.LSTM(8, return_sequences=True, name="lstm")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(4, name="head")(h), name="net")
    x = np.random.default_rng(1).normal(size=(2, 6, 8)).astype("float32")
    report = dx.check_model(model, x, policy="mixed_float16")
    quantized = dx.check_model(model, x, quantize="int8")
    print(json.dumps({"paths": [d.path for d in report.damage],
                      "dtypes": sorted({d.dtype for d in report.damage}),
                      "notes": [n for n in report.notes if "leaves out" in n],
                      "quantized": str(quantized).splitlines()[0]}))
    """
)


def test_a_recurrent_layer_under_a_policy_is_audited_on_jax():
    """Keras runs an LSTM's cell inside ``jax.lax.scan``: the cell's calls get tracers, whose
    values cannot be read, and the per-layer reference read them and raised
    ``TracerArrayConversionError`` out of ``check_model`` (and the quantized copy's comparison
    with the float one, under ``quantize="int8"``). The scan's calls are left out of the
    comparison, and a note says which; the layers that ran eagerly are compared."""
    got = json_on("jax", _RECURRENT_UNDER_A_POLICY)
    assert got["paths"] == ["net/head"] and got["dtypes"] == ["float16"], got
    assert len(got["notes"]) == 1 and "lstm/lstm_cell" in got["notes"][0], got
    assert "jax.lax.scan" in got["notes"][0], got
    assert "quantized int8 on jax" in got["quantized"], got


_PREDICT_RAISES_ON_JAX = textwrap.dedent(
    """
    import json
    import keras, numpy as np
    import dtype_explorer as dx

    def attention():
        keras.config.set_dtype_policy("mixed_float16")
        inputs = keras.Input((6, 8))
        outputs = keras.layers.MultiHeadAttention(2, 4, name="mha")(inputs, inputs)
        keras.config.set_dtype_policy("float32")
        return keras.Model(inputs, outputs, name="net")

    x = np.random.default_rng(1).normal(size=(2, 6, 8)).astype("float32")
    raw = attention()  # raw Keras: its predict, then its own call
    try:
        raw.predict(x, verbose=0)
        raw_error = None
    except Exception as error:
        raw_error = str(error)
    try:
        raw(x)
        raw_call = "ran"
    except Exception as error:
        raw_call = type(error).__name__

    model = attention()
    before = np.asarray(model(x)).copy()
    weights = [w.copy() for w in model.get_weights()]
    report = dx.check_model(model, x, mode="predict")
    print(json.dumps({
        "raw_error": raw_error,
        "raw_call": raw_call,
        "said": [f.message for f in report.findings if f.kind == "mode-divergence"],
        "same": np.asarray(model(x)).tobytes() == before.tobytes()
        and all(a.tobytes() == b.tobytes() for a, b in zip(weights, model.get_weights())),
    }))
    """
)


def test_a_predict_that_raises_on_jax_is_said_and_leaves_the_model_whole():
    """Keras's jax ``predict`` takes every variable's value off the model as it starts and puts
    the new ones back as it ends; a float16 attention's compiled step raises on the CPU
    ("precision 'F16_F16_F32' is not supported by dot_general"), and raw Keras's model is left
    with no values (its next call raises). The audit says what ``predict`` raised, as raw
    Keras raised it, and the user's model calls as before, its weights bitwise."""
    got = json_on("jax", _PREDICT_RAISES_ON_JAX)
    assert got["same"] is True, got
    if got["raw_error"] is None:  # a jax that lowers it: nothing raised, nothing said
        assert got["said"] == [], got
        return
    assert got["raw_call"] != "ran", got  # what the audit must not do to the user's model
    assert len(got["said"]) == 1 and got["raw_error"] in got["said"][0], got


_JIT_COMPILE_FALSE_ON_JAX = textwrap.dedent(
    """
    import json
    import keras
    import numpy as np
    import dtype_explorer as dx

    class Concrete(keras.layers.Layer):  # reads a value in Python: runs eagerly, not in a jit
        def call(self, x):
            return x * float(keras.ops.convert_to_numpy(x)[0, 0] > 0)

        def compute_output_spec(self, x):
            return keras.KerasTensor(x.shape, x.dtype)

    def built(jit):
        inputs = keras.Input((3,))
        model = keras.Model(inputs, keras.layers.Dense(2)(Concrete()(inputs)))
        model.compile(optimizer="sgd", loss="mse", jit_compile=jit)
        return model

    x = np.ones((2, 3), "float32")
    raw = {}  # raw Keras: jit_compile=False runs predict eagerly, True jits it
    for jit in (False, True):
        try:
            built(jit).predict(x, verbose=0)
            raw[str(jit)] = "ran"
        except Exception as error:
            raw[str(jit)] = type(error).__name__
    predict = dx.check_model(built(False), x, mode="predict").predict
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    plain.compile(optimizer="sgd", loss="mse", jit_compile=False)
    fit = dx.check_model(plain, x, mode="fit").fit
    unset = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    dx.check_model(unset, x, mode="predict")
    print(json.dumps({
        "raw": raw,
        "predict": [predict.compiled, predict.execution],
        "fit": [fit.compiled, fit.execution],
        "unset": unset._jit_compile,
    }))
    """
)


def test_jit_compile_false_on_jax_is_said_eager_as_keras_runs_it():
    """On jax Keras jits ``predict`` and ``fit`` steps only under ``jit_compile``: with
    ``jit_compile=False`` they run eagerly (a layer that reads a value in Python runs there
    and raises under the jit). The audit said "compiled by jax.jit" for both; and its
    ``predict`` left on a model never compiled what Keras resolved ``"auto"`` to."""
    got = json_on("jax", _JIT_COMPILE_FALSE_ON_JAX)
    assert got["raw"]["False"] == "ran" and got["raw"]["True"] != "ran", got
    for compiled, execution in (got["predict"], got["fit"]):
        assert compiled is False and execution.endswith("eager (model.jit_compile is False)")
    assert got["unset"] is None, got  # the user's model as it was


_JIT_COMPILE_ON_TORCH = textwrap.dedent(
    """
    import json
    import keras
    import numpy as np
    import dtype_explorer as dx

    x = np.ones((2, 3), "float32")
    said = {}
    for jit in (True, False):
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.compile(optimizer="sgd", loss="mse", jit_compile=jit)
        raw = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        raw.compile(optimizer="sgd", loss="mse", jit_compile=jit)
        raw.predict(x, verbose=0)  # raw Keras: torch.compile's wrapper, or the plain step
        predict = dx.check_model(model, x, mode="predict").predict
        said[str(jit)] = [
            hasattr(raw.predict_function, "_torchdynamo_orig_callable"),
            predict.compiled,
            predict.execution,
        ]
    print(json.dumps(said))
    """
)


def test_torchs_predict_under_jit_compile_is_said_compiled_as_keras_compiles_it():
    """Keras's torch trainer compiles its predict step with ``torch.compile`` under
    ``jit_compile=True``, as its train step: the audit said "eager on torch"."""
    got = json_on("torch", _JIT_COMPILE_ON_TORCH)
    assert got["True"] == [True, True, "model.predict, compiled by torch.compile"], got
    assert got["False"] == [False, False, "model.predict, eager on torch"], got


class _Doubled(keras.layers.Layer):
    """A notebook's own layer, never registered: a .keras archive cannot rebuild it."""

    def call(self, x):
        return x * 2.0


def test_fit_of_a_model_with_a_lookup_and_an_unregistered_layer_trains_a_clone():
    # a model holding any lookup was copied through a .keras archive only, which an
    # unregistered layer of the user's cannot pass: the audit refused the model outright
    # ("could not be copied"); its clone now trains, and answers what raw Keras's fit does
    inputs = keras.Input((3,), dtype="string")
    ids = keras.layers.StringLookup(vocabulary=["a", "b", "c"], name="lookup")(inputs)
    hidden = _Doubled(name="doubled")(keras.layers.Embedding(5, 4, name="emb")(ids))
    model = keras.Model(inputs, keras.layers.Dense(1, name="head")(keras.layers.Flatten()(hidden)))
    model.compile(optimizer="adam", loss="mse")
    x = np.array([["a", "b", "c"], ["c", "a", "zz"]])
    report = check_model(model, x, mode="fit")
    with pytest.raises(ValueError) as raw:  # raw Keras's fit of NumPy strings
        model.fit(x, np.zeros((2, 1), "float32"), verbose=0)
    [raised] = report.by_kind("mode-divergence")
    assert str(raw.value).splitlines()[0] in raised.message
