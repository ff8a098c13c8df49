"""The Keras 2 kernel's registration: a Jupyter kernel in which ``tf.keras`` is Keras 2.

``dx.engines.create("tf_keras")`` registers a kernel named ``Engine.kernel_name`` in the user's
Jupyter data directory (``jupyter_client``'s ``KernelSpecManager``, ``user=True``: honours
``JUPYTER_DATA_DIR``). Its ``kernel.json`` runs this environment's Python as
``python -m dtype_explorer.runtime._kernel2 kernel <engine dir> -f {connection_file}`` with
``TF_USE_LEGACY_KERAS=1`` (the launcher, ``_kernel2``); ``dx.probe`` there answers with that
engine by default (``KERNEL_ENGINE``).

>>> spec = kernel_spec(_Fake())
>>> spec["argv"][1:4], spec["env"]["TF_USE_LEGACY_KERAS"]
(['-m', 'dtype_explorer.runtime._kernel2', 'kernel'], '1')
>>> spec["display_name"]
'Python 3 (Keras 2: tf_keras 2.21.0, dtype-explorer)'
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

#: The module the kernel and a script start with.
LAUNCHER = "dtype_explorer.runtime._kernel2"
#: Set in the kernel (and a script it runs) to the engine's spec: ``dx.probe``'s default engine.
KERNEL_ENGINE = "DTYPE_EXPLORER_KERNEL_ENGINE"
#: What the kernel and a script run under, besides the engine's site first on ``sys.path``.
KERNEL_ENV = {"TF_USE_LEGACY_KERAS": "1", "KERAS_BACKEND": "tensorflow"}


class _Fake:  # the doctest's engine
    spec, package, version, path = "tf_keras==2.21.0", "tf_keras", "2.21.0", "/e"
    kernel_name = "dtype-explorer-tf_keras-2.21.0"


def display_name(engine: Any) -> str:
    """``"Python 3 (Keras 2: tf_keras 2.21.0, dtype-explorer)"``: what Jupyter's launcher shows."""
    return f"Python 3 (Keras 2: tf_keras {engine.version}, dtype-explorer)"


def kernel_spec(engine: Any) -> dict[str, Any]:
    """The ``kernel.json`` of ``engine``'s kernel (this interpreter, the engine's directory)."""
    return {
        "argv": [
            sys.executable,
            "-m",
            LAUNCHER,
            "kernel",
            engine.path,
            "-f",
            "{connection_file}",
        ],
        "display_name": display_name(engine),
        "language": "python",
        "env": {**KERNEL_ENV, KERNEL_ENGINE: engine.spec, **_package_path()},
        "metadata": {"dtype_explorer": {"engine": engine.spec}, "debugger": True},
    }


def _package_path() -> dict[str, str]:
    """``PYTHONPATH`` naming this dtype-explorer's folder when the interpreter alone would not
    find it (a source checkout run with ``PYTHONPATH``); nothing for an installed one."""
    here = str(Path(__file__).resolve().parents[2])
    if Path(here).name in ("site-packages", "dist-packages"):
        return {}
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]
    return {"PYTHONPATH": os.pathsep.join([here, *rest])}


def register(engine: Any) -> str:
    """Write ``engine``'s kernel into the user's Jupyter kernels (replacing an older one).

    Returns:
        The kernel's directory.

    Raises:
        ImportError: jupyter_client or ipykernel is not installed.
        OSError: the Jupyter data directory is not writable.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    importlib.import_module("ipykernel")  # the kernel starts ipykernel: refuse early without it
    with tempfile.TemporaryDirectory(prefix="dx-kernel-") as scratch:
        folder = Path(scratch) / engine.kernel_name
        folder.mkdir()
        (folder / "kernel.json").write_text(json.dumps(kernel_spec(engine), indent=1), "utf-8")
        return KernelSpecManager().install_kernel_spec(str(folder), engine.kernel_name, user=True)


def unregister(kernel_name: str) -> bool:
    """Remove the kernel ``kernel_name`` when it is ours; whether it was there."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError:
        return False
    manager = KernelSpecManager()
    try:
        spec = manager.get_kernel_spec(kernel_name)
    except NoSuchKernel:
        return False
    if "dtype_explorer" not in (spec.metadata or {}):
        return False  # a kernel of that name we did not write
    manager.remove_kernel_spec(kernel_name)
    return True
