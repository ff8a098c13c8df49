"""The command's printed answers: what ``dtype-explorer probe ...`` printed for a stored
answer, kept under its own command line, so that the same command asked again prints it with
the standard library alone (no NumPy, pydantic, record, spec check or view imported).

A printed row is written only from a stored answer that was read back signed and validated as
the answer to the command's spec, and laid out by the text view exactly as the command prints
it (``frontends.command``: after the full command answered live, or after such a stored answer
was printed); it is never written from a live result, a failure or anything the cache does not
keep. Its key is the command's question (the options as typed, :func:`key`) followed by what
every stored answer's key ends with (``_cache_key.answered_by``: the versions of
dtype-explorer, Keras, NumPy, Python and the backend's package, where it runs, ``keras.json``
and the ``KERAS_*``/``JAX_*`` variables). What can change the answer to the same command line
is in that key, so a printed row answers exactly when the stored answer it came from would; an
upgrade, another ``keras.json`` or ``JAX_ENABLE_X64`` asks again.

It is signed like every row (:mod:`._mac`, over its key and body: a row moved to another
command line or edited is refused), stored in the same database (``cache.put_printed``),
removed with the rest by ``dx.cache.clear()``, and never read inside the Keras 2 kernel, for
a backend not installed or not allowed by ``$DTYPE_EXPLORER_BACKENDS``, or for a question on
several backends.

>>> key({"target": "Dense", "backend": "numpy"}).startswith(PREFIX + '{"backend":"numpy"')
True
>>> key({"target": "Dense", "backend": "numpy,jax"}) is None
True
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dtype_explorer
from dtype_explorer import backends
from dtype_explorer.runtime import _row_read
from dtype_explorer.runtime._cache_key import answered_by, compact

#: Where a printed row's key starts: never the start of a stored answer's (a spec's JSON).
PREFIX = "printed|"
_PACKAGE = Path(dtype_explorer.__file__).parent
#: The code that turns a stored answer into the printed text (:func:`layout_stamp`).
_LAYOUT = (
    _PACKAGE / "records",
    _PACKAGE / "views",
    _PACKAGE / "errors.py",
    _PACKAGE / "frontends" / "_cached_answer.py",
)
#: How long the command waits to keep a printed answer while another process writes.
_BUSY_WAIT = 0.2


def key(asked: Mapping[str, Any]) -> str | None:
    """The key of the printed answer to ``asked``, or ``None`` when it names no one backend.

    Args:
        asked: the command's question as option texts (``frontends.command.question``).

    Returns:
        ``printed|`` + the question as sorted JSON + the code that lays it out
        (:func:`layout_stamp`) + what answers on its backend in its mode, or ``None``.
    """
    backend = str(asked.get("backend", "")).strip()
    if backend not in backends.BACKENDS:
        return None
    mode = str(asked.get("mode", "call")).strip()
    return f"{PREFIX}{compact(dict(asked))}|{layout_stamp()}|{answered_by(backend, mode)}"


def is_key(found: object) -> bool:
    """Whether ``found`` (a key of the cache's table) is a printed answer's.

    >>> is_key(PREFIX + "{}"), is_key('{"target":"Dense"}|...')
    (True, False)
    """
    return type(found) is str and found.startswith(PREFIX)


def layout_stamp() -> str:
    """What the printed text was laid out by, read without importing it: the newest change
    time and the number of the modules that read an answer and write its text (the records,
    the views, the errors' escaping, the stored answer's lane). A checkout edited or a package
    reinstalled under the same version lays out anew.

    >>> layout_stamp().count(":")
    1
    """
    newest, count = 0, 0
    for where in _LAYOUT:
        with contextlib.suppress(OSError):
            found = (
                [where]
                if where.suffix
                else [e for e in os.scandir(where) if e.name.endswith(".py")]
            )
            for entry in found:
                newest = max(newest, os.stat(entry).st_mtime_ns)
                count += 1
    return f"{newest}:{count}"


def busy() -> bool:
    """Whether another process is writing the cache's database now (a write would wait):
    the command then keeps nothing rather than hold its exit for it. No database: not busy.

    >>> busy()
    False
    """
    where = _row_read.database()
    if not where.is_file():
        return False
    try:
        db = sqlite3.connect(where, timeout=_BUSY_WAIT, isolation_level=None)
    except sqlite3.Error:
        return True
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
    except sqlite3.Error:
        return True
    finally:
        db.close()
    return False


def read(asked: Mapping[str, Any]) -> str | None:
    """The text the command printed for ``asked`` when it is kept and signed with this
    user's key, else ``None`` (the command then reads the stored answer, or asks live).

    Args:
        asked: the command's question as option texts.

    Returns:
        The printed text, or ``None``.
    """
    found = key(asked)
    if found is None or not _row_read.readable(str(asked["backend"]).strip()):
        return None
    return _row_read.signed_text(found)
