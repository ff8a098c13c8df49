"""The cache directory's database, opened as its state allows: read and written, only read
(a read-only folder), moved aside and rebuilt (a damaged ``cache.db``), or left out with one
warning saying why (a path too long for SQLite, a file that broke again after the rebuild).

Every fault is warned about once per directory and process; the probe then answers from the
part that works (or live), never with an error.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import diskcache

_T = TypeVar("_T")
FILE = "cache.db"
#: SQLite's unix VFS limit on a file's path (``MAX_PATHNAME``), in bytes; the cache's longest
#: file is the rollback journal, ``cache.db-journal``.
SQLITE_MAX_PATH = 512
_JOURNAL = "-journal"
#: The SQLite result codes that say the file is not a (whole) database.
_DAMAGED = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}


def _warn(message: str) -> None:
    """Warn, attributed to the first caller outside dtype-explorer."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
        "dtype_explorer"
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"dtype-explorer's result cache: {message}", UserWarning, stacklevel=level)


def damaged(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file is damaged (cut short, overwritten), not busy.

    >>> damaged(sqlite3.DatabaseError("database disk image is malformed"))
    True
    >>> damaged(sqlite3.OperationalError("database is locked"))
    False
    """
    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, sqlite3.OperationalError):
        return False
    name = getattr(exc, "sqlite_errorname", "")
    return name in _DAMAGED or any(t in str(exc) for t in ("malformed", "not a database"))


def too_long(directory: str) -> str | None:
    """What is wrong with ``directory`` when SQLite cannot take its files' paths, else ``None``.

    >>> too_long("/tmp/cache") is None
    True
    >>> print(too_long("/" + "d" * 600))  # doctest: +ELLIPSIS
    the cache path is too long for SQLite: .../cache.db-journal is 618 bytes, ...
    """
    journal = os.path.join(directory, FILE + _JOURNAL)
    size = len(os.fsencode(journal))
    if size <= SQLITE_MAX_PATH:
        return None
    most = SQLITE_MAX_PATH - len(os.fsencode(os.sep + FILE + _JOURNAL))
    return (
        f"the cache path is too long for SQLite: {journal[:40]}...{journal[-40:]} is {size} "
        f"bytes, SQLite allows {SQLITE_MAX_PATH} (a cache directory of at most {most} bytes); "
        "set $DTYPE_EXPLORER_CACHE_DIR to a shorter path"
    )


def writable(directory: str) -> bool:
    """Whether a file can be created in ``directory`` (tried for real: permissions, a
    read-only mount and an immutable folder all say no, whoever runs)."""
    try:
        descriptor, name = tempfile.mkstemp(dir=directory, prefix=".dx-write-check-")
    except OSError:
        return False
    os.close(descriptor)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return True


class ReadOnly:
    """A cache database only read (no transaction, no write, no journal): for a folder this
    process cannot write. The rows are read as ``_TextDisk`` reads them: text stored inline."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        file = Path(directory) / FILE
        self._sql = None
        if file.exists():
            self._sql = sqlite3.connect(
                f"{file.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
            )

    def _rows(self, query: str, *args: Any) -> list[tuple]:
        return [] if self._sql is None else self._sql.execute(query, args).fetchall()

    def get(self, key: str) -> Any:
        rows = self._rows("SELECT mode, value FROM Cache WHERE key = ? AND raw = 1", key)
        if not rows:
            return None
        ((mode, value),) = rows
        return value if mode == diskcache.core.MODE_RAW and type(value) is str else None

    def set(self, key: str, value: str) -> None:
        """Nothing is stored in a folder this process cannot write."""

    def __iter__(self) -> Iterator[Any]:
        return iter([k for (k,) in self._rows("SELECT key FROM Cache WHERE raw = 1")])

    def __len__(self) -> int:
        return self._rows("SELECT COUNT(*) FROM Cache")[0][0] if self._sql else 0

    def volume(self) -> int:
        return (Path(self.directory) / FILE).stat().st_size if self._sql else 0

    def clear(self) -> int:
        raise PermissionError(f"the cache at {self.directory} is read-only; nothing was removed")

    def close(self) -> None:
        if self._sql is not None:
            self._sql.close()


class Off(ReadOnly):
    """No database: every lookup is a miss and nothing is stored."""

    def __init__(self, directory: str) -> None:
        self.directory, self._sql = directory, None

    def clear(self) -> int:
        return 0


class Store:
    """The database of one cache directory, for this process.

    Args:
        directory: the cache directory.
        opener: opens the read-write database (``diskcache.Cache`` with the cache's settings).
    """

    def __init__(self, directory: str, opener: Callable[[str], Any]) -> None:
        self.directory = directory
        self._opener = opener
        self._rebuilt = False
        self._inode: int | None = None
        self.db: Any = self._open()

    def _open(self) -> Any:
        # 1. A path SQLite cannot take: say so (not "unwritable"), run without the cache.
        problem = too_long(self.directory)
        if problem is not None:
            _warn(f"{problem}; running live")
            return Off(self.directory)
        # 2. A folder this process cannot write: read what it holds, store nothing.
        os.makedirs(self.directory, exist_ok=True)
        if not writable(self.directory):
            _warn(
                f"{self.directory} is read-only: stored answers are read from it, new ones "
                "are not stored (set $DTYPE_EXPLORER_CACHE_DIR to a writable directory to "
                "keep them)"
            )
            return ReadOnly(self.directory)
        # 3. The database, moved aside and made anew when its file is damaged.
        try:
            db = self._opener(self.directory)
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            return self._rebuild(exc)
        self._inode = self._file_inode()
        return db

    def _file_inode(self) -> int | None:
        with contextlib.suppress(OSError):
            return os.stat(Path(self.directory) / FILE).st_ino
        return None

    def _rebuild(self, exc: BaseException) -> Any:
        """Move a damaged ``cache.db`` (and its journal) aside as ``cache.db.broken-<time>``
        and open a new one; a file damaged again in the same process turns the cache off."""
        with contextlib.suppress(Exception):
            self.db.close()
        if self._rebuilt:
            _warn(f"{FILE} was damaged again ({exc}); running live for the rest of this session")
            return Off(self.directory)
        self._rebuilt = True
        file = Path(self.directory) / FILE
        aside = file.with_name(f"{FILE}.broken-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        if self._inode is None or self._file_inode() == self._inode:  # not rebuilt elsewhere
            with contextlib.suppress(FileNotFoundError):
                os.replace(file.with_name(FILE + _JOURNAL), aside.with_name(aside.name + _JOURNAL))
            with contextlib.suppress(FileNotFoundError):
                os.replace(file, aside)
        _warn(f"{file} is damaged ({exc}); it was moved to {aside.name} and the cache rebuilt")
        db = self._opener(self.directory)
        self._inode = self._file_inode()
        return db

    def run(self, operation: Callable[[Any], _T]) -> _T:
        """``operation(db)``; a damaged file found on the way is rebuilt and the operation run
        once more."""
        try:
            return operation(self.db)
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            self.db = self._rebuild(exc)
            return operation(self.db)

    def close(self) -> None:
        self.db.close()
