"""An engine's check at creation: its release imported from its site alone, in a subprocess
(numpy backend; tensorflow for Keras 2), and a Dense layer called.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

from dtype_explorer.records import TF_KERAS_BACKEND
from dtype_explorer.runtime._index import EngineError, Lines, run
from dtype_explorer.versions import library_version

#: The installed libraries an engine is checked against and records (``Engine.base``).
BASE_DISTRIBUTIONS = (
    "keras",
    "tensorflow",
    "jax",
    "jaxlib",
    "torch",
    "numpy",
    "ml-dtypes",
    "openvino",
)


def base_versions() -> dict[str, str]:
    """The installed libraries an engine layers over, read without importing them."""
    return {name: library_version(name) for name in BASE_DISTRIBUTIONS}


#: Run in a subprocess with the engine's site first: the release imports from there, and no
#: module of the installed Keras is loaded (tensorflow imports Keras itself).
_CHECK = r"""
import json, os, sys
site, package = sys.argv[1], sys.argv[2]
sys.path.insert(0, site)
if package == "tf_keras":
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as k
    y = k.layers.Dense(2)(tf.ones((1, 3))).dtype.name
else:
    import keras as k
    import numpy as np
    y = k.layers.Dense(2)(np.ones((1, 3), "float32")).dtype
    y = k.backend.standardize_dtype(y)
names = ("keras", "tf_keras")
foreign = sorted(n for n, m in sys.modules.items() if n.split(".")[0] in names
                 and getattr(m, "__file__", None) and not m.__file__.startswith(site))
print("DX-CHECK " + json.dumps({"version": k.__version__, "file": k.__file__,
                                "foreign": foreign[:5], "dense": y}))
"""


def check(
    site: Path, package: str, version: str, line: Lines, cancel: threading.Event | None
) -> None:
    """Import the release from ``site`` in a subprocess (numpy backend; tensorflow for Keras
    2) and call a Dense layer; it must be that release, loaded from the engine alone."""
    env = dict(os.environ, KERAS_BACKEND="numpy", TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    if package == "tf_keras":
        env["KERAS_BACKEND"] = TF_KERAS_BACKEND
    code, tail = run([sys.executable, "-c", _CHECK, str(site), package], line, cancel, env)
    found = [line for line in tail if line.startswith("DX-CHECK ")]
    report = json.loads(found[-1].removeprefix("DX-CHECK ")) if found else None
    ok = (
        code == 0
        and report is not None
        and report["version"] == version
        and report["file"].startswith(str(site))
        and not report["foreign"]
    )
    if not ok:
        errors = [line for line in tail if "Error" in line][-3:] or tail[-3:]
        raise EngineError(
            f"{package}=={version} does not run with the installed backends "
            f"({_versions_text()}): {report if report else ' | '.join(errors)}"
        )


def _versions_text() -> str:
    return ", ".join(f"{k} {v}" for k, v in base_versions().items() if v != "missing")
