"""The probe on Keras 2 (issue 25, item 2): ``values=`` and numerics, losses and metrics, the
modes ``model``/``predict``/``fit`` and ``supplied``, each through ``engine="tf_keras"`` from
this Keras 3 process and in the real Keras 2 kernel (nbclient), every dtype and value compared
with the same code run as a plain tf_keras script (the engine's site first,
``TF_USE_LEGACY_KERAS=1``, no dtype-explorer).

Creating the engine needs the package index: without it these tests fail, never skip.
"""

from __future__ import annotations

import json
import textwrap

import nbformat
import numpy as np
import pytest
from keras2_runs import plain_tf_keras
from nbclient import NotebookClient

import dtype_explorer as dx

pytestmark = pytest.mark.timeout(900)

#: What plain tf_keras says, with no dtype-explorer: one JSON line.
RAW = textwrap.dedent(
    """
    import json
    import numpy as np
    import tensorflow as tf

    k = tf.keras
    out = {"module": k.layers.Add.__module__.split(".")[0]}
    a, b = np.array([[100, 100]], "int8"), np.array([[100, 1]], "int8")
    y = k.layers.Add()([a, b])
    out["add_int8"] = [y.dtype.name, y.numpy().ravel().tolist()]
    t, p = np.array([[0.0, 1.0]], "float16"), np.array([[300.0, 0.5]], "float16")
    loss = k.losses.MeanSquaredError()(t, p)
    out["mse_float16"] = [loss.dtype.name, bool(np.isfinite(loss.numpy()))]
    metric = k.metrics.Mean(dtype="mixed_float16")
    metric.update_state(np.array([1.0, 3.0], "float32"))
    out["mean_mixed"] = [metric.result().dtype.name, [v.dtype.name for v in metric.variables]]

    k.mixed_precision.set_global_policy("mixed_float16")
    x = np.full((2, 3), 4.0, "float32")
    inp = k.Input(shape=(3,), batch_size=2, dtype="float32")
    layer = k.layers.Dense(2, kernel_initializer="ones")
    model = k.Model(inp, layer(inp))
    out["predict"] = model.predict(x, verbose=0).dtype.name
    model.compile(optimizer=k.optimizers.SGD(), loss="mean_squared_error")
    opt = model.optimizer
    with tf.GradientTape() as tape:
        scaled = opt.get_scaled_loss(k.losses.mean_squared_error(np.zeros((2, 2)), model(x)))
    grads = opt.get_unscaled_gradients(tape.gradient(scaled, model.trainable_variables))
    before = float(opt.loss_scale)
    value = float(model.train_on_batch(x, np.zeros((2, 2), "float32")))
    out["fit"] = {"optimizer": type(opt).__name__, "before": before,
                  "after": float(opt.loss_scale), "loss": value,
                  "grads": [g.dtype.name for g in grads],
                  "variables": [v.dtype.name for v in layer.weights]}
    k.mixed_precision.set_global_policy("float32")

    k.mixed_precision.set_global_policy("mixed_float16")  # the user's instance, built and set
    mine = k.layers.Dense(2, name="mine")
    mine(np.ones((1, 3), "float32"))
    k.mixed_precision.set_global_policy("float32")
    mine.set_weights([np.full((3, 2), 2.0, "float32"), np.ones(2, "float32")])
    xi = np.array([[1.0, 2.0, 3.0]], "float32")
    yi = mine(xi)
    out["instance"] = [yi.dtype.name, yi.numpy().ravel().tolist(), mine.kernel.true_dtype.name]
    from tensorflow.python.framework import op_callbacks
    ops = []
    def seen(op_type, inputs, attrs, outputs, op_name=None, graph=None):
        name = op_type.decode() if isinstance(op_type, bytes) else op_type
        ops.append([name, [t.dtype.name for t in outputs]])
    op_callbacks.add_op_callback(seen)
    mine(xi)
    op_callbacks.remove_op_callback(seen)
    out["ops"] = ops
    print("DX-OUT " + json.dumps(out))
    """
)

