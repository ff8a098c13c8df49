"""What produces a result besides the spec: the libraries' versions and where they compute,
read without importing any backend."""

from __future__ import annotations

import functools
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
