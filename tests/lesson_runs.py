"""The lessons, executed once per test run: in a Binder environment rebuilt on this machine (the
Keras 3 lessons) and on the Keras 2 kernel (7b), by the docs build's own executor
(``docs/_hooks/lesson_execution.py``). The Binder tests check each run's outputs, time and
memory (``tests/notebooks/``), and the docs site is built from the same executed copies
(``DTYPE_EXPLORER_DOCS_EXECUTED``, ``tests/docs/test_site.py``): no lesson runs twice.

The Binder demo is rebuilt in a fresh virtual environment, following repo2docker's steps: a
copy of the checkout as a clone holds it (tracked files and untracked ones git does not ignore,
so the widget's front end is built from ``js/`` as on Binder), the Python of
``binder/runtime.txt``, ``binder/requirements.txt`` installed, then ``binder/postBuild`` from
the copy's root with the environment's python first on PATH. repo2docker installs the
requirements with pip; here uv installs them (``tools/uv_install.py``, under pip's own
settings), from the cache ``./dev.sh setup`` filled with the same wheels: the same packages at
the same versions as pip installs (their ``pip freeze`` compared equal), in 15 s and 24 CPU-s
against pip's 58 s and 57 CPU-s on a 2-core machine. pip installs them where uv is not there
or fails. Nothing is added for the
test: the executor's nbclient comes with Binder's JupyterLab. Each Keras 3 lesson then runs as
``binder/start python docs/_hooks/lesson_execution.py``, with a cold result cache, its kernel
and the workers it starts measured (``notebook_memory``).

The tests that use these runs are one unit of work under pytest-xdist (``tests/scheduling.py``),
so that one process makes them and the site reads them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from notebook_memory import Usage, run_measured

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_hooks"))

import lesson_execution  # noqa: E402

#: The lessons Binder runs (Keras 3), in the order they are taught.
NOTEBOOKS = (
    "01_explorer.ipynb",
    "02_uint8_survey.ipynb",
    "03_float64_autocast.ipynb",
    "04_ops_promotion.ipynb",
    "05_mixed_precision_custom_layers.ipynb",
    "06_dtype_check.ipynb",
    "07_from_tf_keras.ipynb",
    "08_quantized_and_hub.ipynb",
    "09_your_code.ipynb",
)
#: Lessons on the Keras 2 kernel: not on Binder (Keras 3 there), run on this machine's engine.
KERAS2_NOTEBOOKS = ("07b_keras2_kernel.ipynb",)
TIME_LIMIT = 300.0  # seconds per notebook, cold workers and cache included
BUILD_TIMEOUT = 1800.0
#: Settings of the test session that must not leak into the demo's environment.
#: (``PYTHONDONTWRITEBYTECODE``: Binder's image sets none, so its processes write byte-code for
#: what pip did not compile: the checkout's own scripts. ``XLA_FLAGS``: the session compiles
#: with XLA's cheapest code generation, ``tests/conftest.py``; Binder's users do not.)
LEAKS = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONDONTWRITEBYTECODE",
    "XLA_FLAGS",
    "KERAS_BACKEND",
    "DTYPE_EXPLORER_CACHE_DIR",
)


class BinderBuildError(RuntimeError):
    """A step of the Binder build failed: the step and the end of its log."""


@dataclass(frozen=True)
class Binder:
    root: Path
    python: Path
    env: dict[str, str]


@dataclass
class LessonRun:
    """One lesson executed once: how (its measured run, ``None`` off Binder), the executed
    copy (``None`` when a cell failed: ``error`` says what)."""

    name: str
    executed: Path | None
    usage: Usage | None = None
    error: str = ""


@dataclass
class LessonRuns:
    """Every lesson's run, and the folder of their executed copies (for the docs build)."""

    folder: Path
    started: float
    binder_error: str = ""
    runs: dict[str, LessonRun] = field(default_factory=dict)

    def executed(self, name: str) -> nbformat.NotebookNode:
        """The executed copy of lesson ``name``; raises AssertionError, saying why, if none."""
        run = self.runs.get(name)
        assert run is not None, f"{name} was not run: {self.binder_error or 'not a lesson'}"
        assert run.executed is not None, f"{name} failed when executed:\n{run.error[-8000:]}"
        return nbformat.read(run.executed, as_version=4)


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
        raise BinderBuildError(f"Binder build step failed: {' '.join(command)}\n{tail}")


