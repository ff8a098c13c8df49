"""Entering an engine: what a process does before it imports an engine's Keras, so that the
Keras that answers is the engine's release and its code is what was installed.

A spawned engine worker (``_worker.init``) and an engine's zygote (``runtime._zygote``) enter
an engine the same way: nothing of Keras or TensorFlow imported yet from the installed
environment, the engine's files checked against its signed record (``runtime._site``), its
``site`` folder put first on ``sys.path`` and, for ``tf_keras``, ``TF_USE_LEGACY_KERAS=1``
set (TensorFlow then imports ``tf_keras``, not Keras 3). Once imported, the engine's Keras is
checked to come from that folder, at that version, with what the probes use of it
(:data:`KERAS_API`). A worker forked from an engine's zygote checks the files again at its
own start; the zygote's imports are not early imports there (:func:`entered_by_zygote`).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from dtype_explorer.records import Engine
from dtype_explorer.runtime import _site as site_files

#: What dtype-explorer's probes use of ``keras`` in a worker (checked in an engine's worker,
#: so an old release says what it lacks instead of failing probe by probe): 3.0.x lacks
#: ``keras.tree`` (from 3.1.0).
KERAS_API = (
    "config.set_dtype_policy",
    "config.set_floatx",
    "backend.result_type",
    "backend.standardize_dtype",
    "ops.convert_to_tensor",
    "tree.flatten",
    "KerasTensor",
)

#: The engine this process's zygote entered before its imports (:func:`enter_in_zygote`),
#: inherited by the workers it forks (``None`` in a spawned worker, or a backend's zygote's).
zygote_engine: dict[str, Any] | None = None


def enter(engine: Engine, *, entered: bool = False) -> tuple[str | None, str]:
    """Enter ``engine`` before its Keras imports: ``(what is wrong, where)``, ``(None, ...)``
    once its folder is first on ``sys.path``; ``where`` is ``"engine"`` for its changed
    files, ``"worker"`` for Keras or TensorFlow imported before from the installed
    environment (this process would answer with the installed Keras). ``entered``: this
    process's zygote entered ``engine`` before its imports (:func:`entered_by_zygote`), so
    what is imported already is the engine's. Never raises."""
    early = [] if entered else _imported_early(engine)
    if early:
        return (
            f"{', '.join(early)} was imported from the installed environment before the "
            f"engine {engine.spec} could be put first on sys.path (a __main__ or sitecustomize "
            "that imports Keras, re-imported by multiprocessing's spawn?); this worker would "
            "answer with the installed Keras, so it answers nothing",
            "worker",
        )
    _, changed = site_files.problem(Path(engine.path), engine.spec)
    if changed is not None:  # its code is not what was installed: none of it runs
        return changed, "engine"
    sys.path.insert(0, engine.site)
    importlib.invalidate_caches()
    if engine.package == "tf_keras":
        os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tensorflow then imports tf_keras, not keras
    return None, "worker"


def _imported_early(engine: Engine) -> list[str]:
    return [
        name
        for name in ("keras", "tensorflow", "tf_keras")
        if name in sys.modules
        and not str(getattr(sys.modules[name], "__file__", "") or "").startswith(engine.site)
    ]


def entered_by_zygote(engine: Engine) -> bool:
    """Whether this process was forked from a zygote that entered ``engine`` itself."""
    return zygote_engine == engine.to_dict()


def check_from(module: Any, engine: Engine) -> None:
    """Raise ``ImportError`` unless ``module`` (``keras`` or ``tf_keras``) came from
    ``engine``'s folder at its version, with :data:`KERAS_API`."""
    where = str(getattr(module, "__file__", ""))
    if not where.startswith(engine.site) or module.__version__ != engine.version:
        raise ImportError(
            f"{module.__name__} {module.__version__} was imported from {where}, not from the "
            f"engine {engine.spec} ({engine.site})"
        )
    if module.__name__ == "keras":
        missing = [name for name in KERAS_API if not _has(module, name)]
        if missing:
            raise ImportError(
                f"Keras {module.__version__} lacks {', '.join('keras.' + m for m in missing)}, "
                "which dtype-explorer's probes use; engines from Keras 3.1.0 on can probe"
            )


def _has(module: Any, dotted: str) -> bool:
    value = module
    for part in dotted.split("."):
        value = getattr(value, part, None)
        if value is None:
            return False
    return True


def enter_in_zygote(engine: dict[str, Any], backend: str) -> None:
    """A zygote's imports for ``engine``'s workers (``runtime._zygote.serve``): :func:`enter`,
    then the engine's Keras imported (``tf_keras`` after TensorFlow for the Keras 2 engine)
    and checked (:func:`check_from`); no device and no first op. Raises ``ImportError`` on
    any failure: the zygote then says so, and the worker spawns and reports it as before."""
    global zygote_engine
    record = Engine.from_dict(engine)
    error, _ = enter(record)
    if error is not None:
        raise ImportError(error)
    if record.package == "tf_keras":
        import tensorflow  # noqa: F401
        import tf_keras

        check_from(tf_keras, record)
    else:
        import keras

        check_from(keras, record)
        if keras.backend.backend() != backend:
            raise ImportError(f"Keras imported on {keras.backend.backend()}")
    zygote_engine = record.to_dict()
