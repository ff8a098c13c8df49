"""How a probe runs its target (``mode=``): the eager call, training=True, inside a functional
model, through model.predict, one training step. Real Keras: in-process on this session's
backend (tensorflow, see conftest.py), other backends through their worker processes; each
answer is compared with raw Keras doing the same work."""

import keras
import numpy as np
import pytest
from on_backend import json_on

import dtype_explorer as dx
from dtype_explorer import cache, pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import run_probe
from dtype_explorer.records import ProbeSpec


def stage(result, name, index=0):
    return next(s for s in result.cast_path if s.stage == name and s.index == index)


def sample(dtype="float32", shape=(2, 4)):
    return np.linspace(-2, 2, int(np.prod(shape))).reshape(shape).astype(dtype)


# ------------------------------------------------------------------------------ training


@pytest.mark.parametrize("layer", ["Dropout", "GaussianDropout", "GaussianNoise"])
@pytest.mark.parametrize(
    "policy, compute", [("mixed_bfloat16", "bfloat16"), ("mixed_float16", "float16")]
)
def test_training_mode_runs_noise_and_dropout_seeded_as_raw_keras_does(layer, policy, compute):
    kwargs = {"rate": 0.5} if layer != "GaussianNoise" else {"stddev": 0.5}
    generator_before = _global_seed_state()
    r = dx.probe(layer, input_dtype="float32", policy=policy, kwargs=kwargs, mode="training")
    assert r.status == "ok", r.error
    assert r.spec.mode == "training" and r.execution == "eager call, training=True"
    raw = getattr(keras.layers, layer)(**kwargs, seed=0, dtype=policy)
    expected = keras.backend.standardize_dtype(raw(sample(), training=True).dtype)
    assert r.output_dtype == expected == compute
    # training=True draws noise: random ops are in the trace, none in the plain eager call
    ops = " ".join(step.op for step in r.call_trace())
    assert "random" in ops or "dropout" in ops, ops
    plain = dx.probe(layer, input_dtype="float32", policy=policy, kwargs=kwargs)
    assert "random" not in " ".join(step.op for step in plain.call_trace())
    # seeded: the same answer twice (cacheable); the user's global random stream untouched
    again = dx.probe(layer, input_dtype="float32", policy=policy, kwargs=kwargs, mode="training")
    assert again.numerics == r.numerics
    assert [s.dtype for s in again.cast_path] == [s.dtype for s in r.cast_path]
    assert _global_seed_state() == generator_before
    assert keras.config.dtype_policy().name == "float32"


def _global_seed_state():
    from keras.src.backend.common import global_state

    generator = global_state.get_global_attribute("global_seed_generator")
    return None if generator is None else keras.ops.convert_to_numpy(generator.state).tolist()


def test_training_mode_on_jax_through_its_worker():
    r = dx.probe(
        "GaussianNoise",
        policy="mixed_bfloat16",
        backend="jax",
        kwargs={"stddev": 0.5},
        mode="training",
    )
    assert r.status == "ok", r.error
    assert r.output_dtype == "bfloat16" and r.spec.mode == "training"


# --------------------------------------------------------------------------------- model


def test_float64_through_a_model_puts_model_call_conversion_on_the_path():
    r = dx.probe("Dense", input_dtype="float64", kwargs={"units": 3}, mode="model")
    assert r.status == "ok", r.error
    step = stage(r, "model")
    # raw Keras: the same functional model, what Model.__call__ hands its layers
    inputs = keras.Input(shape=(4,), batch_size=2, dtype="float64")
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    (handed,) = model._standardize_inputs(sample("float64"))
    assert step.dtype == keras.backend.standardize_dtype(handed.dtype)
    assert "Model.__call__" in step.note and "keras.Input dtype float64" in step.note
    assert [s.stage for s in r.cast_path][:4] == ["input", "converted", "model", "autocast"]
    assert stage(r, "autocast").dtype == "float32" and r.output_dtype == "float32"
    assert r.output_dtype == keras.backend.standardize_dtype(model(sample("float64")).dtype)
    assert "mode model: Model.__call__" in str(r)


def test_model_mode_on_torch_through_its_worker_shows_the_model_stage():
    r = dx.probe("Dense", input_dtype="float64", backend="torch", kwargs={"units": 3}, mode="model")
    assert r.status == "ok", r.error
    assert stage(r, "model").dtype == "float64" and r.output_dtype == "float32"


