"""Where dtype-explorer keeps its files, one owner for every folder: the cache directory (the
result cache and the Keras facts' snapshots, ``$DTYPE_EXPLORER_CACHE_DIR`` or the platform's
user cache dir) and the engines' directory (``$DTYPE_EXPLORER_ENGINES_DIR`` or ``engines/`` in
the cache directory). Paths only: nothing is created here.

>>> engines_dir().parent == cache_dir() or "DTYPE_EXPLORER_ENGINES_DIR" in os.environ
True
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import platformdirs

#: The environment variable that moves the cache directory.
ENV_CACHE_DIR = "DTYPE_EXPLORER_CACHE_DIR"
#: Where engines live instead of ``<cache dir>/engines`` (tests, a shared team directory).
ENV_ENGINES_DIR = "DTYPE_EXPLORER_ENGINES_DIR"


def cache_dir() -> Path:
    """The user's dtype-explorer cache directory: ``$DTYPE_EXPLORER_CACHE_DIR`` or the
    platform's user cache dir (the result cache and the Keras snapshots live there).

    Returns:
        The directory as an absolute path (it may not exist yet).

    >>> cache_dir().name != ""
    True
    """
    return _resolved(os.environ.get(ENV_CACHE_DIR) or None)


@functools.cache
def _resolved(override: str | None) -> Path:
    if override:
        return Path(override).expanduser().resolve()
    return Path(platformdirs.user_cache_dir("dtype-explorer", appauthor=False))


def engines_dir() -> Path:
    """The directory engines live in: ``$DTYPE_EXPLORER_ENGINES_DIR``, else ``engines/`` in
    the cache directory (:func:`cache_dir`).

    Returns:
        The directory (it may not exist yet).

    >>> engines_dir().name if "DTYPE_EXPLORER_ENGINES_DIR" not in os.environ else "engines"
    'engines'
    """
    override = os.environ.get(ENV_ENGINES_DIR)
    return Path(override).expanduser().resolve() if override else cache_dir() / "engines"


__all__ = ["ENV_CACHE_DIR", "ENV_ENGINES_DIR", "cache_dir", "engines_dir"]
