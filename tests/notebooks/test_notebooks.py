"""The teaching notebooks, built and run the way Binder builds and runs them.

The Binder demo is rebuilt in a fresh virtual environment on this machine, following
repo2docker's steps: a copy of the checkout as a clone holds it (tracked files and untracked
ones git does not ignore, so the widget's front end is built from ``js/`` as on Binder), the
Python of ``binder/runtime.txt``, ``pip install -r binder/requirements.txt``, then
``binder/postBuild`` from the copy's root with the environment's python first on PATH. nbval
and pytest are added for the test only. A broken Binder build fails here.

Each notebook then runs once, as ``binder/start pytest --nbval-lax``: the cells marked
``# NBVAL_CHECK_OUTPUT`` must print what the committed notebook shows, the notebook must finish
within 5 minutes with a cold result cache, and the kernel with the workers it starts must stay
under Binder's 2 GB (see ``notebook_memory``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from notebook_memory import MIB, run_measured

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = (
    "01_explorer.ipynb",
    "02_uint8_survey.ipynb",
    "03_float64_autocast.ipynb",
    "04_ops_promotion.ipynb",
    "05_mixed_precision_custom_layers.ipynb",
    "06_dtype_check.ipynb",
    "07_from_tf_keras.ipynb",
    "08_quantized_and_hub.ipynb",
)
#: Lessons on the Keras 2 kernel: run by ``test_keras2_lesson``, not on Binder (Keras 3 there).
KERAS2_NOTEBOOKS = ("07b_keras2_kernel.ipynb",)
CHECK = "# NBVAL_CHECK_OUTPUT"
MEMORY_LIMIT = 2 * 1024**3  # Binder's
TIME_LIMIT = 300.0  # seconds per notebook, cold workers and cache included
BUILD_TIMEOUT = 1800.0
#: Settings of the test session that must not leak into the demo's environment.
LEAKS = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "KERAS_BACKEND", "DTYPE_EXPLORER_CACHE_DIR")


def cells(name: str) -> list[dict]:
    return json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))["cells"]


def code(cell: dict) -> str:
    return "".join(cell["source"])


# ------------------------------------------------------------------ the notebooks as files


def test_every_notebook_is_a_listed_lesson():
    listed = sorted(NOTEBOOKS + KERAS2_NOTEBOOKS)
    assert sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")) == listed


@pytest.mark.parametrize("name", NOTEBOOKS + KERAS2_NOTEBOOKS)
def test_notebook_sets_its_kernel_backend_first_and_has_checked_outputs(name):
    code_cells = [c for c in cells(name) if c["cell_type"] == "code"]
    assert re.search(r'os\.environ\["KERAS_BACKEND"\] = "\w+"', code(code_cells[0]))
    assert code(code_cells[0]).index("KERAS_BACKEND") < code(code_cells[0]).index("import keras")
    checked = [c for c in code_cells if code(c).startswith(CHECK)]
    assert checked, "no cell states a checked fact"
    empty = [code(c).splitlines()[1] for c in checked if not c["outputs"]]
    assert not empty, f"checked cells without committed outputs (run the notebook): {empty}"


def test_readme_badge_opens_the_first_lesson_in_jupyterlab():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    badge = re.search(r"\(https://mybinder\.org/v2/gh/[^)]*\?urlpath=lab/tree/([^)]+)\)", readme)
    assert badge and badge.group(1) == "notebooks/01_explorer.ipynb"
    assert (ROOT / badge.group(1)).exists()


# ----------------------------------------------------------------------- the Binder build


@dataclass(frozen=True)
class Binder:
    root: Path
    python: Path
    env: dict[str, str]


def binder_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LEAKS}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # Binder's own Jupyter registry: its Keras 2 kernel (lesson 7 creates the engine) must not
    # replace the session's, which points at this Python
    env["JUPYTER_DATA_DIR"] = str(venv.parent / "jupyter")
    return env


def runtime_python() -> str:
    """The interpreter ``binder/runtime.txt`` names (``python-3.11``)."""
    version = (ROOT / "binder" / "runtime.txt").read_text().strip().removeprefix("python-")
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    found = shutil.which(f"python{version}")
    assert found, f"binder/runtime.txt asks for Python {version}, not found on this machine"
    return found


def clone_like_copy(target: Path) -> None:
    """Copy what a clone of this checkout holds: tracked and unignored untracked files."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for relative in filter(None, listed.split("\0")):
        source = ROOT / relative
        if source.is_file():
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / relative)


def step(command: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> None:
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(command)}\n".encode())
        out.flush()
        done = subprocess.run(
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT
        )
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-6000:]
        pytest.fail(f"Binder build step failed: {' '.join(command)}\n{tail}")


@pytest.fixture(scope="module")
def binder(tmp_path_factory) -> Binder:
    base = tmp_path_factory.mktemp("binder")
    root, venv, log = base / "repo", base / "venv", base / "build.log"
    started = time.monotonic()
    clone_like_copy(root)
    subprocess.run([runtime_python(), "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = binder_env(venv)
    step(
        [str(python), "-m", "pip", "install", "-r", "binder/requirements.txt"],
        cwd=root,
        env=env,
        log=log,
    )
    step([str(root / "binder" / "postBuild")], cwd=root, env=env, log=log)
    step([str(python), "-m", "pip", "install", "nbval", "pytest"], cwd=root, env=env, log=log)
    print(f"\nBinder build: {time.monotonic() - started:.0f} s (log: {log})")
    return Binder(root=root, python=python, env=env)


# --------------------------------------------------------------------- the notebooks, run


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT + 2 * TIME_LIMIT)
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_binder_within_time_and_memory(binder, name, tmp_path):
    # A cold result cache: every answer is computed, as on a fresh Binder.
    env = binder.env | {"DTYPE_EXPLORER_CACHE_DIR": str(tmp_path / "cache")}
    command = [
        str(binder.root / "binder" / "start"),
        str(binder.python),
        "-m",
        "pytest",
        "--nbval-lax",
        "--nbval-current-env",
        "-p",
        "no:cacheprovider",
        "-q",
        f"notebooks/{name}",
    ]
    usage = run_measured(
        command, cwd=binder.root, env=env, timeout=2 * TIME_LIMIT, log=tmp_path / "nbval.log"
    )
    print(f"\n{name}: {usage.describe()}")
    assert usage.returncode == 0, usage.output[-8000:]
    assert usage.peak_pss < MEMORY_LIMIT, f"{usage.peak_pss / MIB:.0f} MiB: {usage.describe()}"
    assert usage.seconds < TIME_LIMIT, usage.describe()