# ----------------------------------------------------------- preprocessing: call, model, predict


PREPROCESSING = [
    ("Discretization", "float32", {"bin_boundaries": [-1.0, 0.0, 1.0]}, (2, 4)),
    ("CategoryEncoding", "int32", {"num_tokens": 4, "output_mode": "multi_hot"}, (2, 3)),
]


@pytest.mark.parametrize("layer, dtype, kwargs, shape", PREPROCESSING)
def test_preprocessing_layer_in_call_model_and_predict_matches_raw_keras(
    layer, dtype, kwargs, shape
):
    rs = dx.probe(
        layer, input_dtype=dtype, kwargs=kwargs, shape=shape, mode=["call", "model", "predict"]
    )
    assert rs.modes == ("call", "model", "predict")
    assert all(r.status == "ok" for r in rs), [r.error for r in rs]
    x = sample(dtype, shape) if dtype != "int32" else np.zeros(shape, "int32")
    raw = getattr(keras.layers, layer)(**kwargs)
    inputs = keras.Input(shape=shape[1:], batch_size=shape[0], dtype=dtype)
    model = keras.Model(inputs, getattr(keras.layers, layer)(**kwargs)(inputs))
    std = keras.backend.standardize_dtype
    assert rs["call"].output_dtype == std(raw(x).dtype)
    assert rs["model"].output_dtype == std(model(x).dtype)
    assert rs["predict"].output_dtype == std(model.predict(x, verbose=0).dtype)
    assert rs["predict"].compiled is True and "tf.function" in rs["predict"].execution
    assert rs["call"].compiled is None
    summary = rs.summary()
    assert "mode=predict" in summary and "[mode call]" in summary
    assert summary.endswith(f"across modes: {rs.verdict}")


def test_predict_on_jax_is_compiled_and_eager_on_torch():
    jax = dx.probe(
        "Discretization", kwargs={"bin_boundaries": [0.0]}, backend="jax", mode="predict"
    )
    torch = dx.probe(
        "Discretization", kwargs={"bin_boundaries": [0.0]}, backend="torch", mode="predict"
    )
    assert jax.status == torch.status == "ok", (jax.error, torch.error)
    assert jax.compiled is True and "jax.jit" in jax.execution
    assert torch.compiled is False and "eager on torch" in torch.execution
    # the op trace follows predict into jax.jit: dtypes per op on symbolic tensors, no values
    digitize = [s for s in jax.call_trace() if s.op.endswith("digitize")]
    assert digitize and digitize[0].abstract and digitize[0].outputs[0].dtype == "int32"
    assert "compiled function" in jax.trace_note and "no values" in jax.trace_note
    assert any(s.op.endswith("digitize") and not s.abstract for s in torch.call_trace())
    assert torch.trace_note == ""


class QuantizedAtInference(keras.layers.Layer):
    """A user's layer that answers differently when training, as many do."""

    def call(self, x, training=None):
        return x if training else keras.ops.cast(x, "int32")


def test_modes_that_disagree_make_a_diverging_probe_set_naming_each_mode():
    rs = dx.probe(QuantizedAtInference, mode=["call", "training"])
    assert rs["call"].output_dtype == "int32" and rs["training"].output_dtype == "float32"
    assert rs.verdict == "diverges" and rs.axis == "modes"
    lines = rs.summary().splitlines()
    assert "[mode call]" in lines[0] and "mode=training" in lines[1]
    assert lines[-1] == "across modes: diverges"
    card = rs._repr_html_()
    assert "Modes disagree: <b>call</b> int32 · <b>training</b> float32" in card


def test_models_built_for_a_probe_are_not_kept():
    import gc
    import weakref

    def models():
        gc.collect()
        return [o for o in gc.get_objects() if isinstance(o, keras.Model)]

    # Models an earlier test left in this worker may be freed meanwhile: only
    # models that were not there before count.
    before = weakref.WeakSet(models())
    for mode in ("model", "predict", "fit"):
        assert dx.probe("Dense", kwargs={"units": 2}, mode=mode).status == "ok"
    kept = [m for m in models() if m not in before]
    assert kept == [], f"models kept after the probes: {[m.name for m in kept]}"


