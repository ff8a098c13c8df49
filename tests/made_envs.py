"""Python environments the tests make once per machine and keep, as the engines are kept
(``tests/conftest.py``: the same base folder, ``DTYPE_EXPLORER_TEST_ENGINES_DIR``):

- :func:`keras_site`: one Keras release alone, ``pip install --no-deps --target`` (the
  installed backends stay as they are), put first on ``PYTHONPATH`` by a test that runs the
  package on it (tests/test_keras_range.py);
- :func:`colab_venv`: a fresh virtual environment with only Keras and one backend's library
  (jax: Keras's numpy backend imports jax too, so NumPy alone is no backend), as on a
  Colab-like runtime, into which this checkout was pip-installed the way a lesson's Colab cell
  installs it (tests/frontends/test_colab_venv.py).

Each is made in a temporary folder beside its final one and renamed into place when whole,
under a file lock (two test processes make it once). Making one needs the package index: when
it fails the test fails, saying why, never skips.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import filelock
import pytest

ROOT = Path(__file__).resolve().parents[1]
PIP_TIMEOUT = 900


def base() -> Path:
    """Where the kept environments live, per Python (beside the kept engines)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dx-test-engines"
    root = Path(os.environ.get("DTYPE_EXPLORER_TEST_ENGINES_DIR", default))
    return root / f"py{sys.version_info.major}.{sys.version_info.minor}"


def run(command: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    """Run a step of making an environment; its failure fails the test, with its output."""
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False, **kwargs
    )
    if done.returncode != 0:
        pytest.fail(f"{what} failed (it needs the package index):\n{done.stderr[-4000:]}")
    return done


def _kept(final: Path, make: Callable[[Path], None]) -> Path:
    """``final``, made by ``make(folder)`` in a temporary folder and renamed into place."""
    if (final / ".complete").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(final) + ".lock"):
        if (final / ".complete").is_file():
            return final
        shutil.rmtree(final, ignore_errors=True)
        folder = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
        try:
            make(folder)
            (folder / ".complete").write_text("made whole\n", encoding="utf-8")
            folder.rename(final)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return final


def keras_site(release: str) -> Path:
    """A folder holding Keras ``release`` alone (``pip install --no-deps --target``)."""

    def make(folder: Path) -> None:
        run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
             "--only-binary=:all:", "--target", str(folder), f"keras=={release}"],
            f"pip install --target of keras=={release}",
        )  # fmt: skip

    return _kept(base() / f"keras-{release}", make)


#: What a made environment chooses itself, never pinned to this environment's. ml_dtypes: this
#: environment pins an older one for its imports' speed (constraints.txt), so the Colab-like
#: runtime takes the newest, as pip gives it to a user.
_CHOSEN = {"keras", "keras-nightly", "dtype-explorer", "ml-dtypes"}


def _constraints() -> str:
    """This environment's versions as pip constraints (but :data:`_CHOSEN`): a fresh
    environment gets the same releases (from pip's cache once downloaded), so it is made the
    same way each time."""
    found = {}
    for dist in metadata.distributions():
        name, version = dist.metadata["Name"], dist.version
        if name and name.lower().replace("_", "-") not in _CHOSEN and "+" not in version:
            found[name.lower()] = f"{name}=={version}"
    return "\n".join(sorted(found.values())) + "\n"


def colab_venv(keras: str, backend: str = "jax") -> Path:
    """A virtual environment with only ``keras==<keras>`` and ``backend``'s library installed,
    then this checkout pip-installed into it (its dependencies resolved by pip, as on Colab).
    Kept per Keras release, backend and ``pyproject.toml`` (a changed dependency makes a new
    one).

    Returns:
        The environment's Python.
    """
    project = (ROOT / "pyproject.toml").read_bytes()
    key = hashlib.sha256(project + f"{keras} {backend}".encode()).hexdigest()[:12]

    def make(folder: Path) -> None:
        run([sys.executable, "-m", "venv", str(folder)], "python -m venv")
        python = str(folder / "bin" / "python")
        pins = folder / "constraints.txt"
        pins.write_text(_constraints(), encoding="utf-8")
        # --no-compile: the tests' processes compile what they import (this environment is
        # made once a machine, on CI once a run: 29 s -> 12 s on the 2-core machine).
        pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        pip += ["--no-compile"]
        run([*pip, "-c", str(pins), f"keras=={keras}", backend], f"pip install keras {backend}")
        run([*pip, "-c", str(pins), str(ROOT)], "pip install of this checkout")

    return _kept(base() / f"colab-venv-keras-{keras}-{backend}-{key}", make) / "bin" / "python"
