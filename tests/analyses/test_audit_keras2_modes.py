"""The Keras 2 audit's modes ``predict`` and ``fit``: tf.keras models audited in the Keras 2
engine's process (``keras2_modes_script``, as the Keras 2 kernel runs them) beside plain
tf_keras on the same code (``model.predict``'s dtype; ``compile``'s ``LossScaleOptimizer``,
its scale before and after one ``train_on_batch``, the gradients' dtypes), and the same models
written in Keras 3 audited through ``engine="tf_keras"`` from this process: rebuilt in Keras 2,
they give the same report.

Creating the engine needs the package index: without it these tests fail, never skip.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import keras
import numpy as np
import pytest

import dtype_explorer as dx

pytestmark = pytest.mark.timeout(900)

SCRIPT = Path(__file__).with_name("keras2_modes_script.py")
SAMPLE = np.full((2, 3), 10.0, "float32")
#: name: (the head's dtype, the kernels' constant)
MODELS = {"f16head": (None, 0.1), "overflow": ("float32", 10.0)}


@pytest.fixture(scope="module")
def kernel(tf_keras_engine) -> dict:
    """The script's answers under the Keras 2 engine."""
    command = dx.engines.script_command(tf_keras_engine.spec, str(SCRIPT))
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("DX-OUT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(lines[-1].removeprefix("DX-OUT "))


def _keras3_model(name: str):
    """The script's model written in Keras 3 (built under mixed_float16, put back after)."""
    head_dtype, scale = MODELS[name]
    saved = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        init = keras.initializers.Constant(scale)
        inputs = keras.Input((3,), name="x")
        hidden = keras.layers.Dense(4, name="d1", kernel_initializer=init)(inputs)
        head = keras.layers.Dense(1, name="head", dtype=head_dtype, kernel_initializer=init)
        return keras.Model(inputs, head(hidden), name=name)
    finally:
        keras.config.set_dtype_policy(saved)


def _audited(report) -> dict:
    """As the script writes a report."""
    fit = report.fit
    return {
        "mode": report.mode,
        "execution": report.execution,
        "layers": [
            [c.path, [t.dtype for t in c.received], [t.dtype for t in c.outputs]]
            for c in report.layers
        ],
        "findings": [[f.kind, f.severity, f.path, f.fix] for f in report.findings],
        "predict": None if report.predict is None else [t.dtype for t in report.predict.outputs],
        "fit": None
        if fit is None
        else {
            "optimizer": fit.optimizer,
            "loss_scaling": fit.loss_scaling,
            "loss_scale": [fit.loss_scale, fit.loss_scale_after],
            "gradients": [[g.name, g.dtype, g.variable_dtype, g.nonfinite] for g in fit.gradients],
        },
    }


@pytest.mark.parametrize("name", list(MODELS))
def test_predict_in_the_kernel_is_keras_2s_model_predict(kernel, name):
    got = kernel[name]
    assert got["predict"]["predict"] == [got["raw_predict"]]
    assert "tf.function" in got["predict"]["execution"]
    assert got["predict"]["layers"][0][2] == [got["raw_predict"]]  # the model's output
    kinds = [f[0] for f in got["predict"]["findings"]]
    assert ("float16-output" in kinds) == (name == "f16head")
    assert got["untouched"]


@pytest.mark.parametrize("name", list(MODELS))
def test_fit_in_the_kernel_is_one_train_on_batch_with_keras_2s_loss_scaling(kernel, name):
    got, raw = kernel[name]["fit"]["fit"], kernel[name]["raw_fit"]
    assert got["loss_scaling"] is raw["loss_scaling"] is True
    assert got["optimizer"] == "LossScaleOptimizer(SGD)"
    assert got["loss_scale"] == raw["loss_scale"] == [32768.0, 16384.0]  # the step overflowed
    assert [g[:2] for g in got["gradients"]] == raw["gradients"]
    assert any(g[3] for g in got["gradients"]) and not all(g[3] for g in got["gradients"])
    gradient = [f for f in kernel[name]["fit"]["findings"] if f[0] == "nonfinite-gradient"]
    assert [f[1:3] for f in gradient] == [["info", name]]  # skipped by design, under scaling


@pytest.mark.parametrize("mode", ["predict", "fit"])
@pytest.mark.parametrize("name", list(MODELS))
def test_through_the_engine_the_keras_3_model_gets_the_kernels_report(
    kernel, tf_keras_engine, name, mode
):
    model = _keras3_model(name)
    weights = [w.copy() for w in model.get_weights()]
    report = dx.check_model(model, SAMPLE, mode=mode, engine=tf_keras_engine.spec)
    assert report.keras.startswith("2.") and any("rebuilt in Keras 2" in n for n in report.notes)
    assert _audited(report) == kernel[name][mode]
    assert all(np.array_equal(a, b) for a, b in zip(weights, model.get_weights()))
