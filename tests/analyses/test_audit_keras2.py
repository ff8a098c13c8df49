"""``check_model`` / ``%dtype_check`` on Keras 2 models: tf.keras code (``keras2_audit_script``)
audited in the Keras 2 engine's process (as ``dtype-explorer run --engine tf_keras`` runs it),
the records and findings compared with the same models audited here by Keras 3, and the fixes
written in tf.keras code. The float32-only SavedModel is built locally (no download) and
wrapped in ``hub.KerasLayer`` (the engine installs tensorflow-hub).

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
from dtype_explorer.analyses.audit._keras2 import _refuse, in_tf_keras
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import Finding
from dtype_explorer.runtime import _plan as plans
from dtype_explorer.runtime import engines

pytestmark = pytest.mark.timeout(900)

SCRIPT = Path(__file__).with_name("keras2_audit_script.py")


@pytest.fixture(scope="module")
def keras2(tf_keras_engine) -> dict:
    """The script's audits, run under the Keras 2 engine."""
    if not any(p.startswith("tensorflow-hub==") for p in tf_keras_engine.packages):
        pytest.fail(
            f"the engine {tf_keras_engine.spec} in {tf_keras_engine.path} was created before "
            f"tensorflow-hub joined its packages ({tf_keras_engine.packages}): remove it "
            "(dx.engines.remove('tf_keras')) and let the test create it"
        )
    command = dx.engines.script_command(tf_keras_engine.spec, str(SCRIPT))
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("DX-OUT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(lines[-1].removeprefix("DX-OUT "))


def _flow(layers: list) -> list:
    """Each call's path, given, received and output dtypes (what both Kerases record)."""
    return [layer[:1] + layer[2:5] for layer in layers]


def _kinds(findings: list) -> list:
    return [(f[0], f[2]) for f in findings]


def _keras3(report) -> dict:
    def names(infos) -> list:
        return [t.dtype for t in infos or ()]

    return {
        "layers": [
            [c.path, c.layer_class, names(c.given), names(c.received), names(c.outputs)]
            for c in report.layers
        ],
        "findings": [[f.kind, f.severity, f.path, f.message, f.fix] for f in report.findings],
    }


# --------------------------------------------------------------------------- Keras 2 vs 3


def test_float64_into_a_functional_model_finds_what_keras_3_finds(keras2):
    inputs = keras.Input((3,), dtype="float64", name="x")
    model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs), name="m")
    k3 = _keras3(dx.check_model(model, np.ones((2, 3))))
    k2 = keras2["float64"]
    assert k2["keras"].startswith("2.")
    assert _flow(k2["layers"]) == _flow(k3["layers"])
    assert _kinds(k2["findings"]) == _kinds(k3["findings"]) == [("silent-downcast", "m/dense")]
    # issue 38 item 3: Keras 3's audit ran the model in float64 on a copy and shows that fix;
    # the Keras 2 audit runs no copy, so it shows none (old code: set_floatx, never run)
    assert k3["findings"][0][4] and "float64" in k3["findings"][0][4]
    assert k2["findings"][0][4] == "" and "Keras 3 model only" in k2["findings"][0][5]
    assert any("result_type" in note and "op trace" in note for note in k2["notes"])
    assert keras2["floatx_follows"] == "float64"  # the audit never pins the global policy


