"""An engine's installed files, hashed when it is created and checked when a worker starts.

Code placed in an engine's ``site/`` runs in its workers, and the engines folder may be
shared with a team, so ``engine.json`` records the SHA-256 of every file under ``site/``
(``site_files``, by relative path, compiled bytecode included: ``engines`` compiles every
module at creation, so that no worker writes any later) and one over all of them
(``site_sha256``: the sorted paths and their files' hashes). A worker refuses to start from a
site that differs, naming the first file that was changed, added or removed.

>>> import tempfile, pathlib
>>> site = pathlib.Path(tempfile.mkdtemp())
>>> _ = (site / "a.py").write_text("x = 1")
>>> recorded = digest(site)
>>> changed(site, recorded) is None
True
>>> _ = (site / "a.py").write_text("x = 2")
>>> changed(site, recorded)
'a.py (changed)'
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def digest(site: Path) -> dict[str, str]:
    """The SHA-256 of every file under ``site``, by its path relative to it (``/``-separated).

    Args:
        site: an engine's ``site`` directory.

    Returns:
        ``{relative path: hex digest}``, sorted by path.
    """
    found = {}
    for folder, dirs, files in os.walk(site):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder, name)
            relative = path.relative_to(site).as_posix()
            found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return dict(sorted(found.items()))


def total(files: dict[str, str]) -> str:
    """One SHA-256 over the sorted relative paths and their files' digests."""
    hasher = hashlib.sha256()
    for relative, file_digest in sorted(files.items()):
        hasher.update(f"{relative}\0{file_digest}\n".encode())
    return hasher.hexdigest()


def changed(site: Path, recorded: dict[str, str]) -> str | None:
    """The first file of ``site`` that differs from ``recorded`` (``"keras/__init__.py
    (changed)"``, ``"... (added)"``, ``"... (removed)"``), or ``None`` when none does."""
    now = digest(site)
    if now == recorded:
        return None
    for relative in sorted(recorded.keys() | now.keys()):
        if relative not in now:
            return f"{relative} (removed)"
        if relative not in recorded:
            return f"{relative} (added)"
        if now[relative] != recorded[relative]:
            return f"{relative} (changed)"
    return None


def problem(engine_dir: Path, spec: str) -> tuple[int, str | None]:
    """Check engine ``spec``'s ``site`` against its ``engine.json``: ``(files checked, what is
    wrong)``, ``None`` when nothing is. An engine created before its files were recorded
    cannot be checked, and is refused too: its ``engine.json`` could have lost the record
    on purpose."""
    again = f"dx.engines.remove({spec!r}) and create it again"
    try:
        info = json.loads((engine_dir / "engine.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return 0, f"engine {spec}: its engine.json is unreadable ({exc}); {again}"
    recorded, expected = info.get("site_files"), info.get("site_sha256")
    if not isinstance(recorded, dict) or not isinstance(expected, str):
        return 0, (
            f"engine {spec} ({engine_dir}) was created before dtype-explorer recorded the hash "
            f"of an engine's files, so the code its workers would run cannot be checked; {again}"
        )
    if total(recorded) != expected:
        return len(recorded), (
            f"engine {spec}: the file hashes in its engine.json do not match their recorded "
            f"total; {again}"
        )
    found = changed(engine_dir / "site", recorded)
    if found is not None:
        return len(recorded), (
            f"engine {spec}: a file of its installed code differs from what was installed: "
            f"site/{found}; the engine refuses to start. {again}"
        )
    return len(recorded), None
