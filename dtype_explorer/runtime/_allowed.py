"""Which backends this machine may run: the ones ``$DTYPE_EXPLORER_BACKENDS`` allows (read and
validated here, its one reader: the pool's ``allowed_backends`` and the cached answer's check
both use it) and whose packages are installed (found without importing them).

>>> import os
>>> os.environ[ENV_BACKENDS] = "jax, numpy"
>>> env_backends()
['jax', 'numpy']
>>> os.environ[ENV_BACKENDS] = "jax,nunpy"
>>> env_backends()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dtype_explorer.errors.InvalidSpecError: unknown backend 'nunpy'; did you mean 'numpy'? ...
>>> del os.environ[ENV_BACKENDS]; env_backends() is None
True
"""

from __future__ import annotations

import functools
import importlib.util
import os

from dtype_explorer import backends

#: The variable that limits the backends a worker may start for (comma-separated names).
ENV_BACKENDS = "DTYPE_EXPLORER_BACKENDS"


def env_backends() -> list[str] | None:
    """The backends ``$DTYPE_EXPLORER_BACKENDS`` allows, validated; ``None`` when it is unset
    or empty.

    Returns:
        The names, in the variable's order. Raises ``InvalidSpecError`` naming an unknown one.
    """
    env = os.environ.get(ENV_BACKENDS, "").strip()
    if not env:
        return None
    listed = [b.strip() for b in env.split(",") if b.strip()]
    return backends.names("all" if listed == ["all"] else listed)


#: What Keras imports for a backend besides its library: its numpy backend imports jax (for
#: convolutions, ``keras/src/backend/numpy/nn.py``, every release from 3.1.0 on), so a runtime
#: with Keras and NumPy alone has no numpy backend.
NEEDS = {"numpy": ("numpy", "jax")}


@functools.cache
def installed(backend: str) -> bool:
    """Whether ``backend``'s packages are installed (:data:`NEEDS`), found without importing
    them.

    Args:
        backend: a backend's name.

    Returns:
        ``True`` when Keras can import that backend.

    >>> installed("numpy")  # numpy and jax
    True
    """
    needs = NEEDS.get(backend, (backend,))
    return all(importlib.util.find_spec(name) is not None for name in needs)