def test_dataset_mode_maps_a_preprocessing_layer_as_raw_tf_data_does():
    import tensorflow as tf

    kwargs = {"bin_boundaries": [-1.0, 0.0, 1.0]}
    r = dx.probe("Discretization", kwargs=kwargs, mode="dataset")
    assert r.status == "ok", r.error
    assert "tf.data.Dataset.map" in r.execution
    layer = keras.layers.Discretization(**kwargs)
    raw = next(iter(tf.data.Dataset.from_tensor_slices(sample()).batch(2).map(layer)))
    assert r.output_dtype == keras.backend.standardize_dtype(raw.dtype)
    # on jax, Keras runs the layer on tf.data's tensors with its TensorFlow backend
    on_jax = dx.probe("Discretization", kwargs=kwargs, backend="jax", mode="dataset")
    assert on_jax.status == "ok", on_jax.error
    assert on_jax.output_dtype == r.output_dtype
    # the trace follows tf.data's map on tensorflow; on jax it says why it has none
    assert any(s.op.endswith("digitize") and s.abstract for s in r.call_trace())
    assert on_jax.trace == () and "switches itself to TensorFlow's ops" in on_jax.trace_note
    assert "trace: no op trace" in str(on_jax)


def test_dataset_mode_without_tensorflow_says_so(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tensorflow" else find_spec(name, *a),
    )
    with pytest.raises(InvalidSpecError, match="tensorflow is not installed; modes for Dense: "):
        dx.probe("Dense", mode="dataset")


# ------------------------------------------------------------------------------------ fit


@pytest.mark.parametrize(
    "policy, scaling, compute",
    [("mixed_float16", True, "float16"), ("mixed_bfloat16", False, "bfloat16")],
)
def test_fit_a_softmax_head_reports_gradients_and_loss_scaling(policy, scaling, compute):
    r = dx.probe(
        "Dense",
        policy=policy,
        kwargs={"units": 3, "activation": "softmax"},
        mode="fit",
    )
    assert r.status == "ok", r.error
    fit = r.fit
    assert fit is not None and fit.loss == "sparse_categorical_crossentropy"
    # raw Keras: compile wraps SGD in LossScaleOptimizer under mixed_float16 only
    keras.config.set_dtype_policy(policy)
    try:
        inputs = keras.Input(shape=(4,), batch_size=2)
        model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(inputs))
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    finally:
        keras.config.set_dtype_policy("float32")
    assert fit.loss_scaling is scaling
    assert fit.loss_scaling is isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert (fit.loss_scale is not None) is scaling
    assert {g.name for g in fit.gradients} == {"kernel", "bias"}
    assert all(g.dtype == g.variable_dtype == "float32" for g in fit.gradients)
    assert fit.loss_value is not None
    if scaling:  # a scaled step with inf/NaN gradients is skipped and the scale halved
        halved = fit.loss_scale / 2 if fit.nonfinite_gradients else fit.loss_scale
        assert fit.loss_scale == 2.0**15 and fit.loss_scale_after == halved
    else:  # bfloat16 has float32's range: nothing overflows unscaled
        assert not fit.nonfinite_gradients and fit.loss_scale_after is None
    assert fit.variables_after == {"kernel": "float32", "bias": "float32"}
    # the step is the one model.fit compiles, its gradients read inside tf.function
    assert fit.compiled is True and r.compiled is True and "tf.function" in fit.execution
    assert all(g.nonfinite is not None for g in fit.gradients)
    assert "compiled training step" in r.trace_note and r.call_trace()  # the eager call's
    assert r.output_dtype == compute == r.declared_dtype
    assert "gradient kernel" in str(r) and ("loss scaling on" in str(r)) is scaling
    card = r._repr_html_()
    assert (
        "Training step: LossScaleOptimizer(SGD)" in card if scaling else "no loss scaling" in card
    )
    assert "Mode <b>fit</b>" in card


