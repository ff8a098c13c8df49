"""What a front end needs to know about the installed Keras, without importing it.

Validating a question (its dtypes, its policy) needs two facts only Keras knows: its
``ALLOWED_DTYPES`` and which dtype policy names ``keras.dtype_policies.get`` accepts. Importing
Keras for them costs a front process its default backend (TensorFlow: seconds, hundreds of MB
and a screen of log lines) even when the probe runs in a worker on another backend. So the
facts are read from a **snapshot**: a small JSON file per Keras version, in the user's cache
directory (``folders.cache_dir``, shared with the result cache), written by the first process that
has Keras imported (a worker after it imports its backend, an in-process probe, or, when none
has yet, one short quiet ``python`` run on the numpy backend). The first question ever asked of
the workers does not pay for that run: ``dx.probe`` starts the workers first and checks the
question once one of them has written the snapshot (:func:`expecting`), so Keras is imported
once on the critical path, by the worker that answers. Every fact in it came from Keras:
``ALLOWED_DTYPES`` as Keras lists it, and each policy name's acceptance as
``keras.dtype_policies.get`` decided it. Reading them from Keras is the engine's work
(``keras_run._facts``, which installs its reader here with :func:`set_reader` when it is
imported): this module stores and reads the snapshot, and imports no Keras internals.

A policy name the snapshot does not list is decided by Keras's own rule as its code states it
(``keras/src/dtype_policies``): a name that starts with a quantization mode (``int8``,
``float8``, ...) or names a torch or ``jax.numpy`` dtype is asked of Keras itself (imported
then); any other name is accepted exactly when ``keras.backend.standardize_dtype`` accepts it
or it is ``mixed_float16``/``mixed_bfloat16``, and all of those are listed.

The cache directory may come from elsewhere (a CI artifact), so a snapshot is validated and a
bad one is ignored (Keras is asked instead).

>>> "bfloat16" in allowed_dtypes()
True
>>> policy_accepted("mixed_float16"), policy_accepted("mixed_flaot16")
(True, False)
"""

from __future__ import annotations

import contextlib
import email
import functools
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dtype_explorer import folders
from dtype_explorer.errors import unknown
from dtype_explorer.folders import cache_dir

#: The environment variable that moves the cache directory (``folders`` owns the folders).
ENV_DIR = folders.ENV_CACHE_DIR
#: The snapshot's layout; a file with another is ignored.
FORMAT = 1
#: The longest a quiet snapshot run may take before Keras is imported in this process instead.
_SNAPSHOT_TIMEOUT = 120.0
#: The snapshots this process made, by Keras version.
_made: dict[str | None, dict[str, Any]] = {}
#: Reads the facts from this process's Keras (``keras_run``'s, installed by :func:`set_reader`).
_reader: list[Callable[[], dict[str, Any]]] = []
#: Waits for a snapshot another process is writing (:func:`expecting`), tried before making one.
_expected: list[Callable[[], object]] = []
#: What the quiet snapshot run executes: the engine reads Keras and stores the snapshot.
_SNAPSHOT_CODE = "from dtype_explorer.keras_run import write_facts_snapshot; write_facts_snapshot()"


#: The last answer of :func:`keras_version`: ``(sys.path, metadata file, its stamp, version)``.
_found: list[tuple[tuple[str, ...], str, tuple[int, int], str]] = []


def keras_version() -> str | None:
    """The installed Keras's version, read from its metadata (Keras is not imported); asked
    before every probe, so the metadata's text is parsed once (``importlib.metadata`` parses
    it as an e-mail on each ``version()``), and found again only when ``sys.path`` or that
    metadata file changed (a reinstall or upgrade rewrites or removes it): a ``stat`` instead
    of a search of every ``sys.path`` entry (~0.1 ms, on every probe)."""
    where = tuple(sys.path)
    if _found:
        path, metadata, stamp, version = _found[0]
        if path == where and _stamp(metadata) == stamp:
            return version
    try:
        distribution = importlib.metadata.distribution("keras")
    except importlib.metadata.PackageNotFoundError:
        return None
    text = distribution.read_text("METADATA") or distribution.read_text("PKG-INFO")
    version = _version_in(text) if text else distribution.version
    folder = getattr(distribution, "_path", None)  # a PathDistribution's .dist-info folder
    metadata = str(Path(folder) / "METADATA") if folder is not None else ""
    stamp = _stamp(metadata)
    _found[:] = [(where, metadata, stamp, version)] if stamp is not None and version else []
    return version


