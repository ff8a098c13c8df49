"""Editing stored cache rows as an attacker would: the answer's JSON changed under the row's
own MAC (a well-formed lie). Rows are stored compressed (``runtime/_rows.py``), so the body is
decompressed, edited and compressed again; the MAC is kept as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dtype_explorer.runtime import _rows


def forged(value: str, old: str, new: str) -> str | None:
    """``value`` (a stored row) with ``old`` replaced by ``new`` in its answer, the MAC kept;
    ``None`` when the row holds no compressed answer containing ``old``."""
    mac, sep, stored = str(value).partition(":" + _rows.TAG)
    body = _rows.decode(_rows.TAG + stored) if sep else None
    if body is None or old not in body:
        return None
    return f"{mac}:{_rows.encode(body.replace(old, new))}"


def forge_rows(db_file: Path, old: str, new: str) -> int:
    """Replace ``old`` by ``new`` in every stored answer of ``db_file``; the rows changed."""
    changed = 0
    db = sqlite3.connect(db_file, isolation_level=None)
    try:
        for rowid, value in db.execute("SELECT rowid, value FROM Cache").fetchall():
            lie = forged(value, old, new)
            if lie is not None:
                db.execute("UPDATE Cache SET value = ? WHERE rowid = ?", (lie, rowid))
                changed += 1
    finally:
        db.close()
    return changed
