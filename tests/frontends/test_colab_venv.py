"""Issue 41, item 2: the lessons' Colab cell in a fresh environment that has only Keras and one
backend's library, as a Colab-like runtime does: made once per machine (``made_envs.colab_venv``),
with the lowest supported Keras installed first and then this checkout pip-installed the way
the cell installs the package (its dependencies resolved by pip). pip must leave that Keras
as it is and bring no backend; the cell's setup (``dx.colab.setup``, with ``google.colab``
faked in ``sys.modules``) must find what that runtime can run and give the kernel a backend
it has (Keras's default, tensorflow, is not there), and a probe on it must answer as bare
Keras does. The library is jax: Keras's numpy backend imports jax too (NumPy alone is no
backend: ``runtime._allowed.NEEDS``), so jax brings numpy's backend with it. Making the
environment needs the package index: without it this fails, never skips."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from made_envs import colab_venv

from dtype_explorer import keras_release

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("colab_venv_script.py")
#: Settings of this test session that a fresh runtime does not have.
SESSION_ONLY = ("KERAS_BACKEND", "DTYPE_EXPLORER_BACKENDS", "VIRTUAL_ENV", "PYTHONHOME")


@pytest.fixture(scope="module")
def colab(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("colab")
    python = colab_venv(keras_release.LOWEST)
    env = {k: v for k, v in os.environ.items() if k not in SESSION_ONLY}
    env.update(
        PYTHONPATH=str(ROOT),  # this checkout's code, over the copy installed with its deps
        KERAS_HOME=str(tmp / "keras-home"),
        DTYPE_EXPLORER_CACHE_DIR=str(tmp / "cache"),
    )
    done = subprocess.run(
        [str(python), str(SCRIPT)], env=env, capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_installing_the_package_left_keras_and_brought_no_backend(colab):
    assert colab["keras"] == keras_release.LOWEST
    assert {"keras", "dtype-explorer", "jax"} <= set(colab["installed"])
    assert not {"tensorflow", "tensorflow-cpu", "torch"} & set(colab["installed"])


def test_setup_found_what_the_runtime_runs_and_gave_the_kernel_one(colab):
    setup = colab["setup"]
    assert setup["backends"] == ["jax", "numpy"] and setup["keras"] == keras_release.LOWEST
    assert setup["changed"] == {"DTYPE_EXPLORER_BACKENDS": "jax,numpy", "KERAS_BACKEND": "jax"}
    assert setup["kernel_backend"] == colab["kernel_backend"] == "jax"


def test_a_probe_on_it_answers_as_bare_keras(colab):
    probe = colab["probe"]
    assert probe["status"] == "ok"
    assert probe["keras"] == keras_release.LOWEST
    assert probe["output"] == probe["raw"]
    assert colab["every"] == ["jax", "numpy"]