#: In the kernel, after RAW: the user's instance ``mine`` probed as given.
DX_INSTANCE = textwrap.dedent(
    """
    r = dx.probe(mine, values=xi)
    head = list(r.numerics.outputs[0].head)
    print("DX-OUT " + json.dumps({
        "instance": [r.output_dtype, head, r.variables["kernel"].stored],
        "ops": [[t.op.removeprefix("tf.raw_ops."), [o.dtype for o in t.outputs]] for t in r.trace],
        "policy": r.spec.policy, "weights_kept": mine.get_weights()[0].ravel().tolist()[:2],
    }))
    """
)

#: The same questions through dtype-explorer (in the kernel: in process; here: the worker).
DX = textwrap.dedent(
    """
    import json
    import numpy as np
    import dtype_explorer as dx

    def answers(**engine):
        out = {}
        a, b = np.array([[100, 100]], "int8"), np.array([[100, 1]], "int8")
        add = dx.probe("Add", values=[a, b], **engine)
        head = add.numerics.outputs[0].head
        out["add_int8"] = [add.output_dtype, list(head)]
        out["add_finding"] = [f.kind for f in add.numerics.findings]
        t, p = np.array([[0.0, 1.0]], "float16"), np.array([[300.0, 0.5]], "float16")
        mse = dx.probe("losses.MeanSquaredError", values=[t, p], **engine)
        out["mse_float16"] = [mse.output_dtype, not mse.numerics.nonfinite_from_finite]
        out["mse_nonfinite"] = mse.numerics.nonfinite_from_finite
        mean = dx.probe("metrics.Mean", values=[np.array([1.0, 3.0], "float32")],
                        policy="mixed_float16", **engine)
        states = [s.dtype for s in mean.cast_path if s.stage == "variables"]
        out["mean_mixed"] = [mean.output_dtype, states[:2]]
        x = np.full((2, 3), 4.0, "float32")
        kw = {"units": 2, "kernel_initializer": "ones"}
        pred = dx.probe("Dense", values=x, policy="mixed_float16", kwargs=kw, mode="predict",
                        **engine)
        out["predict"] = pred.output_dtype
        fit = dx.probe("Dense", values=x, policy="mixed_float16", kwargs=kw, mode="fit", **engine)
        f = fit.fit
        out["fit"] = {"optimizer": f.optimizer, "before": f.loss_scale,
                      "after": f.loss_scale_after, "loss": f.loss_value,
                      "grads": [g.dtype for g in f.gradients],
                      "variables": list(f.variables_after.values())}
        out["supplied"] = [[s.part for s in r.supplied] for r in (add, fit)]
        sampled = dx.probe("Dense", "float16", kwargs={"units": 2}, **engine)
        out["supplied_sample"] = [s.part for s in sampled.supplied]
        out["engine"] = fit.versions.get("engine")
        return out
    """
)


@pytest.fixture(scope="module")
def plain(tf_keras_engine) -> dict:
    out = plain_tf_keras(tf_keras_engine, "-c", RAW)
    assert out["module"] == "tf_keras"
    return out


def _answers(**engine) -> dict:
    space: dict = {}
    exec(DX, space)
    return space["answers"](**engine)


def _agrees(probed: dict, plain: dict, engine_spec: str) -> None:
    """Every dtype and value dtype-explorer said is plain tf_keras's."""
    assert probed["add_int8"] == plain["add_int8"]  # the wrapped int8 values themselves
    assert plain["add_int8"][1] == [-56, 101]
    assert probed["add_finding"][0] == "wraparound"
    assert probed["mse_float16"] == plain["mse_float16"] == ["float16", False]  # 300**2: inf
    assert probed["mean_mixed"] == plain["mean_mixed"]
    assert probed["predict"] == plain["predict"] == "float16"
    fit, raw = probed["fit"], plain["fit"]
    assert raw["optimizer"].startswith("LossScaleOptimizer")
    assert fit["optimizer"] == "LossScaleOptimizer(SGD)"
    for key in ("before", "after", "grads", "variables"):
        assert fit[key] == raw[key], key
    assert fit["loss"] == pytest.approx(raw["loss"], rel=1e-3)
    assert raw["after"] == raw["before"] / 2  # float16 gradients overflowed: the scale halves
    assert probed["supplied"] == [["policy"], []]  # Add: no policy given; fit: nothing
    assert probed["supplied_sample"] == ["policy", "shape", "sample"]
    assert probed["engine"] == engine_spec


