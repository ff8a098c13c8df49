""" "Copy as code", run: the raw-Keras script ``as_code()`` writes is run in fresh processes
(``KERAS_BACKEND`` set by the script itself) and must print the dtypes the tool showed, or
raise what the tool said Keras raised; the ``dx`` call it writes, run, must give the same
record. Cases: a layer on uint8 input on two backends (they diverge: jax answers, torch
raises), an op on the user's own values, a layer under mixed_float16, a loss, and the audit of
a small model (its call and a multi-step fit under loss scaling), of a model whose bfloat16
weights the script writes out, and of a quantized audit."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest

import dtype_explorer as dx

#: Runs several scripts of one backend, each as ``__main__`` with its own argv, and prints
#: each one's output (or the error it raised) as JSON: one process per backend.
RUNNER = textwrap.dedent(
    """
    import contextlib, io, json, runpy, sys
    found = []
    for path, argv in json.loads(sys.argv[1]):
        sys.argv = [path, *argv]
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                runpy.run_path(path, run_name="__main__")
            found.append({"out": out.getvalue(), "error": None})
        except Exception as error:
            found.append({"out": out.getvalue(), "error": type(error).__name__ + ": " + str(error)})
    print(json.dumps(found))
    """
)


def run_alone(path: Path, *argv: str) -> subprocess.CompletedProcess:
    """``python path argv...`` in a process of its own, with no dtype-explorer on its path."""
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, str(path), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def run_together(backend: str, scripts: list[tuple[Path, list[str]]]) -> list[dict]:
    """Several independent scripts of ``backend`` in one fresh process (each also runs
    alone: it sets ``KERAS_BACKEND`` itself, to the same backend)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["KERAS_BACKEND"] = backend
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps([[str(p), a] for p, a in scripts])],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def printed(out: str) -> dict:
    """What a probe's script printed: output dtypes, compute dtype, each variable's dtype."""
    said: dict = {"variables": {}}
    for line in out.splitlines():
        if line.startswith("output dtypes:"):
            said["outputs"] = ast.literal_eval(line.split(":", 1)[1].strip())
        elif line.startswith("layer.compute_dtype:"):
            said["compute"] = line.split(":", 1)[1].strip()
        elif line.startswith("variable "):
            name, dtype = line.removeprefix("variable ").split(": ")
            said["variables"][name] = dtype
    return said


def layers_printed(out: str) -> dict[str, tuple[str, str, dict]]:
    """What an audit's script printed per layer: its policy, compute dtype and variables."""
    found = {}
    for line in out.splitlines():
        if line.startswith("layer "):
            name, rest = line.removeprefix("layer ").split(": ", 1)
            policy, compute, variables = rest.split(", ", 2)
            found[name] = (
                policy.removeprefix("policy "),
                compute.removeprefix("compute "),
                ast.literal_eval(variables.removeprefix("variables ")),
            )
    return found


def same_answer(again, result) -> None:
    """The dx call's answer is the same record: spec, verdict, dtypes, cast path."""
    assert again.spec == result.spec
    assert again.verdict == result.verdict and again.status == result.status
    assert again.output_dtypes == result.output_dtypes
    assert [(s.stage, s.dtype) for s in again.cast_path] == [
        (s.stage, s.dtype) for s in result.cast_path
    ]


def run_dx(code: str, **names):
    """The ``dx`` call of a ``CodeCopy`` run (with ``names`` bound: the user's model)."""
    namespace = dict(names)
    exec(
        compile(code.replace("print(result)", "").replace("print(report)", ""), "dx", "exec"),
        namespace,
    )
    return namespace.get("result", namespace.get("report"))


# ------------------------------------------------------------------------------ probes


@pytest.fixture(scope="module")
def probes():
    """The probes, asked of the workers (one fresh question each)."""
    return {
        "conv": dx.probe("Conv1D", "uint8", backend=["jax", "torch"], use_cache=False),
        "add": dx.probe(
            "ops.add", values=[np.array([[1, 250]], "uint8"), 7], backend="jax", use_cache=False
        ),
        "mixed": dx.probe(
            "Dense", "float64", policy="mixed_float16", kwargs={"units": 3}, backend="jax",
            use_cache=False,
        ),
        "loss": dx.probe(
            "losses.MeanSquaredError", ["float16", "float32"], policy="mixed_float16",
            backend="jax", use_cache=False,
        ),
    }  # fmt: skip


