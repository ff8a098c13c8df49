"""What produces a result besides the spec: the libraries' versions and where they compute,
read without importing any backend."""

from __future__ import annotations

import functools
import json
import os
import platform
from importlib import metadata
from pathlib import Path

import dtype_explorer

#: The distributions that can provide each backend's library, first found wins.
BACKEND_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "jax": ("jax",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly"),
    "torch": ("torch",),
    "numpy": ("numpy",),
    "openvino": ("openvino", "openvino-nightly"),
}

#: Environment variables that hide or choose the devices a backend computes on.
PLACEMENT_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "JAX_PLATFORMS",
    "KERAS_TORCH_DEVICE",
)


@functools.cache
def library_version(library: str) -> str:
    """The installed version of a backend's library (``tensorflow-cpu`` counts as
    ``tensorflow``), or ``"missing"``; nothing is imported."""
    for distribution in BACKEND_DISTRIBUTIONS.get(library, (library,)):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return "missing"


def versions(backend: str) -> dict[str, str]:
    """Versions of keras, the backend's library, numpy, python and dtype_explorer."""
    found = {
        "keras": library_version("keras"),
        "numpy": library_version("numpy"),
        "python": platform.python_version(),
        "dtype_explorer": dtype_explorer.__version__,
    }
    if backend in BACKEND_DISTRIBUTIONS:
        found[backend] = library_version(backend)
    if backend == "jax":  # x64 changes every 64-bit answer
        found["jax_enable_x64"] = os.environ.get("JAX_ENABLE_X64", "0")
    return found


#: Environment variables whose prefix says they configure Keras or JAX at import (JAX reads
#: every flag, ``JAX_ENABLE_X64`` among them, from ``JAX_<FLAG>``). Those a worker sets
#: itself, or that only say where the configuration lives, are left out.
SETTING_PREFIXES = ("KERAS_", "JAX_")
_NOT_SETTINGS = frozenset({"KERAS_BACKEND", "KERAS_HOME", "JAX_PLATFORMS"})
#: Other variables a worker's backend reads at start that change its numbers: TensorFlow's XLA
#: auto-jit (``TF_XLA_FLAGS=--tf_xla_auto_jit=2``), XLA's own flags for jax and TensorFlow
#: (``XLA_FLAGS=--xla_cpu_enable_fast_math=true``; the optimisation level moves a last bit)
#: and the overrides of TF32 (NVIDIA's, for every library on cuBLAS; torch's own).
#: ``jax_default_matmul_precision`` is a ``JAX_`` one.
NUMERIC_VARIABLES = (
    "TF_XLA_FLAGS",
    "XLA_FLAGS",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
)
#: What Keras uses when ``keras.json`` does not say (keras/src/backend/config.py).
KERAS_DEFAULTS = {"floatx": "float32", "epsilon": 1e-07, "image_data_format": "channels_last"}


def settings() -> dict[str, object]:
    """The settings a new worker's Keras starts with, besides the spec: ``keras.json``
    (``$KERAS_HOME/keras.json``, else ``~/.keras/keras.json``, read as Keras reads it; its
    ``backend`` is the worker's own) and the ``KERAS_*``/``JAX_*`` environment variables
    (``JAX_ENABLE_X64``, ``JAX_DEFAULT_MATMUL_PRECISION``) and :data:`NUMERIC_VARIABLES` set
    (``TF_XLA_FLAGS``). Read without importing Keras; part of every cache key, so it is
    cheap (a ``stat`` and a scan of the variables' names).

    >>> settings()["keras.json"]["image_data_format"]      # doctest: +SKIP
    'channels_last'
    """
    path = str(keras_config_path())
    try:
        stat = os.stat(path)
        stamp: tuple = (path, stat.st_mtime_ns, stat.st_size)
    except OSError:
        stamp = (path, None, None)
    found: dict[str, object] = {"keras.json": _keras_json(stamp)}
    found.update((n, os.environ[n]) for n in _setting_variables() if n not in _NOT_SETTINGS)
    found.update((n, os.environ[n]) for n in NUMERIC_VARIABLES if n in os.environ)
    return found


_PREFIXES_ENCODED = tuple(os.fsencode(p) for p in SETTING_PREFIXES)


def _setting_variables() -> list[str]:
    """The names of the ``KERAS_*``/``JAX_*`` variables, sorted. CPython keeps the environment
    encoded (``os.environ._data``): matching the raw names first spares decoding every one on
    each cache lookup."""
    raw = getattr(os.environ, "_data", None)
    if isinstance(raw, dict) and all(type(k) is bytes for k in list(raw)[:1]):
        return sorted(os.fsdecode(k) for k in raw if k.startswith(_PREFIXES_ENCODED))
    return sorted(n for n in os.environ if n.startswith(SETTING_PREFIXES))


def keras_config_path() -> Path:
    """Where Keras reads its ``keras.json`` (as ``keras/src/backend/config.py`` finds it)."""
    return _keras_config_path(os.environ.get("KERAS_HOME"), os.environ.get("HOME"))


@functools.lru_cache(maxsize=8)
def _keras_config_path(keras_home: str | None, _home: str | None) -> Path:
    if keras_home is not None:
        base = Path(keras_home)
    else:
        home = os.path.expanduser("~")
        base = Path(home if os.access(home, os.W_OK) else "/tmp") / ".keras"
    return (base / "keras.json").expanduser()


@functools.lru_cache(maxsize=8)
def _keras_json(stamp: tuple) -> dict[str, object]:
    """``keras.json``'s settings with Keras's defaults (a file Keras cannot parse: defaults);
    ``stamp`` (path, mtime, size) makes an edited file read again."""
    found: dict[str, object] = dict(KERAS_DEFAULTS)
    try:
        with open(stamp[0], encoding="utf-8") as file:
            config = json.load(file)
    except (OSError, ValueError, RecursionError):
        return found
    if isinstance(config, dict):
        found.update({k: v for k, v in config.items() if k != "backend"})
    return found


def placement() -> dict[str, str]:
    """What decides the device a worker computes on: the GPUs this machine exposes and the
    variables that hide or choose them. A cache shared by a CPU and a GPU machine (one home
    directory on a cluster) keeps their answers apart.

    >>> placement()                      # doctest: +SKIP
    {'gpus': 'nvidia0,nvidia1', 'CUDA_VISIBLE_DEVICES': '1'}
    """
    found = {"gpus": _gpu_devices()}
    found.update({name: os.environ[name] for name in PLACEMENT_VARIABLES if name in os.environ})
    return found


@functools.cache
def _gpu_devices() -> str:
    """The GPU device nodes (NVIDIA, AMD ROCm) or Apple silicon's GPU; ``"none"``."""
    dev = Path("/dev")
    found = sorted(p.name for p in dev.glob("nvidia[0-9]*")) + [
        p.name for p in (dev / "kfd",) if p.exists()
    ]
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        found.append("mps")
    return ",".join(found) or "none"
