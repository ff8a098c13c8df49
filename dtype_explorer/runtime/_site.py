"""An engine's installed files, hashed and signed when it is created and checked when a worker
(or the Keras 2 kernel, or ``dtype-explorer run --engine``) starts, before that process imports
any of it; a worker forked from an engine's zygote checks them at its own start too, its zygote
having checked them before and after its imports. (A file swapped while a process imports it
and put back before the next check goes unseen, by any of these checks: the hashes are of the
files on disk, not of what was imported.)

Code placed in an engine's ``site/`` runs in its workers, and the engines folder may be
shared with a team, so ``engine.json`` records the SHA-256 of every file under ``site/``
(``site_files``, by relative path, compiled bytecode included: ``engines`` compiles every
module at creation, so that no worker writes any later) and one over all of them
(``site_sha256``: the sorted paths and their files' hashes). Whoever can write the site can
write ``engine.json`` too, so the record is signed (``mac``: an HMAC-SHA256 over the whole
record, :func:`dtype_explorer.runtime._mac.mac`) with this user's key, the cache's, which lives
outside the engines and cache folders: an edited record, or one made with another key, is
refused. A site holds regular files and folders only: a symbolic link (which the hashes would
read through, or not look inside) or any other kind of file is refused, named. A worker refuses
to start from a site that differs, naming the first file that was changed, added or removed.

Entering a site (:func:`enter`): what a spawned engine worker (``_worker.init``) and an
engine's zygote (``runtime._zygote``) do before they import the engine's Keras: nothing of
Keras or TensorFlow imported yet from the installed environment, the site checked as above, put
first on ``sys.path`` and, for ``tf_keras``, ``TF_USE_LEGACY_KERAS=1`` set (TensorFlow then
imports ``tf_keras``, not Keras 3). Once imported, the engine's Keras is checked to come from
the site, at its version, with what the probes use of it (:func:`check_from`,
:data:`KERAS_API`). A worker forked from an engine's zygote checks the files again at its own
start; the zygote's imports are not early imports there (:func:`entered_by_zygote`). (The
Keras 2 kernel enters its engine its own way: ``runtime._kernel2``.)

>>> import tempfile, pathlib
>>> site = pathlib.Path(tempfile.mkdtemp())
>>> _ = (site / "a.py").write_text("x = 1")
>>> recorded = digest(site)
>>> changed(site, recorded) is None
True
>>> _ = (site / "a.py").write_text("x = 2")
>>> changed(site, recorded)
'a.py (changed)'
>>> (site / "b.py").symlink_to(site / "a.py")
>>> changed(site, recorded)
'b.py (a symbolic link: a site holds regular files only)'
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import importlib
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dtype_explorer.records import Engine
from dtype_explorer.runtime import _mac
from dtype_explorer.runtime._index import EngineError

#: The field of ``engine.json`` that holds the record's signature.
MAC_FIELD = "mac"
_MAC_KEY = "dtype-explorer engine record v1"


class SiteError(EngineError):
    """A site holds something other than regular files and folders (named)."""


def digest(site: Path) -> dict[str, str]:
    """The SHA-256 of every file under ``site``, by its path relative to it (``/``-separated).

    Args:
        site: an engine's ``site`` directory.

    Returns:
        ``{relative path: hex digest}``, sorted by path.

    Raises:
        SiteError: a symbolic link or a file that is not a regular file is under ``site``
            (never followed nor read: a FIFO would block).
    """
    found = {}
    for folder, dirs, files in os.walk(site):
        dirs.sort()
        for name in sorted(dirs + files):
            path = Path(folder, name)
            relative = path.relative_to(site).as_posix()
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise SiteError(f"{relative} (a symbolic link: a site holds regular files only)")
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise SiteError(f"{relative} (not a regular file: a site holds regular files only)")
            found[relative] = _file_sha256(path)
    return dict(sorted(found.items()))


def _file_sha256(path: Path) -> str:
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(descriptor, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def total(files: dict[str, str]) -> str:
    """One SHA-256 over the sorted relative paths and their files' digests."""
    hasher = hashlib.sha256()
    for relative, file_digest in sorted(files.items()):
        hasher.update(f"{relative}\0{file_digest}\n".encode())
    return hasher.hexdigest()