def test_the_raw_scripts_print_the_dtypes_the_tool_showed(probes, tmp_path):
    scripts = {}
    for name, answer in probes.items():
        code = answer.as_code()
        assert code.runnable, code.fill_in  # nothing to fill in: the tool's samples are written
        scripts[name] = tmp_path / f"{name}.py"
        scripts[name].write_text(code.script)
    jax_runs = run_together(
        "jax",
        [(scripts["conv"], ["jax"]), *((scripts[n], []) for n in ("add", "mixed", "loss"))],
    )
    conv, add, mixed, loss = jax_runs
    # a layer on uint8 on two backends: jax answers, torch raises (each as the tool said)
    jax_answer, torch_answer = probes["conv"]["jax"], probes["conv"]["torch"]
    assert conv["error"] is None
    said = printed(conv["out"])
    assert said["outputs"] == list(jax_answer.output_dtypes)
    assert said["compute"] == "float32" == jax_answer.spec.policy  # no autocast of uint8
    assert said["variables"] == {k: v.stored for k, v in jax_answer.variables.items()}
    alone = run_alone(scripts["conv"], "torch")  # runnable alone, on the other backend
    assert torch_answer.status == "error" and alone.returncode != 0
    assert f"{torch_answer.error.type}: " in alone.stderr
    assert torch_answer.error.message.splitlines()[-1].strip()[:40] in alone.stderr
    # an op on the user's own values (uint8 array + a Python int)
    assert add["error"] is None
    assert printed(add["out"])["outputs"] == list(probes["add"].output_dtypes)
    # a layer under mixed_float16: float16 compute, float32 variables, float16 out
    said = printed(mixed["out"])
    answer = probes["mixed"]
    assert said["outputs"] == list(answer.output_dtypes) == ["float16"]
    assert said["compute"] == "float16" == answer.steps("autocast")[0].dtype
    assert said["variables"] == {k: v.stored for k, v in answer.variables.items()}
    assert set(said["variables"].values()) == {"float32"}
    # a loss built under the policy, on float16 and float32 tensors
    assert loss["error"] is None
    assert printed(loss["out"])["outputs"] == list(probes["loss"].output_dtypes)


def test_the_dx_call_asks_the_same_question_again(probes):
    for answer in probes.values():
        again = run_dx(answer.as_code().dx)
        pairs = zip(getattr(again, "results", (again,)), getattr(answer, "results", (answer,)))
        for one, other in pairs:
            same_answer(one, other)


# ------------------------------------------------------------------------------ audits


SEED = 7


def small_model() -> keras.Model:
    """A small model under mixed_float16 (its head in float32), compiled: loss scaling."""
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = keras.Input((4,), name="x")
        # seeded: the same weights whatever ran before in this process (unseeded, all eight
        # units could start dead on x = 30, the loss 0 and no step skipped)
        seeded = {"kernel_initializer": keras.initializers.GlorotUniform(seed=SEED)}
        hidden = keras.layers.Dense(8, activation="relu", name="hidden", **seeded)(inputs)
        outputs = keras.layers.Dense(3, name="head", dtype="float32", **seeded)(hidden)
        model = keras.Model(inputs, outputs, name="small")
    finally:
        keras.config.set_dtype_policy("float32")
    model.compile(optimizer=keras.optimizers.SGD(1e-4), loss="mse")
    return model


