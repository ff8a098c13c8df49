"""``dx.colab.setup``, the lessons' Colab cell's logic, in this process: nothing off Colab; on
Colab (its ``google.colab`` module faked in ``sys.modules``: Colab is not what the package
explains) the backends this environment has, found here without the package
(``importlib.util.find_spec``, and jax for Keras's numpy backend), and the user's own choice
kept. In a fresh Colab-like environment: tests/frontends/test_colab_venv.py."""

from __future__ import annotations

import importlib.util
import os
import sys
import types

import pytest

import dtype_explorer as dx
from dtype_explorer.backends import BACKENDS
from dtype_explorer.runtime.pool import ENV_BACKENDS, installed_backends


@pytest.fixture
def on_colab(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.delenv(ENV_BACKENDS, raising=False)  # put back as it was afterwards
    monkeypatch.setenv("KERAS_BACKEND", "jax")


def _here() -> list[str]:
    """The backends whose framework this Python finds (each backend's import name is its own;
    Keras's numpy backend imports jax), in Keras's order."""
    jax = importlib.util.find_spec("jax") is not None
    return [b for b in BACKENDS if (jax if b == "numpy" else importlib.util.find_spec(b))]


def test_off_colab_it_does_nothing(monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    before = dict(os.environ)
    assert dx.colab.setup() is None
    assert dict(os.environ) == before and capsys.readouterr().out == ""


def test_on_colab_the_workers_get_the_backends_installed_here(on_colab, capsys):
    done = dx.colab.setup()
    assert os.environ[ENV_BACKENDS] == ",".join(_here())
    assert list(done.backends) == _here() == installed_backends()
    assert done.changed == ((ENV_BACKENDS, ",".join(_here())),)
    assert done.kernel_backend == "jax" and os.environ["KERAS_BACKEND"] == "jax"
    assert done.engine is None
    assert capsys.readouterr().out.strip() == str(done)
    assert f"Keras {done.keras} on jax" in str(done)


def test_on_colab_the_users_own_choice_is_kept(on_colab, monkeypatch):
    monkeypatch.setenv(ENV_BACKENDS, "numpy")
    done = dx.colab.setup(quiet=True)
    assert done.backends == ("numpy",) and done.changed == ()
    assert os.environ[ENV_BACKENDS] == "numpy"