def changed(site: Path, recorded: dict[str, str]) -> str | None:
    """The first file of ``site`` that differs from ``recorded`` (``"keras/__init__.py
    (changed)"``, ``"... (added)"``, ``"... (removed)"``, ``"... (a symbolic link: ...)"``),
    or ``None`` when none does."""
    try:
        now = digest(site)
    except SiteError as exc:
        return str(exc)
    except OSError as exc:
        return f"(unreadable: {exc})"
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


def _record_text(info: dict[str, Any]) -> str:
    unsigned = {k: v for k, v in info.items() if k != MAC_FIELD}
    return json.dumps(unsigned, sort_keys=True, separators=(",", ":"))


def sign(info: dict[str, Any]) -> str:
    """The signature of an engine's record ``info`` (every field but ``mac``), with this
    user's key (made now if there is none yet)."""
    secret = _mac.secret(create=True)
    assert secret is not None  # created when missing
    return _mac.mac(secret, _MAC_KEY, _record_text(info))


def _signature_problem(info: dict[str, Any], spec: str, again: str) -> str | None:
    said = info.get(MAC_FIELD)
    if not isinstance(said, str):
        return (
            f"engine {spec}: its engine.json is not signed (created before dtype-explorer "
            f"signed an engine's record, or the signature was removed), so the code its workers "
            f"would run cannot be checked; {again}"
        )
    try:
        secret = _mac.secret(create=False)
    except OSError as exc:
        return f"engine {spec}: its record cannot be checked: {exc}"
    made = None if secret is None else _mac.mac(secret, _MAC_KEY, _record_text(info))
    if made is None or not hmac.compare_digest(said, made):
        return (
            f"engine {spec}: its engine.json does not carry this user's signature (it was "
            f"edited, or made by another user or with another key than {_mac.key_file()}); "
            f"the engine refuses to start. {again}"
        )
    if info.get("spec") != spec:
        return f"engine {spec}: its engine.json is the record of {info.get('spec')!r}; {again}"
    return None


def problem(engine_dir: Path, spec: str) -> tuple[int, str | None]:
    """Check engine ``spec``'s ``site`` against its signed ``engine.json``: ``(files checked,
    what is wrong)``, ``None`` when nothing is. An engine created before its files were
    recorded and signed cannot be checked, and is refused too: its ``engine.json`` could have
    lost the record on purpose."""
    again = f"dx.engines.remove({spec!r}) and create it again"
    try:
        info = json.loads((engine_dir / "engine.json").read_text(encoding="utf-8"))
        if not isinstance(info, dict):
            raise ValueError(f"a JSON {type(info).__name__}, not an object")
    except (OSError, ValueError) as exc:
        return 0, f"engine {spec}: its engine.json is unreadable ({exc}); {again}"
    recorded, expected = info.get("site_files"), info.get("site_sha256")
    if not isinstance(recorded, dict) or not isinstance(expected, str):
        return 0, (
            f"engine {spec} ({engine_dir}) was created before dtype-explorer recorded the hash "
            f"of an engine's files, so the code its workers would run cannot be checked; {again}"
        )
    signature = _signature_problem(info, spec, again)
    if signature is not None:
        return 0, signature
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


def disk_use(path: Path) -> int:
    """Bytes on disk (allocated blocks, as ``du``) under ``path`` (an engine's folder)."""
    total = 0
    for entry in _walk(path):
        with contextlib.suppress(OSError):
            total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total


def _walk(path: Path) -> Iterator[os.DirEntry]:
    with contextlib.suppress(OSError), os.scandir(path) as entries:
        for entry in entries:
            yield entry
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(Path(entry.path))


# ------------------------------------------------- entering a site (a worker, a zygote)

#: What dtype-explorer's probes use of ``keras`` in a worker (checked in an engine's worker,
#: so an old release says what it lacks instead of failing probe by probe): 3.0.x lacks
#: ``keras.tree`` (from 3.1.0).
KERAS_API = (
    "config.set_dtype_policy",
    "config.set_floatx",
    "backend.result_type",
    "backend.standardize_dtype",
    "ops.convert_to_tensor",
    "tree.flatten",
    "KerasTensor",
)