def test_fit_of_an_rnn_cell_gives_zeros_in_its_outputs_structure():
    # an LSTMCell returns (h, [h, c]): Keras's fit wants targets in that structure; zeros for
    # the first output alone made the probe answer Keras's KeyError for its own setup
    r = dx.probe("LSTMCell", mode="fit")
    assert r.status == "ok", r.error
    assert {g.name for g in r.fit.gradients} == {"kernel", "recurrent_kernel", "bias"}

    # raw Keras: the same wrapper model, targets for the first output only, then all three
    def wrapped() -> keras.Model:
        inputs = [keras.Input((3,), batch_size=2), keras.Input((4,)), keras.Input((4,))]
        model = keras.Model(inputs, keras.layers.LSTMCell(4)(inputs[0], inputs[1:]))
        model.compile(optimizer="sgd", loss="mean_squared_error")
        return model

    x = [np.ones((2, 3), "float32"), np.zeros((2, 4), "float32"), np.zeros((2, 4), "float32")]
    zeros = np.zeros((2, 4), "float32")
    with pytest.raises(KeyError, match="can't be found"):
        wrapped().fit(x, zeros, verbose=0)
    assert "loss" in wrapped().fit(x, (zeros, [zeros, zeros]), verbose=0).history


@pytest.mark.parametrize("mode", ["predict", "fit", "dataset"])
def test_a_cell_whose_stacked_states_keras_cannot_batch_is_refused_not_answered(mode):
    # StackedRNNCells's states are one (n_cells, batch, units) tensor in the probe: Keras's
    # predict/fit/tf.data count samples on axis 0, so they refused the probe's own layout
    # ("Data cardinality is ambiguous"), which the probe showed as the layer's error
    r = dx.probe("StackedRNNCells", mode=mode)
    assert r.status == "invalid" and r.error.where != "tool", r.error
    assert "input 1 has shape (1, 2, 4) with the batch (2) at axis 1" in r.error.message
    assert "mode='call' or mode='model'" in r.error.message
    wider = dx.probe("LSTMCell", mode=mode, shape=[[8, 3]])  # (2, 8, 4): [h, c] on axis 0
    assert wider.status == "invalid" and "(2, 8, 4)" in wider.error.message
    # one call of the same functional model, no batching, still answers
    assert dx.probe("LSTMCell", mode="model", shape=[[8, 3]]).status == "ok"

    # raw Keras: that layout is what predict refuses, not the cell
    inputs = [keras.Input((3,), batch_size=8), keras.Input((8, 4), batch_size=2)]
    model = keras.Model(inputs, keras.layers.LSTMCell(4)(inputs[0], inputs[1])[0])
    with pytest.raises(ValueError, match="Data cardinality is ambiguous"):
        model.predict([np.ones((8, 3), "float32"), np.zeros((2, 8, 4), "float32")], verbose=0)


def test_fit_on_jax_through_its_worker():
    r = dx.probe("Dense", policy="mixed_float16", kwargs={"units": 2}, backend="jax", mode="fit")
    assert r.status == "ok", r.error
    assert r.fit.loss == "mean_squared_error" and r.fit.loss_scaling
    assert {g.dtype for g in r.fit.gradients} == {"float32"}
    assert r.fit.compiled is True and "jax.jit" in r.fit.execution and "jax.jit" in r.execution
    assert all(g.nonfinite is not None for g in r.fit.gradients)


# ------------------------------------------------------------------------- cache and errors


def test_the_mode_is_in_the_cache_key(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    call = ProbeSpec(target="Dense", backend="numpy", kwargs={"units": 2})
    model = call.model_copy(update={"mode": "model"})
    assert cache.key(call) != cache.key(model)
    assert '"mode":"model"' in model.cache_key() and "mode" not in call.cache_key()
    first, second = pool.submit(call).result(), pool.submit(model).result()
    assert first.ok and second.ok and not second.cached
    assert cache.info()["entries"] == 2
    assert pool.submit(model).result().cached


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: dx.probe("ReLU", mode="training"),
            "mode 'training': ReLU.call() takes no `training` argument, so training=True "
            "changes nothing; modes for ReLU: call, model, predict, fit, dataset",
        ),
        (lambda: dx.probe("ops.add", mode="training"), "ops.add is an op"),
        (lambda: dx.probe("ops.add", mode="fit", backend="numpy"), "numpy backend has no grad"),
        (lambda: dx.probe("ops.add", mode="model"), "modes for ops.add: call"),
        (lambda: dx.probe("losses.MeanSquaredError", mode="model"), "is a loss or metric"),
        (lambda: dx.probe("Dense", mode="predcit"), "did you mean 'predict'"),
        (lambda: dx.probe("Dense", mode=3), "unknown mode 3"),
        (lambda: dx.probe("Dense", mode=[]), "non-empty list"),
        (
            lambda: dx.probe("Dense", backend="numpy", mode="fit"),
            "the numpy backend cannot train",
        ),
    ],
)
def test_modes_that_cannot_apply_say_why_and_which_do(call, message):
    with pytest.raises(InvalidSpecError) as info:
        call()
    assert message in str(info.value)


