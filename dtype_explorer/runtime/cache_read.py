"""A cached answer read without the cache's storage stack: SQLite opened read-only, one row
looked up by its key, its HMAC checked with this user's key, and the body validated as the
answer to this very spec. The ``dtype-explorer`` command's cached answer uses it
(``frontends.command``), so that it imports no ``diskcache``, ``filelock``, worker pool or
``typer``.

It is a read of what :mod:`dtype_explorer.runtime.cache` stores (``diskcache``'s ``Cache``
table, a text key with ``raw = 1`` and a text value), and refuses what that module refuses: a
row that is not signed with this user's key, not of the stored format (:mod:`._rows`), not a
``ProbeResult``, or the answer to another spec is ``None``, as is anything it cannot read (no
database yet, a locked or damaged one, an engine's spec, a backend not installed or not
allowed). ``None`` is never an error: the caller
then asks the full path, which runs the probe live and says what went wrong.

>>> from dtype_explorer.records import ProbeSpec
>>> spec = ProbeSpec(target="Dense", input_dtypes=("float32",), policy="float32",
...                  backend="numpy", kwargs={"units": 2}, shapes=((2, 3),))
>>> answer(spec) is None or answer(spec).cached
True
"""

from __future__ import annotations

import os
import sqlite3
import time

import pydantic

from dtype_explorer import backends, folders
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import ProbeResult, ProbeSpec
from dtype_explorer.runtime import _allowed, _mac, _rows
from dtype_explorer.runtime._cache_key import installed_key
from dtype_explorer.runtime._kernelspec import KERNEL_ENGINE

#: The cache's database file in its directory (``_store.FILE``; a test pins them equal).
DB_FILE = "cache.db"
#: The variable that limits the backends a worker may start for (read by ``_allowed``).
ENV_BACKENDS = _allowed.ENV_BACKENDS
#: ``diskcache``'s lookup of an inline text row (``Disk.put``'s raw key, ``MODE_RAW``).
_LOOKUP = (
    "SELECT mode, value FROM Cache WHERE key = ? AND raw = 1"
    " AND (expire_time IS NULL OR expire_time > ?)"
)
_MODE_RAW = 1


def answer(spec: ProbeSpec) -> ProbeResult | None:
    """The stored answer to ``spec`` (``cached=True``) when it is there and signed with this
    user's key, else ``None`` (see the module's docstring).

    Args:
        spec: a checked spec (``make_spec``) for one backend, without an engine.

    Returns:
        The answer, marked cached, or ``None``.
    """
    if spec.engine is not None or os.environ.get(KERNEL_ENGINE) or not _usable(spec.backend):
        return None
    found = installed_key(spec)
    row = _row(found)
    if row is None:
        return None
    try:
        secret = _mac.secret(create=False)
    except OSError:  # a key file that is not a key: the full path warns
        return None
    verdict, body = _mac.verify(secret, found, row) if secret is not None else ("mac", None)
    # authenticated, then decompressed (``_rows``): an old format or a bad stream is a miss
    text = _rows.decode(body) if verdict == "ok" and body is not None else None
    if text is None:
        return None
    try:
        result = ProbeResult.model_validate_json(text)
    except (pydantic.ValidationError, ValueError, RecursionError):
        return None
    if result.spec != spec:
        return None
    return result.model_copy(update={"cached": True})


def _usable(backend: str | None) -> bool:
    """Whether the pool would run ``backend`` (installed, and allowed by the environment)."""
    if backend not in backends.BACKENDS:
        return False
    try:
        allowed = _allowed.env_backends()
    except InvalidSpecError:  # a misspelled variable: the full path says what is wrong
        return False
    return (allowed is None or backend in allowed) and _allowed.installed(backend)


def _row(found: str) -> str | None:
    """The text stored under ``found``, or ``None`` (no row, no database, any SQLite error)."""
    where = folders.cache_dir() / DB_FILE
    if not where.is_file():
        return None
    try:
        db = sqlite3.connect(f"{where.as_uri()}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return None
    try:
        hit = db.execute(_LOOKUP, (found, time.time())).fetchone()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    if hit is None or hit[0] != _MODE_RAW or type(hit[1]) is not str:
        return None
    return hit[1]
