"""Lesson 7b on Colab: ``dx.colab.setup(keras2=True)`` makes the one kernel Colab runs the
Keras 2 kernel, as the registered kernel's launcher does (``engines.enter_kernel``): in a fresh
process (``google.colab`` faked: Colab is not what the package explains) ``tf.keras`` is then
tf_keras, the engine the ``tf_keras_engine`` fixture made, and a probe answers with it. The
engine needs the package index once: without it this fails, never skips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CELL = """
import json, sys, types
sys.modules["google.colab"] = types.ModuleType("google.colab")
import dtype_explorer as dx
done = dx.colab.setup(keras2=True, quiet=True)
del sys.modules["google.colab"]
import tensorflow as tf
import tf_keras
r = dx.probe("Dense", "float32", kwargs={"units": 2}, use_cache=False)
dx.shutdown()
print(json.dumps({"engine": done.engine, "changed": dict(done.changed),
                  "tf_keras": tf.keras.__name__, "version": tf_keras.__version__,
                  "probe": [r.status, r.spec.engine, r.output_dtype]}))
"""


def test_setup_keras2_makes_this_kernel_the_keras2_kernel(tf_keras_engine, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "TF_USE_LEGACY_KERAS")}
    env.update(PYTHONPATH=str(ROOT), DTYPE_EXPLORER_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-c", CELL], env=env, capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["engine"] == tf_keras_engine.spec
    assert facts["changed"]["TF_USE_LEGACY_KERAS"] == "1"
    assert facts["changed"]["DTYPE_EXPLORER_KERNEL_ENGINE"] == tf_keras_engine.spec
    assert facts["tf_keras"].startswith("tf_keras") and facts["version"] == tf_keras_engine.version
    assert facts["probe"] == ["ok", tf_keras_engine.spec, "float32"]