def test_a_spec_with_a_mode_that_cannot_apply_is_an_invalid_result_not_a_crash():
    r = run_probe(ProbeSpec(target="ReLU", backend="tensorflow", mode="training"))
    assert r.status == "invalid" and "takes no `training` argument" in r.error.message


# -------------------------------------------------------------------------------- surveys


def test_a_survey_across_modes_marks_cells_whose_answer_depends_on_the_mode():
    s = dx.survey(
        ["ReLU", "Dropout"],
        ["float32"],
        ["mixed_float16"],
        backends="jax",
        modes=["call", "training", "predict"],
        progress=False,
    )
    assert s.modes == ("call", "training", "predict")
    relu, dropout = s.cell("ReLU", "float32"), s.cell("Dropout", "float32")
    assert set(relu.results) == {"jax/call", "jax/predict"}  # ReLU takes no training
    assert set(dropout.results) == {"jax/call", "jax/training", "jax/predict"}
    assert all(r.ok for c in (relu, dropout) for r in c.results.values())
    assert relu.classification == dropout.classification == "casts-to-compute"
    frame = s.to_frame()
    assert {"jax/call", "jax/predict"} <= set(frame.columns)
    assert type(s).from_json(s.to_json()).cell("Dropout", "float32").results.keys() == {
        "jax/call",
        "jax/training",
        "jax/predict",
    }
    with pytest.raises(InvalidSpecError, match="did you mean 'predict'"):
        dx.survey(["ReLU"], ["float32"], backends="jax", modes=["predcit"], progress=False)
    assert "modes: call, training, predict" in s.figure().to_json()


def test_a_survey_cell_whose_answer_depends_on_the_mode_diverges():
    from dtype_explorer.records import Survey

    rs = dx.probe(QuantizedAtInference, mode=["call", "training"])
    s = Survey(
        targets=(rs.results[0].spec.target,),
        input_dtypes=("float32",),
        policies=("float32",),
        backends=("tensorflow",),
        modes=("call", "training"),
        compute_dtypes={"float32": "float32"},
        results=rs.results,
    )
    cell = s.cell(rs.results[0].spec.target, "float32")
    assert cell.classification == "diverges"
    assert cell.backend_classification("tensorflow/call") == "other-dtype"


def test_fit_of_dropout_under_mixed_float16_is_seeded_and_survives_no_trainable_weights():
    """Nothing to train: LossScaleOptimizer is never built (it had no dynamic_scale to read);
    the compiled step's dropout draws the same mask each time."""
    ask = {"kwargs": {"rate": 0.5}, "policy": "mixed_float16", "mode": "fit"}
    first, second = dx.probe("Dropout", **ask), dx.probe("Dropout", **ask)
    assert first.status == second.status == "ok", first.error
    assert not first.cached and not second.cached
    assert first.fit.loss_scaling and first.fit.loss_scale == 2.0**15
    assert first.fit.loss_scale_after is None and first.fit.gradients == ()
    assert "The model does not have any trainable weights." in first.fit.warnings
    assert first.fit.loss_value == second.fit.loss_value is not None


def test_predict_of_a_layer_jax_cannot_jit_is_eager_as_keras_runs_it():
    # Keras resolves jit_compile="auto" to False on jax for a layer with supports_jit=False,
    # and its trainer then runs predict eagerly: the probe said "compiled by jax.jit"
    raw = json_on(
        "jax",
        "import json, keras\n"
        "m = keras.Sequential([keras.Input((2,), dtype='int32'), keras.layers.Hashing(3)])\n"
        "m.compile()\n"
        "print(json.dumps(m.jit_compile))",
    )
    assert raw is False
    probed = dx.probe("Hashing", "int32", kwargs={"num_bins": 3}, backend="jax", mode="predict")
    assert probed.status == "ok", probed.error
    assert probed.compiled is False and probed.execution.endswith("(model.jit_compile is False)")
