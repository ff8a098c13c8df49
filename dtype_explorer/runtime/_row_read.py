"""One signed row read from the cache's database without its storage stack, and with the
standard library alone: SQLite opened read-only, one key looked up, the row's HMAC checked
with this user's key, its body decompressed. Both of the command's cached lanes read through
it: a stored answer (:mod:`.cache_read`) and a printed one (:mod:`.printed`).

It reads what :mod:`dtype_explorer.runtime.cache` stores (``diskcache``'s ``Cache`` table, a
text key with ``raw = 1`` and a text value) and refuses what that module refuses: a row not
signed with this user's key under this very key, or not of the stored format (:mod:`._rows`),
is ``None``, as is anything it cannot read (no database yet, a locked or damaged one). ``None``
is never an error: the caller then takes the full path, which says what went wrong.

>>> signed_text("no such key") is None
True
>>> readable("numpy"), readable("tensorflw")
(True, False)
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from dtype_explorer import backends, folders
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.runtime import _allowed, _mac, _rows
from dtype_explorer.runtime._kernelspec import KERNEL_ENGINE

#: The cache's database file in its directory (``_store.FILE``; a test pins them equal).
DB_FILE = "cache.db"
#: ``diskcache``'s lookup of an inline text row (``Disk.put``'s raw key, ``MODE_RAW``).
_LOOKUP = (
    "SELECT mode, value FROM Cache WHERE key = ? AND raw = 1"
    " AND (expire_time IS NULL OR expire_time > ?)"
)
_MODE_RAW = 1


def signed_text(found: str) -> str | None:
    """The body stored under ``found`` when its row is signed with this user's key, else
    ``None`` (no row, no key, another key's MAC, an old format, any SQLite error).

    Args:
        found: the row's full key.

    Returns:
        The row's body, decompressed, or ``None``.
    """
    row = _row(found)
    if row is None:
        return None
    try:
        secret = _mac.secret(create=False)
    except OSError:  # a key file that is not a key: the full path warns
        return None
    verdict, body = _mac.verify(secret, found, row) if secret is not None else ("mac", None)
    # authenticated, then decompressed: an old format or a bad stream is a miss
    return _rows.decode(body) if verdict == "ok" and body is not None else None


def readable(backend: str | None) -> bool:
    """Whether a cached answer on ``backend`` may be read here: not in the Keras 2 kernel
    (its questions are its engine's), and a backend the pool would run (installed, and
    allowed by the environment)."""
    if os.environ.get(KERNEL_ENGINE) or backend not in backends.BACKENDS:
        return False
    try:
        allowed = _allowed.env_backends()
    except InvalidSpecError:  # a misspelled variable: the full path says what is wrong
        return False
    return (allowed is None or backend in allowed) and _allowed.installed(backend)


def database() -> Path:
    """The cache's database file (it may not exist yet)."""
    return folders.cache_dir() / DB_FILE


def _row(found: str) -> str | None:
    """The text stored under ``found``, or ``None`` (no row, no database, any SQLite error)."""
    where = database()
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
