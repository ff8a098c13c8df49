"""Issue 24.4: ``check_model(model, sample, quantize=..., engine="keras==X")``: the copy
rebuilt in the older release is quantized there, with that release's modes; a mode it lacks
is refused in its words, naming the release that added it. On the real keras==3.11.3 engine
(tests/conftest.py), checked against raw Keras 3.11.3 run alone in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError

pytestmark = pytest.mark.timeout(900)

SAMPLE = np.arange(8).reshape(2, 4) % 10

#: The model, built the same way here and in raw Keras 3.11.3: Embedding, EinsumDense,
#: Conv2D (no quantize method there) and Dense.
BUILD = """
def build():
    inputs = keras.Input((4,), dtype="int32", name="ids")
    x = keras.layers.Embedding(10, 8, name="emb")(inputs)
    x = keras.layers.EinsumDense("abc,cd->abd", (None, 6), bias_axes="d", name="ed")(x)
    x = keras.layers.Reshape((4, 6, 1), name="reshape")(x)
    x = keras.layers.Conv2D(2, 3, name="conv")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    outputs = keras.layers.Dense(3, name="head")(x)
    return keras.Model(inputs, outputs, name="net")
"""

RAW = """
import json, sys, warnings
import numpy as np, keras
{build}
model = build()
weights = np.load(sys.argv[1])
model.set_weights([weights[f"w{{i}}"] for i in range(len(weights.files))])
sample = np.arange(8).reshape(2, 4) % 10
floating = keras.ops.convert_to_numpy(model(sample))
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    model.quantize("int8")
quantized = keras.ops.convert_to_numpy(model(sample))
layers = {{
    layer.name: {{
        "mode": getattr(layer, "quantization_mode", None),
        "policy": layer.dtype_policy.name,
        "variables": {{v.name: keras.backend.standardize_dtype(v.dtype) for v in layer.weights}},
    }}
    for layer in model.layers
}}
try:
    build().quantize("gptq")
    gptq = None
except Exception as error:
    gptq = f"{{type(error).__name__}}: {{error}}"
print(json.dumps({{
    "version": keras.__version__,
    "layers": layers,
    "warned": [str(w.message) for w in said],
    "output": keras.backend.standardize_dtype(quantized.dtype),
    "error": float(np.max(np.abs(quantized - floating)) / np.max(np.abs(floating))),
    "gptq": gptq,
}}))
"""


def _model() -> keras.Model:
    scope: dict = {"keras": keras}
    exec(BUILD, scope)
    return scope["build"]()


def _raw(site: str, weights: list[np.ndarray], tmp_path) -> dict:
    """RAW with Keras 3.11.3 alone first on sys.path (no dtype-explorer), on this backend."""
    path = tmp_path / "weights.npz"
    np.savez(path, **{f"w{i}": w for i, w in enumerate(weights)})
    env = dict(os.environ, KERAS_BACKEND=keras.backend.backend(), TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = site
    code = textwrap.dedent(RAW.format(build=BUILD))
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_int8_on_the_engine_against_raw_keras_3_11(keras_3_11_engine, tmp_path):
    model = _model()
    before = [keras.ops.convert_to_numpy(w).tobytes() for w in model.weights]
    report = dx.check_model(model, SAMPLE, quantize="int8", engine=keras_3_11_engine.spec)
    raw = _raw(keras_3_11_engine.site, model.get_weights(), tmp_path)
    assert raw["version"] == report.keras == "3.11.3" and report.engine == keras_3_11_engine.spec
    q = report.quantization
    assert q.refused is None and set(q.modes) == {"int8", "float8", "int4"}
    rows = {row.path.split("/")[-1]: row for row in q.layers}
    for name, layer in raw["layers"].items():
        row = rows[name]
        assert row.status == ("quantized" if layer["mode"] else "skipped"), (name, row)
        assert row.policy == layer["policy"]
        assert {v.name: v.dtype for v in row.variables} == layer["variables"]
    # Keras 3.11.3 warns once per layer class without a quantize method; the audit names each
    assert rows["conv"].status == "skipped" and "quantize" in rows["conv"].why
    assert any("Conv2D" in w for w in raw["warned"])
    assert rows["head"].output_dtypes == (raw["output"],)
    assert q.output_error == pytest.approx(raw["error"], rel=1e-3, abs=1e-6)
    assert rows["emb"].steps[0].startswith("look up rows: int8 table")
    assert [keras.ops.convert_to_numpy(w).tobytes() for w in model.weights] == before
    assert all(layer.dtype_policy.name == "float32" for layer in model.layers)


def test_a_mode_the_release_lacks_is_refused_naming_the_release_that_added_it(
    keras_3_11_engine, tmp_path
):
    model = _model()
    report = dx.check_model(model, SAMPLE, quantize="gptq", engine=keras_3_11_engine.spec)
    raw = _raw(keras_3_11_engine.site, model.get_weights(), tmp_path)
    refused = report.quantization.refused
    said = f"{refused.type}: {refused.message}"
    assert said.startswith(raw["gptq"]), (said, raw["gptq"])  # Keras 3.11.3's own words
    assert "Keras 3.11.3 has no 'gptq' quantization mode" in said
    assert "Keras added gptq in 3.12" in said
    assert [f.kind for f in report.findings if f.kind.startswith("quantize")] == [
        "quantize-refused"
    ]
    with pytest.raises(InvalidSpecError, match="Int4QuantizationConfig"):
        dx.check_model(model, SAMPLE, quantize="int4/32", engine=keras_3_11_engine.spec)


def test_a_quantization_config_is_not_sent_to_an_engine():
    config = keras.quantizers.Int4QuantizationConfig(block_size=32)
    with pytest.raises(InvalidSpecError, match=r"as a mode name .* Received: quantize="):
        dx.check_model(_model(), SAMPLE, quantize=config, engine="keras==3.11.3")
