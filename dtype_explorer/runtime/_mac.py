"""The cache's row signatures: an HMAC-SHA256 over a row's key and body, keyed by a per-user
secret kept outside the cache directory.

A cache directory may be shared (a team folder, a CI artifact), so whoever can write there
could store a well-formed lie. A row is believed only when it carries the MAC made with this
user's key, which lives in the user's config directory (``platformdirs.user_config_dir``), or
in the file ``$DTYPE_EXPLORER_CACHE_KEY_FILE`` names: 32 random bytes as hex text, file mode
0600, created atomically on the first write.

A signed row is ``v1:<64 hex digits>:<body>``.

>>> import hmac
>>> secret = bytes(32)
>>> row = sign(secret, "key", '{"a":1}')
>>> row.startswith("v1:"), verify(secret, "key", row), verify(secret, "other key", row)
(True, ('ok', '{"a":1}'), ('mac', None))
>>> verify(secret, "key", '{"a":1}')
('unsigned', None)
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat as stat_module
import threading
from pathlib import Path
from typing import Literal

import platformdirs

from dtype_explorer import folders

ENV_KEY_FILE = "DTYPE_EXPLORER_CACHE_KEY_FILE"
_PREFIX = "v1:"
_DIGITS = 64  # SHA-256, in hex
_KEY_BYTES = 32
_START, _END = len(_PREFIX), len(_PREFIX) + _DIGITS
_lock = threading.Lock()
_loaded: dict[tuple[str, int, int], bytes] = {}

Verdict = Literal["ok", "mac", "unsigned"]


class CacheKeyError(OSError):
    """The cache key file exists but is not a key (the cache then runs live, with a warning)."""


def key_file() -> Path:
    """Where this user's cache key is: ``$DTYPE_EXPLORER_CACHE_KEY_FILE``, else
    ``cache.key`` in the user's config directory (never inside the cache directory).

    >>> key_file().name != ""
    True
    """
    named = os.environ.get(ENV_KEY_FILE)
    if named:
        return Path(named).expanduser()
    return Path(platformdirs.user_config_dir("dtype-explorer", appauthor=False)) / "cache.key"


def secret(*, create: bool) -> bytes | None:
    """This user's key; ``None`` when there is none and ``create`` is false (a read: nothing
    stored by this user can be there). Raises :class:`CacheKeyError` for a file that is not a
    key, naming it."""
    where = key_file()
    try:
        stat = where.stat()
    except FileNotFoundError:
        if not create:
            return None
        _create(where)
        stat = where.stat()
    _refuse_unsafe(where, stat)  # before any read: a FIFO would block under the lock
    found = (str(where), stat.st_ino, stat.st_mtime_ns)
    with _lock:
        if found not in _loaded:
            _loaded.clear()
            _loaded[found] = _read(where)
        return _loaded[found]


def _refuse_unsafe(where: Path, found: os.stat_result) -> None:
    """A key file that is no regular file (a directory, a FIFO), that another user owns or
    may write, or that lies inside the cache directory (whose writers would then hold the key)
    is refused, naming the file and ``$DTYPE_EXPLORER_CACHE_KEY_FILE``."""
    why = None
    if not stat_module.S_ISREG(found.st_mode):
        kind = "a directory" if stat_module.S_ISDIR(found.st_mode) else "not a regular file"
        why = f"is {kind} (a FIFO or a device blocks or lies)"
    elif hasattr(os, "getuid") and found.st_uid != os.getuid():
        why = f"is owned by another user (uid {found.st_uid}), who could forge every row"
    elif found.st_mode & 0o022:
        why = f"is writable by others (mode {found.st_mode & 0o777:o}); chmod 600 it"
    else:
        cache = folders.cache_dir().resolve()
        if where.resolve().is_relative_to(cache):
            why = f"is inside the cache directory {cache}, whose writers would hold the key"
    if why is not None:
        raise CacheKeyError(
            f"the cache key file {where} {why}; the cache runs live. Set ${ENV_KEY_FILE} to "
            "a file of your own outside the cache directory (a new key is made there)"
        )


def _read(where: Path) -> bytes:
    text = where.read_text(encoding="ascii", errors="replace").strip()
    try:
        value = bytes.fromhex(text)
    except ValueError:
        value = b""
    if len(value) < _KEY_BYTES:
        raise CacheKeyError(
            f"the cache key file {where} is not a key: expected {_KEY_BYTES * 2} or more hex "
            f"digits, received {len(text)} characters; remove it (a new key is made on the next "
            f"write and rows signed with the old one are misses) or set ${ENV_KEY_FILE}"
        )
    return value


def _create(where: Path) -> None:
    """Write a new key to ``where`` atomically: a 0600 temporary file linked into place, so
    two processes creating it at once agree on one key and nobody reads half a key."""
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = where.with_name(f".{where.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(secrets.token_hex(_KEY_BYTES) + "\n")
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs
            os.link(temporary, where)
    finally:
        temporary.unlink(missing_ok=True)


def mac(secret: bytes, key: str, body: str) -> str:
    """The HMAC-SHA256 of ``body`` under ``key`` (hex): a row's signature, and an engine's
    (``_site``: its ``engine.json`` signed with the same per-user key)."""
    encoded = key.encode()
    message = b"%d:" % len(encoded) + encoded + body.encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def sign(secret: bytes, key: str, body: str) -> str:
    """The stored form of ``body`` under ``key``: its MAC, then the body."""
    return f"{_PREFIX}{mac(secret, key, body)}:{body}"


def verify(secret: bytes | None, key: str, row: str) -> tuple[Verdict, str | None]:
    """``("ok", body)`` for a row signed with ``secret`` under ``key``; ``("unsigned", None)``
    for a row without a MAC (stored before rows were signed, or by hand), ``("mac", None)``
    for a MAC that does not match (another key, another row's key, an edited body)."""
    if not row.startswith(_PREFIX) or row[_END : _END + 1] != ":":
        return "unsigned", None
    said, body = row[_START:_END], row[_END + 1 :]
    if secret is None or not hmac.compare_digest(said, mac(secret, key, body)):
        return "mac", None
    return "ok", body