def _stamp(path: str) -> tuple[int, int] | None:
    """``path``'s modification time and size (``None``: not there)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_mtime_ns, info.st_size


@functools.lru_cache(maxsize=4)
def _version_in(metadata_text: str) -> str:
    return email.message_from_string(metadata_text)["Version"]


def snapshot_path(version: str | None = None) -> Path:
    """Where the snapshot of Keras ``version`` (default: the installed one) is kept."""
    named = version or keras_version() or "none"
    name = "".join(c if c.isalnum() or c in ".-+" else "_" for c in named)
    return cache_dir() / f"keras-facts-{name}.json"


def allowed_dtypes() -> tuple[str, ...]:
    """Every dtype name Keras allows (``ALLOWED_DTYPES``), in Keras's order.

    Returns:
        The names, from the snapshot of the installed Keras (made first if there is none).

    >>> allowed_dtypes()[:2]
    ('float16', 'float32')
    """
    return tuple(facts()["allowed_dtypes"])


#: The Keras release that first had each quantization mode (``QUANTIZATION_MODES`` at each
#: release tag of keras-team/keras; int8: ``Model.quantize`` from 3.1.0). Which modes a
#: release has is asked of the release; this only names, for a mode it lacks, the release to go
#: to.
QUANTIZATION_ADDED_IN = {
    "int8": "3.1",
    "float8": "3.3",
    "int4": "3.11",
    "gptq": "3.12",
    "awq": "3.14",
}


def unknown_quantization_mode(asked: str, modes: tuple[str, ...] | None = None) -> str | None:
    """Why ``asked`` is no quantization mode: neither one of ``modes`` (``None``: the installed
    Keras's, from the snapshot) nor ``int4/<block size>`` where int4 is one, nor a mode a later
    release added (which is asked of Keras, to refuse in its words); ``None`` where it is one.

    Args:
        asked: the mode's name asked (``"int8"``, ``"int4/32"``).
        modes: the release's modes.

    Returns:
        The message (``unknown quantization mode 'int9'; did you mean 'int8'? Valid: ...``),
        or ``None``.

    >>> unknown_quantization_mode("int9", ("int8", "int4"))[:55]
    "unknown quantization mode 'int9'; did you mean 'int8'? "
    >>> unknown_quantization_mode("int4/32", ("int8", "int4")) is None
    True
    """
    modes = tuple(facts()["quantization_modes"]) if modes is None else modes
    block = "int4" in modes and asked.startswith("int4/") and asked[5:].isdigit()
    if block or asked in modes or asked in QUANTIZATION_ADDED_IN:
        return None
    return str(unknown("quantization mode", asked, [*modes, "int4/<block size>"]))


def policy_accepted(name: str) -> bool:
    """Whether ``keras.dtype_policies.get(name)`` accepts the policy name ``name``.

    Args:
        name: A policy name such as ``"mixed_float16"`` or ``"int8_from_float32"``.

    Returns:
        ``True`` when Keras builds a policy from it (answered from the snapshot, or by Keras
        itself for names the snapshot cannot decide).

    >>> policy_accepted("int8_from_float32"), policy_accepted("float33")
    (True, False)
    """
    known = facts()
    if name in known["policies"]:
        return bool(known["policies"][name])
    if (
        name.startswith(tuple(known["quantization_modes"]))
        or "torch" in name
        or "jax.numpy" in name
    ):
        return keras_accepts(name)
    return False  # not a dtype, not mixed_*, not quantized: standardize_dtype refuses it


@functools.cache
def keras_accepts(name: str) -> bool:
    """Whether ``keras.dtype_policies.get(name)`` (Keras's public API, imported here) accepts
    the policy name ``name``: the fact the snapshot records for every name it lists."""
    import keras

    # Keras before 3.3 has no public keras.dtype_policies.get: a layer's dtype= goes through
    # the same function there (keras.DTypePolicy alone refuses the quantized names)
    get = getattr(getattr(keras, "dtype_policies", None), "get", None) or (
        lambda name: keras.layers.Layer(dtype=name)
    )
    try:
        get(name)
    except (ValueError, TypeError):
        return False
    return True


def facts() -> dict[str, Any]:
    """The snapshot of the installed Keras: ``allowed_dtypes``, ``quantization_modes`` and
    ``policies`` (name -> accepted). Read from the cache directory; when there is none (or it
    is not valid), made here if Keras is already imported, else by one quiet short ``python``
    run, else by importing Keras here; then written for the next process.

    Returns:
        The snapshot as a dict.
    """
    version = keras_version()
    cached = _read(snapshot_path(version), version)
    if cached is not None:
        return cached
    if version in _made:  # made here before; its file is gone or was spoilt since
        _write(_made[version])
        return _made[version]
    while _expected:  # a worker is writing it: waited for, not made a second time here
        with contextlib.suppress(Exception):
            _expected.pop()()
        cached = _read(snapshot_path(version), version)
        if cached is not None:
            return cached
    if ("keras" not in sys.modules or not _reader) and _run_snapshot_process():
        cached = _read(snapshot_path(version), version)
        if cached is not None:
            return cached
    return write_snapshot()


def has_snapshot() -> bool:
    """Whether a valid snapshot of the installed Keras is in the cache directory (nothing is
    made: the question a front asks before it starts anything)."""
    version = keras_version()
    return _read(snapshot_path(version), version) is not None


@contextlib.contextmanager
def expecting(wait: Callable[[], object]) -> Iterator[None]:
    """Within the block, a snapshot that :func:`facts` needs and cannot read is first waited
    for with ``wait()`` (another process is writing it: a worker that is starting), and only
    made here (a quiet run, or Keras imported here) if it is still not there afterwards.

    Args:
        wait: returns once the snapshot may be there (its errors are ignored).
    """
    _expected.append(wait)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            _expected.remove(wait)


@functools.cache
def _read_file(path: Path, stamp: tuple[int, int]) -> dict[str, Any] | None:
    del stamp  # part of the memo key: a rewritten file is read again
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if _valid(data) else None


def _read(path: Path, version: str | None) -> dict[str, Any] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    data = _read_file(path, (info.st_mtime_ns, info.st_size))
    if data is None or data.get("keras") != version:
        return None
    return data


def _valid(data: Any) -> bool:
    """A snapshot of the expected layout: nothing else is trusted."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return False
    allowed, modes, policies = (
        data.get(k) for k in ("allowed_dtypes", "quantization_modes", "policies")
    )
    return (
        isinstance(allowed, list)
        and 0 < len(allowed) < 1000
        and all(isinstance(d, str) for d in allowed)
        and isinstance(modes, list)
        and all(isinstance(m, str) and m for m in modes)
        and isinstance(policies, dict)
        and len(policies) < 100_000
        and all(isinstance(k, str) and isinstance(v, bool) for k, v in policies.items())
        and (isinstance(data.get("keras"), str) or data.get("keras") is None)
    )


def set_reader(read: Callable[[], dict[str, Any]]) -> None:
    """Install the function that reads the facts from this process's Keras: ``read()`` returns
    ``allowed_dtypes``, ``quantization_modes`` and ``policies`` (the engine's, which imports
    Keras's internals for them)."""
    _reader[:] = [read]


def write_snapshot() -> dict[str, Any]:
    """Ask the Keras of this process (imported here if it is not yet) for the facts, through
    the engine's reader (:func:`set_reader`), and :func:`store` them.

    Returns:
        The snapshot as a dict.
    """
    if not _reader:
        raise RuntimeError(
            "no reader of Keras's facts is installed: import dtype_explorer.keras_run (it "
            "installs one), or let keras_facts.facts() make the snapshot in a short run"
        )
    return store(_reader[0]())


def store(read: dict[str, Any]) -> dict[str, Any]:
    """Make the snapshot of the installed Keras from the facts ``read`` from it
    (``allowed_dtypes``, ``quantization_modes``, ``policies``), keep it for this process and
    write it to :func:`snapshot_path` unless an identical snapshot is there (a directory that
    cannot be written is left alone).

    Returns:
        The snapshot as a dict.
    """
    data = {
        "format": FORMAT,
        "keras": keras_version(),
        "allowed_dtypes": list(read["allowed_dtypes"]),
        "quantization_modes": list(read["quantization_modes"]),
        "policies": dict(read["policies"]),
    }
    if not _valid(data):
        raise ValueError(f"not a snapshot of Keras's facts; received keys {sorted(read)}")
    _made[data["keras"]] = data  # kept even where the directory cannot be written
    _write(data)
    return data


def _write(data: dict[str, Any]) -> None:
    """Write ``data`` to its :func:`snapshot_path` (atomically) unless the file there already
    holds it; a directory that cannot be written is left alone."""
    path = snapshot_path(data["keras"])
    if _read(path, data["keras"]) == data:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, prefix=".keras-facts-", suffix=".tmp", delete=False
        ) as handle:
            json.dump(data, handle, indent=1)
        os.replace(handle.name, path)


def _run_snapshot_process() -> bool:
    """Write the snapshot from a short ``python`` run on Keras's numpy backend, its output
    discarded (nothing reaches this process's terminal); ``False`` if it did not work."""
    env = {
        **os.environ,
        "KERAS_BACKEND": "numpy",
        "JAX_PLATFORMS": "cpu",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        ENV_DIR: str(cache_dir()),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SNAPSHOT_CODE],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=_SNAPSHOT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


__all__ = [
    "ENV_DIR",
    "allowed_dtypes",
    "cache_dir",
    "expecting",
    "facts",
    "has_snapshot",
    "keras_accepts",
    "keras_version",
    "policy_accepted",
    "set_reader",
    "snapshot_path",
    "store",
    "write_snapshot",
]
