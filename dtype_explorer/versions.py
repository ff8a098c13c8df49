"""Versions of the libraries that produce a result, read without importing them."""

from __future__ import annotations

import functools
import os
import platform
from importlib import metadata

import dtype_explorer

#: The distributions that can provide each backend's library, first found wins.
BACKEND_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "jax": ("jax",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly"),
    "torch": ("torch",),
    "numpy": ("numpy",),
}


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
