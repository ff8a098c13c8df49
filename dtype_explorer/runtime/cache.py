"""The persistent result cache: an embedded SQLite database in the user's cache directory.

A probe answer depends on the probe spec, on the code that produced it and on the device it ran
on, so the key is the full spec, the versions of dtype-explorer, Keras, NumPy, Python and the
backend's package (:func:`dtype_explorer.versions.versions`) and what decides the device
(:func:`dtype_explorer.versions.placement`), all read without importing any backend. Only answers
that came back from a worker's live run of a built-in target are stored: never custom layers
(their code is not in the key), timeouts or crashes.

``diskcache`` does the storage: it is SQLite underneath, safe across threads and processes,
retries busy databases, bounds the size with eviction, and leaves each value readable as JSON
text in the ``Cache`` table, so there is no schema or locking code to maintain here.

>>> import dtype_explorer as dx
>>> dx.cache.info()          # doctest: +SKIP
{'path': '/home/me/.cache/dtype-explorer', 'entries': 12, 'size_bytes': 98304}
>>> dx.cache.clear()         # doctest: +SKIP
12
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import platformdirs

from dtype_explorer.records import ProbeResult, ProbeSpec
from dtype_explorer.versions import placement, versions

ENV_DIR = "DTYPE_EXPLORER_CACHE_DIR"
_lock = threading.Lock()
_open: diskcache.Cache | None = None


def path() -> Path:
    """The cache directory: ``$DTYPE_EXPLORER_CACHE_DIR`` or the platform's user cache dir."""
    return _resolved(os.environ.get(ENV_DIR) or None)


@functools.cache
def _resolved(override: str | None) -> Path:
    if override:
        return Path(override).expanduser().resolve()
    return Path(platformdirs.user_cache_dir("dtype-explorer", appauthor=False))


def _db() -> diskcache.Cache:
    """The open cache for the current :func:`path` (reopened when the path changes)."""
    global _open
    where = str(path())
    with _lock:
        if _open is None or _open.directory != where:
            if _open is not None:
                _open.close()
            _open = diskcache.Cache(where)
        return _open


def key(spec: ProbeSpec) -> str:
    """The cache key of ``spec``: the full spec, the versions that answer it and where."""
    return f"{spec.cache_key()}|{_stamp(spec.backend)}|{_compact(placement())}"


@functools.cache
def _stamp(backend: str) -> str:
    return _compact(versions(backend))


def _compact(values: dict[str, str]) -> str:
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def get(spec: ProbeSpec) -> ProbeResult | None:
    """The stored answer to ``spec``, marked ``cached=True``, or ``None``."""
    text = _db().get(key(spec))
    if text is None:
        return None
    return ProbeResult.model_validate_json(text).model_copy(update={"cached": True})


def put(result: ProbeResult) -> None:
    """Store ``result`` under its spec (the caller decides whether it may be cached)."""
    _db().set(key(result.spec), result.model_copy(update={"cached": False}).to_json())


def results() -> Iterator[ProbeResult]:
    """Every stored answer, for inspection."""
    db = _db()
    for k in list(db):
        text = db.get(k)
        if text is not None:
            yield ProbeResult.model_validate_json(text)


def info() -> dict[str, Any]:
    """Where the cache lives, how many answers it holds and its size on disk."""
    db = _db()
    return {"path": str(path()), "entries": len(db), "size_bytes": db.volume()}


def clear() -> int:
    """Remove every stored answer; returns how many there were."""
    return _db().clear()
