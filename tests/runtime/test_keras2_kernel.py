"""The Keras 2 kernel: registered by ``dx.engines.create("tf_keras")`` (into the session's
temporary ``JUPYTER_DATA_DIR``), a real notebook executed on it with nbclient, its tf.keras
dtypes compared with the same code run as a plain tf_keras script (the engine's site first,
``TF_USE_LEGACY_KERAS=1``, no dtype-explorer), and ``dtype-explorer run --engine tf_keras``.

Creating the engine needs the package index: without it these tests fail, never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from keras2_runs import dx_out, plain_tf_keras
from nbclient import NotebookClient

import dtype_explorer as dx
from dtype_explorer import engines
from dtype_explorer.runtime import _kernelspec

pytestmark = pytest.mark.timeout(900)

#: tf.keras code as its users wrote it: a Dense fed uint8, float64 through a subclassed Model
#: (its ``_maybe_cast_inputs``), a custom layer under mixed_float16. It prints one JSON line.
TF_KERAS_CODE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf

    out = {"dense_module": tf.keras.layers.Dense.__module__.split(".")[0],
           "keras_3_loaded": "keras" in sys.modules and hasattr(sys.modules["keras"], "ops")}
    out["dense_uint8"] = tf.keras.layers.Dense(2)(np.ones((1, 3), "uint8")).dtype.name

    class Net(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = tf.keras.layers.Dense(2)
        def call(self, x):
            self.seen = x.dtype.name
            return self.dense(x)

    net = Net()
    y = net(np.ones((1, 3), "float64"))
    out["model_float64"] = [net.seen, y.dtype.name]

    class Scale(tf.keras.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(name="w", shape=(shape[-1],), initializer="ones")
        def call(self, x):
            self.seen = [x.dtype.name, self.w.dtype.name]
            return x * self.w

    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    scale = Scale()
    y = scale(np.ones((1, 3), "float32"))
    out["custom_mixed"] = [*scale.seen, scale.w.true_dtype.name, y.dtype.name]
    tf.keras.mixed_precision.set_global_policy("float32")
    print("DX-OUT " + json.dumps(out))
    """
)

#: In the kernel only: dtype_explorer in process, answering with the kernel's engine.
DX_CODE = textwrap.dedent(
    """
    import json
    import dtype_explorer as dx
    r = dx.probe("Dense", "float64", "mixed_float16", kwargs={"units": 2})
    print("DX-OUT " + json.dumps({"engine": r.versions.get("engine"), "output": r.output_dtype,
                                  "status": r.status}))
    """
)


#: In the kernel, after TF_KERAS_CODE: the probe on the user's own tf.keras classes.
DX_CUSTOM_CODE = textwrap.dedent(
    """
    net = dx.probe(Net, "float64", shape=(1, 3))
    scale = dx.probe(Scale, "float32", "mixed_float16", shape=(1, 3))
    steps = lambda r: {s.stage: s.dtype for s in r.cast_path if s.index in (0, None)}
    w = scale.variables["w"]
    print("DX-OUT " + json.dumps({
        "model_float64": [steps(net)["autocast"], net.output_dtype],
        "custom_mixed": [steps(scale)["autocast"], w.read, w.stored, scale.output_dtype],
        "model_basis": any("_maybe_cast_inputs" in b for b in net.basis),
        "engine": [net.versions["engine"], scale.versions["engine"]],
    }))
    """
)


@pytest.fixture(scope="module")
def plain_script(tf_keras_engine) -> dict:
    """The code as a plain tf_keras script: the engine's site alone on PYTHONPATH."""
    return plain_tf_keras(tf_keras_engine, "-c", TF_KERAS_CODE)


def test_creating_the_engine_registers_its_kernel(tf_keras_engine):
    name = tf_keras_engine.kernel_name
    assert name == f"dtype-explorer-tf_keras-{tf_keras_engine.version}"
    spec = KernelSpecManager().get_kernel_spec(name)
    version = tf_keras_engine.version
    assert spec.display_name == f"Python 3 (Keras 2: tf_keras {version}, dtype-explorer)"
    assert Path(spec.resource_dir).is_relative_to(os.environ["JUPYTER_DATA_DIR"])
    assert spec.env["TF_USE_LEGACY_KERAS"] == "1"
    assert spec.argv[0] == sys.executable and tf_keras_engine.path in spec.argv


