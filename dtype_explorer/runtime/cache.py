"""The persistent result cache: an embedded SQLite database in the user's cache directory.

A probe answer depends on the probe spec, on the code that produced it and on the device it ran
on, so the key is the full spec, the versions of dtype-explorer, Keras, NumPy, Python and the
backend's package (:func:`dtype_explorer.versions.versions`) and what decides the device
(:func:`dtype_explorer.versions.placement`), all read without importing any backend. Only answers
that came back from a worker's live run of a built-in target are stored: never custom layers
(their code is not in the key), timeouts or crashes.
The key also holds the settings a new worker starts with (:func:`dtype_explorer.versions.settings`:
``keras.json``'s floatx, epsilon and image_data_format, and the ``KERAS_*`` and ``JAX_*``
variables such as ``JAX_ENABLE_X64``, ``TF_XLA_FLAGS``). A spec's ``precision`` is part of its
own key (``ProbeSpec.cache_key``: left out when ``None``, so older answers still answer).

``diskcache`` does the storage: it is SQLite underneath, safe across threads and processes,
retries busy databases and bounds the size with eviction. A cache directory may come from
elsewhere (a CI artifact, a team directory, a Binder image), so nothing read from it is
trusted: values and keys are JSON text in the ``Cache`` table (:class:`_TextDisk` never
unpickles and never opens a file a row names), every value is validated as a
``ProbeResult``, and a row that is not one (corrupt, truncated, tampered, an old schema) is a
miss. SQLite runs without a memory map and without WAL's shared-memory file: a cache file
truncated under a running kernel gives errors (the probe then runs live), never ``SIGBUS``.

A well-formed lie is refused too: each row carries an HMAC-SHA256 over its key and body, keyed
by a secret that lives outside the cache directory, per user (``cache.key`` in the user's
config directory, file mode 0600, made on the first write; ``$DTYPE_EXPLORER_CACHE_KEY_FILE``
names another file). A row whose MAC does not match, or that has none (stored before rows were
signed), is a miss, counted by :func:`stats`; the live answer then replaces it. A row's body
is its answer's JSON compressed and version-tagged (:mod:`~dtype_explorer.runtime._rows`), the
MAC over that stored text; a row of an older format is a miss (``invalid``).

Sharing a cache with a team on purpose means sharing the key: copy one member's key file to a
place only the team can read and point everyone's ``$DTYPE_EXPLORER_CACHE_KEY_FILE`` at it
(with ``$DTYPE_EXPLORER_CACHE_DIR`` at the shared cache)::

    install -m 0640 -g team ~/.config/dtype-explorer/cache.key /team/dx/cache.key
    export DTYPE_EXPLORER_CACHE_DIR=/team/dx/cache
    export DTYPE_EXPLORER_CACHE_KEY_FILE=/team/dx/cache.key

Whoever can read the key can sign rows, so keep it out of the cache folder, CI artifacts and
images. A cache directory that cannot be written is read (and nothing stored), a damaged
``cache.db`` is moved aside as ``cache.db.broken-<time>`` and rebuilt, and a path too long for
SQLite is named as such: each warned about once (:mod:`dtype_explorer.runtime._store`).

>>> import dtype_explorer as dx
>>> dx.cache.info()          # doctest: +SKIP
{'path': '/home/me/.cache/dtype-explorer', 'entries': 12, 'printed': 3, 'size_bytes': 98304}
>>> dx.cache.stats()         # doctest: +SKIP
{'hits': 3, 'misses': 9, 'stored': 9, 'rejected': {'mac': 1, 'unsigned': 0, ...}}
>>> dx.cache.clear()         # doctest: +SKIP
12
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import pydantic

from dtype_explorer import folders
from dtype_explorer.records import ProbeResult, ProbeSpec
from dtype_explorer.runtime import _mac, _rows, engines, printed
from dtype_explorer.runtime import _store as _store_module
from dtype_explorer.runtime._cache_key import installed_key

__all__ = ["ENV_DIR", "clear", "get", "info", "key", "path", "put", "put_printed", "results"]

ENV_DIR = folders.ENV_CACHE_DIR
_lock = threading.Lock()
_open: _store_module.Store | None = None
_counts: collections.Counter[str] = collections.Counter(hits=0, misses=0, stored=0)
_rejected: collections.Counter[str] = collections.Counter(mac=0, unsigned=0, invalid=0, mismatch=0)

#: How the database is opened, whatever its ``Settings`` table says: no memory map (a file
#: truncated under the map kills the process with SIGBUS), a rollback journal instead of WAL
#: (whose ``-shm`` index is memory-mapped), and a short wait for a locked database.
_SETTINGS = {
    "eviction_policy": "least-recently-stored",
    "size_limit": 2**30,
    "cull_limit": 10,
    "statistics": 0,
    "tag_index": 0,
    "sqlite_auto_vacuum": 1,
    "sqlite_cache_size": 2**13,
    "sqlite_journal_mode": "truncate",
    "sqlite_mmap_size": 0,
    "sqlite_synchronous": 1,
}
_BUSY_SECONDS = 10


class _TextDisk(diskcache.Disk):
    """diskcache's storage of keys and values, restricted to text in the database.

    diskcache's own ``Disk`` unpickles a row whose mode says pickle and reads or deletes the
    file a row names: a tampered row would run code or touch any file. Here a key or value
    that is not text stored inline reads as ``None`` (a miss), nothing is unpickled, and no
    file is read or removed.
    """

    def __init__(self, directory: str, **_ignored: Any) -> None:  # Settings' disk_* too
        super().__init__(directory)

    def put(self, key: Any) -> tuple[Any, bool]:
        if type(key) is not str:
            raise TypeError(f"cache keys are text, not {type(key).__name__}")
        return key, True

    def get(self, key: Any, raw: bool) -> Any:
        return key if raw and type(key) is str else None

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> tuple:
        if type(value) is not str or read:
            raise TypeError(f"cache values are text, not {type(value).__name__}")
        return 0, diskcache.core.MODE_RAW, None, value

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        return value if mode == diskcache.core.MODE_RAW and type(value) is str else None

    def remove(self, file_path: Any) -> None:
        """Nothing is ever stored in a file: a file named by a row is not ours to delete."""


def path() -> Path:
    """The cache directory: ``$DTYPE_EXPLORER_CACHE_DIR`` or the platform's user cache dir
    (``folders.cache_dir``, where the Keras snapshots live too)."""
    return folders.cache_dir()


def _store() -> _store_module.Store:
    """The open cache for the current :func:`path` (reopened when the path changes)."""
    global _open
    where = str(path())
    with _lock:
        if _open is None or _open.directory != where:
            if _open is not None:
                _open.close()
            _open = _store_module.Store(where, _opener)
        return _open


def _opener(where: str) -> diskcache.Cache:
    return diskcache.Cache(where, timeout=_BUSY_SECONDS, disk=_TextDisk, **_SETTINGS)


def key(spec: ProbeSpec) -> str:
    """The cache key of ``spec``: the full spec, the versions that answer it, where, and the
    settings a worker starts with (``_cache_key``)."""
    found = installed_key(spec)
    # An engine's answers: under its pinned release and what it installed (not created: a miss).
    return found if spec.engine is None else f"{found}|{engines.stamp(spec.engine)}"


def get(spec: ProbeSpec) -> ProbeResult | None:
    """The stored answer to ``spec``, marked ``cached=True``, or ``None``: also for a row whose
    MAC does not match (forged, or signed with another key), a row without one (stored before
    rows were signed) and a row that is not a valid answer to this very spec; each is counted
    in :func:`stats`."""
    found = key(spec)
    row = _store().run(lambda db: db.get(found))
    result = None if row is None else _authentic(found, row, spec)
    with _lock:
        _counts["hits" if result is not None else "misses"] += 1
    return None if result is None else result.model_copy(update={"cached": True})


def _authentic(found: str, row: Any, spec: ProbeSpec | None) -> ProbeResult | None:
    """The answer ``row`` holds when it is signed with this user's key, under ``found``, and is
    an answer to ``spec`` (any spec when ``None``); else ``None``, its reason counted."""
    verdict, body = (
        ("invalid", None)
        if type(row) is not str
        else _mac.verify(_mac.secret(create=False), found, row)
    )
    result = _valid(_rows.decode(body)) if verdict == "ok" else None  # an old format: a miss
    if verdict == "ok" and result is None:
        verdict = "invalid"
    elif result is not None and spec is not None and result.spec != spec:
        verdict, result = "mismatch", None
    if result is None:
        with _lock:
            _rejected[verdict] += 1
    return result


def _valid(text: Any) -> ProbeResult | None:
    """A stored row as a ``ProbeResult``, or ``None`` when it is not one."""
    if type(text) is not str:
        return None
    try:
        return ProbeResult.model_validate_json(text)
    except (pydantic.ValidationError, ValueError, RecursionError):
        return None


def put(result: ProbeResult) -> None:
    """Store ``result`` under its spec, signed (the caller decides whether it may be cached)."""
    _put_signed(key(result.spec), result.model_copy(update={"cached": False}).to_json())
    with _lock:
        _counts["stored"] += 1


def put_printed(found: str, text: str) -> None:
    """Store what the ``dtype-explorer`` command printed, signed, under ``found``
    (:mod:`~dtype_explorer.runtime.printed`): the command calls it with the text it laid out
    from a stored answer read back signed, never from a live one.

    Args:
        found: the printed answer's key, ``printed.key(question)``.
        text: what the command printed.

    Raises:
        ValueError: ``found`` is not a printed answer's key (a stored answer's key, say).

    >>> from dtype_explorer.runtime import printed
    >>> put_printed(printed.key({"target": "Dense", "backend": "numpy"}), "...")  # doctest: +SKIP
    """
    if not printed.is_key(found):
        raise ValueError(
            f"a printed answer's key starts with {printed.PREFIX!r}; received: {found[:40]!r}"
        )
    _put_signed(found, text)


def _put_signed(found: str, text: str) -> None:
    """``text`` stored under ``found``, compressed and signed (the MAC over what is stored)."""
    row = _mac.sign(_mac.secret(create=True), found, _rows.encode(text))
    _store().run(lambda db: db.set(found, row))


def results() -> Iterator[ProbeResult]:
    """Every stored answer signed with this user's key, for inspection (not the command's
    printed answers)."""
    store = _store()
    for k in store.run(list):
        if printed.is_key(k):
            continue
        row = store.run(lambda db, k=k: db.get(k)) if type(k) is str else None
        result = None if row is None else _authentic(k, row, None)
        if result is not None:
            yield result


def stats() -> dict[str, Any]:
    """What this process asked of the cache: answers served, lookups that found none, rows
    stored, and rows refused by reason.

    A refused row is also a miss. The reasons are ``mac`` (the row's MAC does not match: edited,
    forged, or signed with another user's key), ``unsigned`` (no MAC: stored before rows were
    signed, or by hand), ``invalid`` (not a probe result) and ``mismatch`` (the answer to
    another spec).

    Returns:
        ``{"hits": int, "misses": int, "stored": int, "rejected": {reason: int}}``, counted
        since this process started.

    >>> import dtype_explorer as dx
    >>> sorted(dx.cache.stats()), sorted(dx.cache.stats()["rejected"])
    (['hits', 'misses', 'rejected', 'stored'], ['invalid', 'mac', 'mismatch', 'unsigned'])
    """
    with _lock:
        return {**_counts, "rejected": dict(_rejected)}


def info() -> dict[str, Any]:
    """Where the cache lives, how many answers it holds (``entries``), how many of the
    command's printed answers (``printed``), and its size on disk."""
    store = _store()
    kept = sum(1 for k in store.run(list) if printed.is_key(k))
    return {
        "path": str(path()),
        "entries": store.run(len) - kept,
        "printed": kept,
        "size_bytes": store.run(_volume),
    }


def _volume(db: Any) -> int:
    return db.volume()


def clear() -> int:
    """Remove every stored answer; returns how many there were."""
    return _store().run(_clear)


def _clear(db: Any) -> int:
    return db.clear()
