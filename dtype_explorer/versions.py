"""Versions of the libraries that produce a result, read without importing them."""

from __future__ import annotations

import functools
import platform
from importlib import metadata

import dtype_explorer

BACKEND_DISTRIBUTIONS: dict[str, str] = {
    "jax": "jax",
    "tensorflow": "tensorflow",
    "torch": "torch",
    "numpy": "numpy",
}


@functools.cache
def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "missing"


def versions(backend: str) -> dict[str, str]:
    """Versions of keras, the backend's library, numpy, python and dtype_explorer."""
    found = {
        "keras": _version("keras"),
        "numpy": _version("numpy"),
        "python": platform.python_version(),
        "dtype_explorer": dtype_explorer.__version__,
    }
    distribution = BACKEND_DISTRIBUTIONS.get(backend)
    if distribution:
        found[distribution] = _version(distribution)
    return found