def install_requirements(python: Path, *, root: Path, env: dict[str, str], log: Path) -> None:
    """``binder/requirements.txt`` installed into ``python``'s environment: by uv (the one
    beside this session's Python) where it can, else by pip, as repo2docker installs them."""
    requirements = ["-r", "binder/requirements.txt"]
    uv_env = env | {"PATH": f"{env['PATH']}{os.pathsep}{Path(sys.executable).parent}"}
    try:
        uv_install = [str(python), str(ROOT / "tools" / "uv_install.py"), "-q", *requirements]
        step(uv_install, cwd=root, env=uv_env, log=log)
    except BinderBuildError:
        step([str(python), "-m", "pip", "install", *requirements], cwd=root, env=env, log=log)


def build_binder(base: Path) -> Binder:
    """The Binder environment, rebuilt under ``base`` as repo2docker builds it."""
    root, venv, log = base / "repo", base / "venv", base / "build.log"
    started = time.monotonic()
    clone_like_copy(root)
    subprocess.run([runtime_python(), "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = binder_env(venv)
    install_requirements(python, root=root, env=env, log=log)
    step([str(root / "binder" / "postBuild")], cwd=root, env=env, log=log)
    print(f"\nBinder build: {time.monotonic() - started:.0f} s (log: {log})")
    return Binder(root=root, python=python, env=env)


def run_on_binder(binder: Binder, name: str, out: Path) -> LessonRun:
    """Lesson ``name`` executed once in the Binder environment, as ``binder/start`` runs it, with
    a cold result cache (every answer computed, as on a fresh Binder); measured."""
    cache = out / f"{name}.cache"
    env = binder.env | {"DTYPE_EXPLORER_CACHE_DIR": str(cache)}
    executed = out / name
    command = [
        str(binder.root / "binder" / "start"),
        str(binder.python),
        "docs/_hooks/lesson_execution.py",
        f"notebooks/{name}",
        str(executed),
    ]
    log = out / f"{name}.log"
    usage = run_measured(command, cwd=binder.root, env=env, timeout=2 * TIME_LIMIT, log=log)
    shutil.rmtree(cache, ignore_errors=True)
    print(f"\n{name}: {usage.describe()}")
    ok = usage.returncode == 0 and executed.is_file()
    return LessonRun(name, executed if ok else None, usage, "" if ok else usage.output)


def run_on_keras2_kernel(name: str, kernel_name: str, out: Path) -> LessonRun:
    """Lesson ``name`` (written for the Keras 2 kernel) executed once on ``kernel_name``."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    notebook = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    folder = out / f"{name}.cwd"
    folder.mkdir()
    try:
        lesson_execution.run(notebook, folder=folder, kernel_name=kernel_name)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        return LessonRun(name, None, error=str(exc))
    nbformat.write(notebook, out / name)
    return LessonRun(name, out / name)


def run_every_lesson(base: Path, keras2_kernel: str) -> LessonRuns:
    """Each lesson executed once: the Keras 3 ones on Binder, 7b on ``keras2_kernel``."""
    out = base / "executed"
    out.mkdir(parents=True)
    runs = LessonRuns(folder=out, started=time.time())
    try:
        binder = build_binder(base / "binder")
    except (BinderBuildError, subprocess.TimeoutExpired) as exc:
        runs.binder_error = str(exc)
    else:
        for name in NOTEBOOKS:
            runs.runs[name] = run_on_binder(binder, name, out)
    for name in KERAS2_NOTEBOOKS:
        runs.runs[name] = run_on_keras2_kernel(name, keras2_kernel, out)
    return runs
