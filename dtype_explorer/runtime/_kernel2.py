"""The Keras 2 kernel's launcher: ``python -m dtype_explorer.runtime._kernel2 kernel <engine
dir> -f {connection_file}`` (what its ``kernel.json`` runs, ``_kernelspec``) checks the engine's
files (``_site``), puts its site first on ``sys.path`` before anything imports TensorFlow, sets
``TF_USE_LEGACY_KERAS=1``, then starts ipykernel: there ``import tensorflow as tf; tf.keras`` is
``tf_keras`` and ``import dtype_explorer as dx`` works in process, answering with that engine
by default. ``... _kernel2 script <engine dir> script.py args`` runs a script the same way
(``dtype-explorer run --engine tf_keras script.py``). :func:`enter_engine` makes the running
process that kernel instead (Colab's one kernel: ``engines.enter_kernel``).
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import sys
from pathlib import Path

from dtype_explorer.runtime import _site
from dtype_explorer.runtime._index import EngineError
from dtype_explorer.runtime._kernelspec import KERNEL_ENGINE, KERNEL_ENV


def enter(engine_dir: str) -> str:
    """Check the engine in ``engine_dir``, put its site first on ``sys.path`` and set the Keras 2
    environment; returns its spec. Exits with a message when it cannot (never half-entered)."""
    info_path = Path(engine_dir) / "engine.json"
    try:
        spec = json.loads(info_path.read_text(encoding="utf-8"))["spec"]
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"dtype-explorer: no engine in {engine_dir} ({exc})") from None
    early = [n for n in ("keras", "tensorflow", "tf_keras") if n in sys.modules]
    if early:
        raise SystemExit(
            f"dtype-explorer: {', '.join(early)} was imported before the engine {spec} could "
            "be put first on sys.path (a sitecustomize?); the kernel would not be Keras 2"
        )
    _, problem = _site.problem(Path(engine_dir), spec)
    if problem is not None:
        raise SystemExit(f"dtype-explorer: {problem}")
    sys.path.insert(0, str(Path(engine_dir) / "site"))
    importlib.invalidate_caches()
    os.environ.update(KERNEL_ENV)
    os.environ[KERNEL_ENGINE] = spec
    return spec


def enter_engine(engine_dir: str) -> str:
    """:func:`enter` in a running process (a notebook's first cell): what it cannot do is
    an ``EngineError`` naming why, not an exit of the kernel."""
    try:
        return enter(engine_dir)
    except SystemExit as refused:
        raise EngineError(str(refused.code)) from None


def main(argv: list[str]) -> None:
    """``kernel <engine dir> [ipykernel args]`` or ``script <engine dir> <script> [args]``."""
    if len(argv) < 2 or argv[0] not in ("kernel", "script"):
        raise SystemExit(
            "usage: python -m dtype_explorer.runtime._kernel2 kernel ENGINE_DIR -f FILE | "
            f"script ENGINE_DIR SCRIPT [ARGS]; received: {argv}"
        )
    what, engine_dir, rest = argv[0], argv[1], argv[2:]
    enter(engine_dir)
    if what == "kernel":
        from ipykernel import kernelapp

        sys.argv = [sys.argv[0], *rest]
        kernelapp.launch_new_instance(argv=rest)
        return
    if not rest:
        raise SystemExit("dtype-explorer run: no script given")
    sys.argv = rest
    sys.path.insert(1, str(Path(rest[0]).resolve().parent))  # as `python script.py` does
    runpy.run_path(rest[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