#: The engine this process's zygote entered before its imports (:func:`enter_in_zygote`),
#: inherited by the workers it forks (``None`` in a spawned worker, or a backend's zygote's).
zygote_engine: dict[str, Any] | None = None


def enter(engine: Engine) -> tuple[str | None, str]:
    """Enter ``engine`` before its Keras imports: ``(what is wrong, where)``, ``(None, ...)``
    once its folder is first on ``sys.path``; ``where`` is ``"engine"`` for its changed
    files, ``"worker"`` for Keras or TensorFlow imported before from the installed
    environment (this process would answer with the installed Keras). In a worker forked
    from a zygote that entered ``engine`` before its imports (:func:`entered_by_zygote`),
    what is imported already is the engine's. Never raises."""
    early = [] if entered_by_zygote(engine) else _imported_early(engine)
    if early:
        return (
            f"{', '.join(early)} was imported from the installed environment before the "
            f"engine {engine.spec} could be put first on sys.path (a __main__ or sitecustomize "
            "that imports Keras, re-imported by multiprocessing's spawn?); this worker would "
            "answer with the installed Keras, so it answers nothing",
            "worker",
        )
    _, changed = problem(Path(engine.path), engine.spec)
    if changed is not None:  # its code is not what was installed: none of it runs
        return changed, "engine"
    sys.path.insert(0, engine.site)
    importlib.invalidate_caches()
    if engine.package == "tf_keras":
        os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tensorflow then imports tf_keras, not keras
    return None, "worker"


def _imported_early(engine: Engine) -> list[str]:
    return [
        name
        for name in ("keras", "tensorflow", "tf_keras")
        if name in sys.modules
        and not str(getattr(sys.modules[name], "__file__", "") or "").startswith(engine.site)
    ]


def entered_by_zygote(engine: Engine) -> bool:
    """Whether this process was forked from a zygote that entered ``engine`` itself (only
    such a zygote sets :data:`zygote_engine`, after its imports; a spawned process never)."""
    return zygote_engine == engine.to_dict()


def check_from(module: Any, engine: Engine) -> None:
    """Raise ``ImportError`` unless ``module`` (``keras`` or ``tf_keras``) came from
    ``engine``'s folder at its version, with :data:`KERAS_API`."""
    where = str(getattr(module, "__file__", ""))
    if not where.startswith(engine.site) or module.__version__ != engine.version:
        raise ImportError(
            f"{module.__name__} {module.__version__} was imported from {where}, not from the "
            f"engine {engine.spec} ({engine.site})"
        )
    if module.__name__ == "keras":
        missing = [name for name in KERAS_API if not _has(module, name)]
        if missing:
            raise ImportError(
                f"Keras {module.__version__} lacks {', '.join('keras.' + m for m in missing)}, "
                "which dtype-explorer's probes use; engines from Keras 3.1.0 on can probe"
            )


def _has(module: Any, dotted: str) -> bool:
    value = module
    for part in dotted.split("."):
        value = getattr(value, part, None)
        if value is None:
            return False
    return True


def enter_in_zygote(engine: dict[str, Any], backend: str) -> None:
    """A zygote's imports for ``engine``'s workers (``runtime._zygote.serve``): :func:`enter`,
    then the engine's Keras imported (``tf_keras`` after TensorFlow for the Keras 2 engine)
    and checked (:func:`check_from`), then the site checked again (every worker it forks
    would inherit what it imported: a file changed while it imported is refused here, not
    only in the worker that happened to import it); no device and no first op. Raises
    ``ImportError`` on any failure: the zygote then says so, and the worker spawns and
    reports it as before."""
    global zygote_engine
    record = Engine.from_dict(engine)
    error, _ = enter(record)
    if error is not None:
        raise ImportError(error)
    if record.package == "tf_keras":
        import tensorflow  # noqa: F401
        import tf_keras

        check_from(tf_keras, record)
    else:
        import keras

        check_from(keras, record)
        if keras.backend.backend() != backend:
            raise ImportError(f"Keras imported on {keras.backend.backend()}")
    _, changed = problem(Path(record.path), record.spec)
    if changed is not None:
        raise ImportError(changed)
    zygote_engine = record.to_dict()