def test_a_notebook_on_the_kernel_runs_tf_keras_as_a_plain_script_does(
    tf_keras_engine, plain_script
):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(code) for code in (TF_KERAS_CODE, DX_CODE, DX_CUSTOM_CODE)
    ]
    NotebookClient(nb, kernel_name=tf_keras_engine.kernel_name, timeout=600).execute()
    texts = [
        "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream") for c in nb.cells
    ]
    in_kernel = dx_out(texts[0])
    assert in_kernel == plain_script
    assert in_kernel["dense_module"] == "tf_keras" and not in_kernel["keras_3_loaded"]
    assert in_kernel["model_float64"] == ["float32", "float32"]  # Keras 2 casts model inputs
    assert in_kernel["custom_mixed"] == ["float16", "float16", "float32", "float16"]
    probed = dx_out(texts[1])
    assert probed == {"engine": tf_keras_engine.spec, "output": "float16", "status": "ok"}
    custom = dx_out(texts[2])  # the user's classes, probed in the engine's worker
    assert custom["model_float64"] == plain_script["model_float64"]
    assert custom["custom_mixed"] == plain_script["custom_mixed"]
    assert custom["model_basis"] and custom["engine"] == [tf_keras_engine.spec] * 2


def test_a_keras_3_class_on_the_keras_2_engine_is_refused_saying_what_runs(tf_keras_engine):
    import keras

    class Keras3Layer(keras.layers.Layer):
        def call(self, x):
            return x

    r = dx.probe(Keras3Layer, "float32", engine="tf_keras")
    assert r.status == "invalid"
    assert "tf.keras (tf_keras) Layer or Model subclass" in r.error.message
    assert "engine=None" in r.error.message


def test_dtype_explorer_run_runs_a_script_under_keras_2(tf_keras_engine, plain_script, tmp_path):
    script = tmp_path / "legacy.py"
    script.write_text(TF_KERAS_CODE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "dtype_explorer", "run", "--engine", "tf_keras", str(script)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert dx_out(done.stdout) == plain_script


def test_the_kernel_command_registers_it_again(tf_keras_engine):
    assert _kernelspec.unregister(tf_keras_engine.kernel_name)
    with pytest.raises(NoSuchKernel):
        KernelSpecManager().get_kernel_spec(tf_keras_engine.kernel_name)
    done = subprocess.run(
        [sys.executable, "-m", "dtype_explorer", "engines", "kernel", "tf_keras"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert tf_keras_engine.kernel_name in done.stdout
    assert KernelSpecManager().get_kernel_spec(tf_keras_engine.kernel_name).argv[0]


def test_removing_an_engine_unregisters_its_kernel(monkeypatch, tmp_path):
    """An engine folder made by hand (no pip): remove() takes its kernel with it, and leaves a
    kernel of that name that is not ours alone."""
    monkeypatch.setenv(engines.ENV_DIR, str(tmp_path))
    folder = tmp_path / "tf_keras-2.99.0"
    (folder / "site").mkdir(parents=True)
    info = {"spec": "tf_keras==2.99.0", "package": "tf_keras", "version": "2.99.0"}
    (folder / "engine.json").write_text(json.dumps(info), encoding="utf-8")
    engine = engines.get("tf_keras==2.99.0")
    _kernelspec.register(engine)
    assert KernelSpecManager().get_kernel_spec(engine.kernel_name)
    assert engines.remove("tf_keras==2.99.0")
    with pytest.raises(NoSuchKernel):
        KernelSpecManager().get_kernel_spec(engine.kernel_name)
    assert not _kernelspec.unregister("python3")  # not ours: left alone


def test_only_the_keras_2_engine_has_a_kernel():
    with pytest.raises(engines.EngineError, match="only the Keras 2 engine has a kernel"):
        engines.kernel("keras==3.11.3")