def test_an_audit_as_code_runs_raw_and_asks_again(tmp_path):
    model = small_model()
    x = np.full((2, 4), 30.0, "float32")  # overflows float16 once scaled: skipped steps
    call = dx.check_model(model, x)
    fit = dx.check_model(model, x, mode="fit", steps=4)
    codes = {"call": call.as_code(), "fit": fit.as_code()}
    for code in codes.values():
        assert code.fill_in == ("model: your model",)  # the dx call's model; the script runs
        assert "keras.saving.deserialize_keras_object(config)" in code.script
    for name, code in codes.items():
        (tmp_path / f"{name}.py").write_text(code.script)
    ran = run_together("tensorflow", [(tmp_path / "call.py", []), (tmp_path / "fit.py", [])])
    for report, run in zip((call, fit), ran):
        assert run["error"] is None, run
        layers = layers_printed(run["out"])
        for layer in report.layers[1:]:  # the model's own row is the model
            policy, compute, variables = layers[layer.path.rsplit("/", 1)[-1]]
            assert (policy, compute) == (layer.policy, layer.compute_dtype)
            assert variables == {k: v.stored for k, v in layer.variables.items()}
        outputs = [t.dtype for t in report.layers[0].outputs]
        assert printed(run["out"])["outputs"] == outputs
    # the raw run of the steps: Keras's own LossScaleOptimizer skips and halves as the tool saw
    steps = [line for line in ran[1]["out"].splitlines() if line.startswith("step ")]
    assert len(steps) == 4 and all("skipped True" in s for s in steps[:1])
    scales = [float(s.split("loss scale ")[1].split(",")[0]) for s in steps]
    assert scales[0] == 2.0**14 and scales == [s.loss_scale for s in fit.fit.steps]
    losses = [float(s.split("loss ")[1].split(",")[0]) for s in steps]  # the same weights
    np.testing.assert_allclose(losses, [s.loss for s in fit.fit.steps], rtol=1e-5)
    assert "model.set_weights([  # the audit's weights (67 values)" in codes["fit"].script
    # the dx call, run on the user's model, gives the same report
    again = run_dx(codes["fit"].dx, model=model)
    assert [c.row() for c in again.layers] == [c.row() for c in fit.layers]
    assert [f.kind for f in again.findings] == [f.kind for f in fit.findings]
    assert [(s.loss_scale, s.skipped) for s in again.fit.steps] == [
        (s.loss_scale, s.skipped) for s in fit.fit.steps
    ]
    assert (
        "dx.check_model(\n    model,\n    sample,\n    mode='fit',\n    steps=4," in codes["fit"].dx
    )


def test_an_audit_of_bfloat16_weights_as_code_runs_alone(tmp_path):
    inputs = keras.Input((8,))
    model = keras.Model(inputs, keras.layers.Dense(4, name="d", dtype="bfloat16")(inputs))
    x = np.ones((2, 8), "float32")
    raw = {v.name: keras.backend.standardize_dtype(v.dtype) for v in model.get_layer("d").weights}
    raw_output = keras.backend.standardize_dtype(model(x).dtype)
    assert raw == {"kernel": "bfloat16", "bias": "bfloat16"} and raw_output == "bfloat16"

    code = dx.check_model(model, x).as_code()
    assert "dtype=ml_dtypes.bfloat16" in code.script  # the weights, written out
    (tmp_path / "repro.py").write_text(code.script)
    done = run_alone(tmp_path / "repro.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert layers_printed(done.stdout)["d"] == ("bfloat16", "bfloat16", raw)
    assert printed(done.stdout)["outputs"] == [raw_output]


def test_a_quantized_audit_as_code_quantizes_the_float_model_once(tmp_path):
    def made() -> keras.Model:
        inputs = keras.Input((8,))
        seeded = keras.initializers.GlorotUniform(seed=SEED)
        return keras.Model(
            inputs, keras.layers.Dense(4, name="d", kernel_initializer=seeded)(inputs)
        )

    x = np.random.RandomState(0).randn(2, 8).astype("float32")
    raw_model = made()
    raw_model.quantize("int8")  # raw Keras: the float model quantized
    layer = raw_model.get_layer("d")
    raw = {v.name: keras.backend.standardize_dtype(v.dtype) for v in layer.weights}
    raw_output = keras.backend.standardize_dtype(raw_model(x).dtype)

    code = dx.check_model(made(), x, quantize="int8").as_code()
    assert code.script.count("model.quantize('int8')") == 1
    (tmp_path / "repro.py").write_text(code.script)
    done = run_alone(tmp_path / "repro.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert layers_printed(done.stdout)["d"] == (layer.dtype_policy.name, layer.compute_dtype, raw)
    assert printed(done.stdout)["outputs"] == [raw_output]
