"""``check_model(keras3_model, engine="tf_keras")`` from this (Keras 3) process: the model
rebuilt in Keras 2 in the engine's worker and audited there. Compared with the same models
written in tf.keras and run as a plain script in the engine's environment
(``keras2_engine_raw_script``): tf_keras's own eager calls, and the Keras 2 audit a tf.keras
user gets in the Keras 2 kernel. The rebuilt models' outputs are compared with Keras 3's (the
weights carried over).

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
from dtype_explorer.analyses.audit._engine import user_set_only
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import arguments_given

pytestmark = pytest.mark.timeout(900)

SCRIPT = Path(__file__).with_name("keras2_engine_raw_script.py")


def _float64_model():
    inputs = keras.Input((3,), dtype="float64", name="x")
    return keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs), name="m")


def _mixed_model():
    """Under mixed_float16, the head left float16 (the global policy put back afterwards)."""
    saved = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = keras.Input((3,), name="x")
        hidden = keras.layers.Dense(4, name="d1")(inputs)
        return keras.Model(inputs, keras.layers.Dense(2, name="head")(hidden), name="mixed")
    finally:
        keras.config.set_dtype_policy(saved)


SAMPLES = {"float64": np.ones((2, 3)), "mixed": np.ones((2, 3), "float32")}
MODELS = {"float64": _float64_model, "mixed": _mixed_model}


@pytest.fixture(scope="module")
def models() -> dict:
    return {name: make() for name, make in MODELS.items()}


@pytest.fixture(scope="module")
def plain(tf_keras_engine, models, tmp_path_factory) -> dict:
    """The script's answers under the Keras 2 engine, with the Keras 3 configs to rebuild."""
    given = {}
    for name, model in models.items():
        config = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
        given[name] = {
            "config": user_set_only(config, arguments_given(model)),
            "weights": {m.name: [w.tolist() for w in m.get_weights()] for m in model.layers},
            "policies": [keras.config.dtype_policy().name, model.dtype_policy.name],
            "sample": SAMPLES[name].tolist(),
            "dtype": SAMPLES[name].dtype.name,
        }
    path = tmp_path_factory.mktemp("k2") / "configs.json"
    path.write_text(json.dumps(given))
    command = [*dx.engines.script_command(tf_keras_engine.spec, str(SCRIPT)), str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("DX-OUT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(lines[-1].removeprefix("DX-OUT "))


@pytest.fixture(scope="module")
def reports(tf_keras_engine, models) -> dict:
    return {
        name: dx.check_model(model, SAMPLES[name], engine=tf_keras_engine.spec)
        for name, model in models.items()
    }


def _audit(report) -> dict:
    return {
        "layers": [
            [
                c.path,
                [t.dtype for t in c.given or ()],
                [t.dtype for t in c.received],
                [t.dtype for t in c.outputs],
                {n: v.stored for n, v in c.variables.items()},
            ]
            for c in report.layers
        ],
        "findings": [[f.kind, f.path, f.fix] for f in report.findings],
        "policy": report.policy,
    }


@pytest.mark.parametrize("name", list(MODELS))
def test_the_rebuilt_model_is_audited_as_the_same_model_written_in_tf_keras(name, plain, reports):
    report = reports[name]
    assert report.keras.startswith("2.") and report.engine.startswith("tf_keras")
    assert _audit(report) == plain[name]["audit"]
    assert any("rebuilt in Keras 2" in note for note in report.notes)
    # the dtypes tf_keras itself gives, calling each layer eagerly
    by_path = {c.path.rsplit("/", 1)[-1]: c for c in report.layers}
    for layer, given, output, variables in plain[name]["raw"]["layers"]:
        call = by_path[layer]
        assert [t.dtype for t in call.given] == [given]
        assert [t.dtype for t in call.outputs] == [output]
        assert {n: v.stored for n, v in call.variables.items()} == variables
    assert [t.dtype for t in report.layers[0].outputs] == [plain[name]["raw"]["output"]]


def test_float64_into_dense_is_a_silent_downcast_with_no_unproven_fix(reports):
    """Issue 38 item 3: old code showed set_floatx("float64") here, never run; a Keras 2
    audit runs no fix on a copy, so it shows none and says why."""
    report = reports["float64"]
    assert [(f.kind, f.path) for f in report.findings] == [("silent-downcast", "m/dense")]
    finding = report.findings[0]
    assert finding.fix == "" and "Keras 3 model only" in finding.proof.not_tried


def test_a_float16_head_under_mixed_float16_is_found_measured_without_an_unproven_fix(reports):
    report = reports["mixed"]
    assert report.policy == "mixed_float16"
    head = [f for f in report.findings if f.kind == "float16-output"]
    assert [f.path for f in head] == ["mixed/head"]
    assert head[0].fix == "" and "its values are finite" in head[0].message
    variables = {c.path: c.variables for c in report.layers}["mixed/head"]
    assert (variables["kernel"].stored, variables["kernel"].read) == ("float32", "float16")


@pytest.mark.parametrize("name", list(MODELS))
def test_the_weights_are_carried_over(name, plain, models):
    expected = keras.ops.convert_to_numpy(models[name](SAMPLES[name]))
    rebuilt = plain["rebuilt"][name]
    assert rebuilt["dtype"] == keras.backend.standardize_dtype(expected.dtype)
    np.testing.assert_allclose(rebuilt["values"], expected.astype("float64"), rtol=1e-3)


def test_what_keras_2_lacks_is_refused_by_name(tf_keras_engine):
    lora = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, lora_rank=2, name="d")])
    lacks = r"Dense has no argument 'lora_rank'.*Dense.lora_rank=2"
    with pytest.raises(InvalidSpecError, match=lacks):
        dx.check_model(lora, engine=tf_keras_engine.spec)
    rms = keras.Sequential([keras.Input((3,)), keras.layers.RMSNormalization()])
    with pytest.raises(InvalidSpecError, match="Keras 2 has no layer RMSNormalization"):
        dx.check_model(rms, engine=tf_keras_engine.spec)
    with pytest.raises(InvalidSpecError, match=r"subclassed model: write it in tf\.keras"):
        dx.check_model(_Sub(), np.ones((2, 3), "float32"), engine=tf_keras_engine.spec)


class _Sub(keras.Model):
    def call(self, x):
        return x * 2.0


def test_arguments_and_models_the_keras_2_rebuild_does_not_take_are_refused():
    model = _float64_model()
    with pytest.raises(InvalidSpecError, match="it takes no policy"):
        dx.check_model(model, policy="mixed_float16", engine="tf_keras")
    with pytest.raises(InvalidSpecError, match=r"mode 'save' cannot audit.*rebuilt in Keras 2"):
        dx.check_model(model, mode="save", engine="tf_keras")


def test_quantize_on_the_keras2_engine_is_refused_naming_why():
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    with pytest.raises(InvalidSpecError, match=r"Keras 2 .* has no quantization.*quantize='int8'"):
        dx.check_model(model, np.ones((2, 3), "float32"), engine="tf_keras", quantize="int8")