def test_keras2_probe_from_a_keras3_process_answers_as_plain_tf_keras(tf_keras_engine, plain):
    _agrees(_answers(engine="tf_keras"), plain, tf_keras_engine.spec)


def test_keras2_probe_in_the_keras2_kernel_answers_as_plain_tf_keras(tf_keras_engine, plain):
    nb = nbformat.v4.new_notebook()
    code = RAW + DX + '\nprint("DX-OUT " + json.dumps(answers()))\n' + DX_INSTANCE
    nb.cells = [nbformat.v4.new_code_cell(code)]
    NotebookClient(nb, kernel_name=tf_keras_engine.kernel_name, timeout=600).execute()
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs if o.output_type == "stream")
    lines = [line for line in text.splitlines() if line.startswith("DX-OUT ")]
    assert len(lines) == 3, text[-3000:]
    assert json.loads(lines[0].removeprefix("DX-OUT ")) == plain  # the kernel is plain tf_keras
    _agrees(json.loads(lines[1].removeprefix("DX-OUT ")), plain, tf_keras_engine.spec)
    instance = json.loads(lines[2].removeprefix("DX-OUT "))
    assert instance["instance"] == plain["instance"] == ["float16", [13.0, 13.0], "float32"]
    assert instance["policy"] == "mixed_float16"  # its own
    assert instance["ops"] == plain["ops"]  # the op trace: TensorFlow's ops, as plain TF ran them
    assert ["MatMul", ["float16"]] in plain["ops"] and ["Cast", ["float16"]] in plain["ops"]
    assert instance["weights_kept"] == [2.0, 2.0]  # the user's layer is not changed


def test_keras2_says_what_it_lacks_once_and_refuses_modes_it_has_not(tf_keras_engine):
    r = dx.probe("Dense", values=np.ones((1, 3), "float64"), kwargs={"units": 2}, engine="tf_keras")
    assert r.ok and r.numerics is not None and r.numerics.reference_dtype == "float64"
    assert sum("result_type" in b for b in r.basis) == 1
    bad = dx.probe("Dense", kwargs={"units": 2}, mode="training", engine="tf_keras")
    assert bad.status == "invalid" and "call, model, predict, fit" in bad.error.message


def test_keras2_and_keras3_values_diverge_where_their_loss_computes_in_other_dtypes(
    tf_keras_engine,
):
    """MeanSquaredError on float16 values: Keras 2 computes in y_pred's float16 (300**2 is
    inf), Keras 3's Loss.__call__ converts to its float32 dtype first."""
    from dtype_explorer.keras_run import keras2_vs_keras3

    t, p = np.array([[0.0, 1.0]], "float16"), np.array([[300.0, 0.5]], "float16")
    keras2 = dx.probe("losses.MeanSquaredError", values=[t, p], engine="tf_keras")
    keras3 = dx.probe("losses.MeanSquaredError", values=[t, p], backend="tensorflow")
    found = keras2_vs_keras3(keras2, keras3)
    assert found.comparable and found.diverges and found.first == 0
    assert (keras2.output_dtype, keras3.output_dtype) == ("float16", "float32")
    assert keras3.numerics.outputs[0].head[0] == pytest.approx((300.0**2 + 0.25) / 2, rel=1e-3)
    assert "inf/NaN in Keras 2 (float16)" in found.summary
    assert "output" in found.grid.differing
    same = keras2_vs_keras3(
        dx.probe("Add", values=[t, p], engine="tf_keras"),
        dx.probe("Add", values=[t, p], backend="tensorflow"),
    )
    assert same.comparable and not same.diverges and same.compared == 2
    drawn = keras2_vs_keras3(
        dx.probe("Dense", values=p, kwargs={"units": 2}, engine="tf_keras"),
        dx.probe("Dense", values=p, kwargs={"units": 2}, backend="tensorflow"),
    )
    assert not drawn.comparable and "kernel" in drawn.note