def test_a_custom_layer_casting_against_mixed_float16_finds_what_keras_3_finds(keras2):
    class Scale(keras.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(name="w", shape=(shape[-1],), initializer="ones")

        def call(self, x):
            return keras.ops.cast(x * self.w, "float32")

    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = keras.Input((3,), name="x")
        x = Scale(name="scale")(keras.layers.Dense(3, name="dense")(inputs))
        model = keras.Model(inputs, x, name="c")
    finally:
        keras.config.set_dtype_policy(before)
    k3 = _keras3(dx.check_model(model, np.ones((2, 3), "float32")))
    k2 = keras2["custom"]
    assert _flow(k2["layers"]) == _flow(k3["layers"])
    assert _kinds(k2["findings"]) == _kinds(k3["findings"])
    assert ("custom-variable-dtype", "c/scale") in _kinds(k2["findings"])
    scale = next(layer for layer in k2["layers"] if layer[0] == "c/scale")
    assert scale[5] == {"w": ["float32", "float16"]}  # an AutoCastVariable, read in float16
    # issue 38 item 3: the change is in the layer's own code, which no audit can run: no fix
    custom = next(f for f in k2["findings"] if f[0] == "custom-variable-dtype")
    assert custom[4] == "" and "own code" in custom[5]


def test_uint8_pixels_into_batch_normalization(keras2):
    inputs = keras.Input((28, 28), dtype="uint8", name="pixels")
    x = keras.layers.BatchNormalization(name="bn")(keras.layers.Flatten(name="flatten")(inputs))
    model = keras.Model(inputs, keras.layers.Dense(10, name="head")(x), name="mnist")
    sample = np.full((2, 28, 28), 200, "uint8")
    k3 = _keras3(dx.check_model(model, sample, mode="training"))
    k2 = keras2["uint8"]
    assert keras2["training_kept_variables"]  # old code: the user's moving statistics moved
    assert [layer[:3] for layer in k2["layers"]] == [layer[:3] for layer in k3["layers"]]
    assert ("int-into-float-layer", "mnist/bn") in _kinds(k2["findings"])
    assert _kinds(k2["findings"]) == _kinds(k3["findings"])
    # issue 38 item 3: a Keras 2 audit runs no fix on a copy, so it shows none, and says why
    found = next(f for f in k2["findings"] if f[0] == "int-into-float-layer")
    assert found[4] == "" and "Keras 3 model only" in found[5]


# --------------------------------------------------------------------------- hub.KerasLayer


def test_a_float32_only_saved_model_under_mixed_float16_by_the_magic(keras2):
    calls = {layer[0]: layer for layer in keras2["hub"]["layers"]}
    hub_call = calls["seq/hub"]
    assert hub_call[1] == "KerasLayer" and hub_call[3] == ["float16"]
    # the real failure, as the user's own call raised it
    raised = keras2["user_error"][1]
    assert hub_call[6] and hub_call[6].split("Received args")[0] in raised
    assert "float16" in hub_call[6] and "float32" in hub_call[6]
    assert "works" in hub_call[7]  # re-run with float32 input: the fix is known to work
    findings = {(f[0], f[2]): f for f in keras2["hub"]["findings"]}
    only = findings[("float32-only-layer", "seq/hub")]
    assert only[1] == "error" and "KerasLayer" in only[3] and "float16" in only[3]
    assert only[4] == "" and "Keras 3 model only" in only[5]  # no fix run on a Keras 2 copy
    last = findings[("float16-output", "seq/head")]
    assert last[4] == ""  # measured, no fix proposed unproven (issue 38 item 4)
    assert keras2["policy_after"] == "mixed_float16"  # the user's global policy kept
    assert "policy" in keras2["refused"] and "set_global_policy" in keras2["refused"]


# --------------------------------------------------------------------------- no Keras


def test_fixes_are_rewritten_in_tf_keras_spelling():
    finding = Finding(
        kind="no-loss-scaling",
        severity="warning",
        path="m",
        message="its keras.Input is float32; add_weight(autocast=False)",
        fix="optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam())\n"
        'y = keras.ops.cast(x, "float32")\nx = tf.keras.layers.Dense(2)(x)\n'
        "x = Scale()(x)",
    )
    spelled = in_tf_keras(finding, {"Dense": "Dense", "KerasLayer": "hub.KerasLayer"})
    assert spelled.fix == (
        "optimizer = tf.keras.mixed_precision.LossScaleOptimizer(tf.keras.optimizers.Adam())\n"
        'y = tf.cast(x, "float32")\nx = Dense(2)(x)\nx = Scale()(x)'
    )
    assert spelled.message == (
        "its tf.keras.Input is float32; add_weight(experimental_autocast=False)"
    )
    assert in_tf_keras(finding.model_copy(update={"fix": None})).fix is None


def test_arguments_the_keras2_audit_does_not_take_are_refused_by_name():
    class Model:
        name = "m"

    with pytest.raises(InvalidSpecError, match="modes that apply: call, training, predict, fit"):
        _refuse(Model(), "save", {})
    with pytest.raises(InvalidSpecError, match=r"takes no backends, engine.*backends='all'"):
        _refuse(Model(), "call", {"backends": "all", "engine": "keras==3.11.3", "labels": None})
    _refuse(Model(), "training", {"policy": None, "backends": []})


def test_the_keras2_engine_may_shadow_setuptools_never_a_backend():
    assert "tensorflow-hub" in engines.KERAS2_EXTRAS
    plans.refuse_replacements("tf_keras==2.21.0", "tf_keras", [("setuptools", "80.10.2")])
    with pytest.raises(engines.EngineError, match=r"tensorflow==2\.20\.0"):
        plans.refuse_replacements("tf_keras==2.21.0", "tf_keras", [("tensorflow", "2.20.0")])
