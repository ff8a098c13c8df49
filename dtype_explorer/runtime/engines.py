"""Engines: other Keras 3 releases, Keras's main (``keras-nightly``), and Keras 2 (``tf_keras``),
installed beside the user's.

Keras is pure Python, so an engine is one small directory in the user cache dir holding the
Keras release alone (plus a dependency the installed environment lacks: ``dm-tree`` for
3.0.x), installed with this interpreter's pip as ``pip install --no-deps --only-binary=:all:
--target``. Its workers put that directory first on ``sys.path`` before anything imports
TensorFlow or Keras (``pool``), and so run that Keras over the installed jax, tensorflow,
torch and numpy. The user's own environment is never changed.

Creating one: ``pip install --dry-run --report`` resolves the release against the installed
packages (reading only) and an engine that would need to *replace* one (``tf_keras==2.20.1``
wants tensorflow 2.20) is refused, naming both versions; the install goes into a temporary
directory next to the engines, the release is imported in a subprocess, then ``engine.json``
is written and the directory renamed into place: an engine exists whole or not at all. A
per-engine file lock makes a second creator wait and reuse the first one's engine. pip and
the check run in their own process group: a ``KeyboardInterrupt`` (or ``cancel``) kills
them and leaves nothing behind. ``"nightly"`` is pinned (:func:`pin`) to the exact newest
``keras-nightly`` build before it is created, probed or cached.

>>> import dtype_explorer as dx
>>> dx.engines.create("keras==3.11.3")       # doctest: +SKIP
Engine(spec='keras==3.11.3', package='keras', version='3.11.3', ...)
>>> [e.spec for e in dx.engines.list()]      # doctest: +SKIP
['keras==3.11.3', 'tf_keras==2.21.0']
>>> dx.engines.remove("keras==3.11.3")       # doctest: +SKIP
True
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import filelock
import pydantic

from dtype_explorer import folders, keras_release
from dtype_explorer.records import (
    Engine,
    check_engine_backend,
    engine_package,
    engine_spec,
    is_moving,
    pinned_engine,
)
from dtype_explorer.runtime import _engine_build as engine_build
from dtype_explorer.runtime import _index
from dtype_explorer.runtime import _kernel2 as keras2_launcher
from dtype_explorer.runtime import _kernelspec as keras2_kernel
from dtype_explorer.runtime import _nightly as nightly
from dtype_explorer.runtime import _plan as plans
from dtype_explorer.runtime import _site as site_files
from dtype_explorer.runtime._engine_check import BASE_DISTRIBUTIONS, base_versions
from dtype_explorer.runtime._index import (
    STEP_TIMEOUT,
    EngineError,
    PackageIndexError,
    canon,
    index_releases,
)
from dtype_explorer.runtime._plan import KERAS2_EXTRAS

__all__ = [
    "BASE_DISTRIBUTIONS",
    "ENV_DIR",
    "KERAS2_EXTRAS",
    "STEP_TIMEOUT",
    "EngineError",
    "PackageIndexError",
    "Progress",
    "base_versions",
    "check_backend",
    "create",
    "created",
    "current",
    "ensure",
    "enter_kernel",
    "get",
    "index_releases",
    "keras2_display",
    "kernel",
    "list",
    "missing_backend",
    "pin",
    "remove",
    "require",
    "root",
    "script_command",
    "stamp",
    "verify_site",
]

#: Where engines live instead of ``<cache dir>/engines`` (``folders`` owns the folders).
ENV_DIR = folders.ENV_ENGINES_DIR
Progress = engine_build.Progress

#: Called with an engine's pinned spec before it is removed (the pool stops its workers).
BEFORE_REMOVE: list[Callable[[str], None]] = []


def root() -> Path:
    """The directory engines live in: ``$DTYPE_EXPLORER_ENGINES_DIR``, else ``engines/`` in
    the user cache dir (``dx.cache.info()["path"]``).

    Returns:
        The directory (it may not exist yet).

    >>> root().name
    'engines'
    """
    return folders.engines_dir()


def get(spec: str) -> Engine | None:
    """The created engine for ``spec``, or ``None``; never installs anything.

    Args:
        spec: ``"keras==3.11.3"``, ``"3.11.3"``, ``"tf_keras"``, ``"tf_keras==2.21.0"``,
            ``"keras-nightly==3.16.0.dev2026102704"`` or ``"nightly"`` (the newest nightly
            created here: no index is asked).

    Returns:
        The engine (with its disk use), or ``None`` when it was not created.

    >>> get("keras==3.99.0") is None
    True
    """
    return _find(spec, disk=True)


def _find(spec: str, *, disk: bool = False) -> Engine | None:
    """:func:`get`, by default without measuring the disk use (every probe asks)."""
    package, version = engine_package(spec)
    where = root()
    if version is None:  # the newest created: tf_keras of the installed TF's series, a nightly
        found = sorted(
            (_release(p.name.removeprefix(f"{package}-")), p)
            for p in where.glob(_unpinned_glob(package))
            if (p / "engine.json").is_file()
        )
        return _read(found[-1][1], disk=disk) if found else None
    return _read(where / f"{package}-{version}", disk=disk)


def _unpinned_glob(package: str) -> str:
    """The engine folders an unpinned name may mean."""
    return f"tf_keras-{plans.tf_keras_series()}.*" if package == "tf_keras" else f"{package}-*"


def pin(spec: str | None) -> str | None:
    """An engine's name (:func:`engine_spec`) naming one build: ``"nightly"`` becomes the
    newest ``keras-nightly`` build the package index lists (asked once per process; offline,
    the newest created here, with a warning); any other name is returned as it is.

    Args:
        spec: an engine's name, or ``None`` (the installed Keras).

    Returns:
        The name, ``"keras-nightly==3.16.0.dev2026102704"`` for ``"nightly"``.

    Raises:
        EngineError: ``"nightly"`` offline, with no nightly engine created here.

    >>> pin("3.11.3")
    'keras==3.11.3'
    >>> pin("nightly")                                        # doctest: +SKIP
    'keras-nightly==3.16.0.dev2026102704'
    """
    name = engine_spec(spec)
    if not is_moving(name):
        return name
    built = (e.version for e in created() if e.package == nightly.NIGHTLY_PACKAGE)
    return nightly.newest(built)


def require(spec: str | None) -> Engine | None:
    """The created engine for ``spec`` (``None``: the installed Keras, no engine).

    Raises:
        EngineError: it was not created yet (saying how to create it).
    """
    name = engine_spec(spec)
    if name is None:
        return None
    found = _find(name)
    if found is None:
        raise EngineError(
            f"engine {name!r} is not created yet; dx.engines.create({name!r}) creates it "
            "(it needs the package index once), or pass it to dx.probe/dx.survey, which "
            "create it on first use"
        )
    return found


def ensure(spec: str | None, *, progress: Progress = True) -> Engine | None:
    """The engine for ``spec``, created first when missing (``None``: no engine)."""
    name = pin(spec)
    if name is None:
        return None
    return get(name) or create(name, progress=progress)


check_backend = check_engine_backend


@functools.cache
def _installed_keras() -> tuple[str | None, Path | None]:
    """The installed Keras's label and backends folder (found once, without importing it)."""
    found = keras_release.installed()
    if found is None:
        return None, None
    return f"keras {found[0]}", Path(found[1]) / "src" / "backend"


def missing_backend(spec: str | None, backend: str) -> str | None:
    """Why the Keras of the created engine ``spec``, or the installed Keras (``None``), has no
    ``backend``, in words: a Keras 3 release or build without ``keras/src/backend/<backend>``
    (openvino came with Keras 3.8; keras-nightly has dropped it). ``None`` where it has it,
    for Keras 2 (:func:`check_backend` says where it runs) and an engine not created.
    """
    name = engine_spec(spec)
    if name is None:
        label, backends = _installed_keras()
    elif name.startswith("tf_keras") or (engine := _find(name)) is None:
        return None
    else:
        label, backends = engine.label, Path(engine.site) / "keras" / "src" / "backend"
    if backends is None or not backends.is_dir() or (backends / backend).is_dir():
        return None  # Keras 2's layout has no src/backend: check_backend answers for it
    return (
        f"this Keras ({label}) has no {backend} backend: its release has no "
        f"keras/src/backend/{backend}"
    )


def create(
    spec: str,
    *,
    progress: Progress = True,
    cancel: threading.Event | None = None,
) -> Engine:
    """Create the engine for ``spec`` (or return it when it exists: creating twice reuses).

    Args:
        spec: ``"keras==3.X.Y"`` (a Keras 3 release; ``"3.X.Y"`` works too), ``"nightly"``
            (the newest ``keras-nightly`` build, pinned: :func:`pin`),
            ``"keras-nightly==3.X.Y.devYYYYMMDDHH"`` (one build), ``"tf_keras"`` (Keras 2:
            the release matching the installed TensorFlow) or ``"tf_keras==2.X.Y"``.
        progress: ``True`` shows a progress bar (``tqdm``, notebook-aware), ``False``
            nothing; a callable receives each line pip and the check print.
        cancel: set this event from another thread to stop the creation (pip is killed);
            ``KeyboardInterrupt`` does the same. Nothing is left behind either way.

    Returns:
        The engine.

    Raises:
        EngineError: offline, no such release (with the closest ones), or a release that
            needs another version of an installed package or does not import here (the
            versions named). Nothing is left behind.

    >>> import dtype_explorer as dx
    >>> engine = dx.engines.create("keras==3.11.3")            # doctest: +SKIP
    >>> engine.version, engine.disk_bytes // 2**20             # doctest: +SKIP
    ('3.11.3', 17)
    """
    engine = _create(pin(spec) or "", progress, cancel)
    if engine.kernel_name is not None:
        _register_quietly(engine)
    return engine


def _create(spec: str, progress: Progress, cancel: threading.Event | None) -> Engine:
    """:func:`create` without the kernel."""
    package, version = engine_package(spec)
    with engine_build.Steps(spec, progress) as steps:
        plan: list[tuple[str, str]] | None = None
        if version is None:  # tf_keras: the X.Y.* matching tensorflow X.Y
            found = get(spec)
            if found is not None:
                return found
            series = plans.tf_keras_series()
            steps.advance(f"resolving tf_keras=={series}.* for tensorflow {series}")
            wanted = [f"tf_keras>={series},<{plans.next_minor(series)}", *plans.KERAS2_EXTRAS]
            plan = _index.resolve(wanted, steps.line, cancel)
            version = next(v for n, v in plan if canon(n) == "tf-keras")
        name = f"{package}-{version}"
        where = root()
        final = where / name
        if (final / "engine.json").is_file():
            return _read(final) or _broken(final)
        (where / ".locks").mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(where / ".locks" / f"{name}.lock"))
        try:
            lock.acquire(timeout=0.05)
        except filelock.Timeout:
            steps.line(f"waiting for another process creating {package}=={version}")
            lock.acquire()
        try:
            if (final / "engine.json").is_file():  # made while we waited
                return _read(final) or _broken(final)
            for stale in where.glob(f".tmp-{name}-*"):  # its creator died holding this lock
                shutil.rmtree(stale, ignore_errors=True)
            engine_build.build(package, version, plan, final, steps, cancel)
        finally:
            lock.release()
        engine = _read(final) or _broken(final)
        steps.advance(f"ready: {engine.spec}, {engine.disk_bytes / 2**20:.1f} MiB")
        return engine


def verify_site(engine: Engine) -> int:
    """Check ``engine``'s signed record and its files (every worker of it does at its start).

    Args:
        engine: a created engine.

    Returns:
        The number of files checked.

    Raises:
        EngineError: a file was changed, added or removed (naming it), or the engine was
            created before its files were recorded (remove it and create it again).
    """
    count, problem = site_files.problem(Path(engine.path), engine.spec)
    if problem is not None:
        raise EngineError(problem)
    return count


def created() -> list[Engine]:
    """Every created engine, with its disk use (``dx.engines.list()`` is this function).

    Returns:
        The engines, by package and release.

    >>> import dtype_explorer as dx
    >>> [(e.spec, e.disk_bytes // 2**20) for e in dx.engines.created()]   # doctest: +SKIP
    [('keras==3.11.3', 17), ('tf_keras==2.21.0', 18)]
    """
    where = root()
    if not where.is_dir():
        return []
    found = (_read(p) for p in where.iterdir() if not p.name.startswith("."))
    return sorted(
        (e for e in found if e is not None), key=lambda e: (e.package, _release(e.version))
    )


def remove(spec: str) -> bool:
    """Remove a created engine (its workers are stopped first).

    Args:
        spec: the engine's name, as for :func:`create`.

    Returns:
        ``True`` when it existed.

    An engine whose ``engine.json`` is unreadable is removed too (its folder, whatever it
    holds).

    >>> remove("keras==3.99.0")
    False
    """
    found = get(spec)
    if found is None:
        return _remove_broken(spec)
    for stop in BEFORE_REMOVE:
        stop(found.spec)
    if found.kernel_name is not None:
        keras2_kernel.unregister(found.kernel_name)
    final = Path(found.path)
    (final.parent / ".locks").mkdir(exist_ok=True)
    with filelock.FileLock(str(final.parent / ".locks" / f"{found.name}.lock")):
        if not final.exists():
            return False
        doomed = final.parent / f".tmp-removing-{found.name}-{os.getpid()}"
        os.rename(final, doomed)  # a reader never sees half an engine
        shutil.rmtree(doomed, ignore_errors=True)
    return True


def _remove_broken(spec: str) -> bool:
    """Remove the folders of ``spec`` whose ``engine.json`` is unreadable; whether any was."""
    package, version = engine_package(spec)
    where = root()
    pattern = f"{package}-{version}" if version is not None else _unpinned_glob(package)
    broken = [p for p in where.glob(pattern) if p.is_dir() and _read(p, disk=False) is None]
    for path in broken:
        (where / ".locks").mkdir(exist_ok=True)
        with filelock.FileLock(str(where / ".locks" / f"{path.name}.lock")):
            doomed = where / f".tmp-removing-{path.name}-{os.getpid()}"
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
    return bool(broken)


def kernel(spec: str = "tf_keras", *, progress: Progress = True) -> tuple[Engine, str]:
    """Register the Jupyter kernel of the Keras 2 engine ``spec`` (created first when
    missing): a notebook on it runs ``tf.keras`` code as Keras 2, with ``dtype_explorer``
    importable and answering with that engine by default.

    Args:
        spec: ``"tf_keras"`` or ``"tf_keras==2.X.Y"``.
        progress: as for :func:`create`.

    Returns:
        The engine and the kernel's directory (its ``kernel.json``); the kernel is named
        ``engine.kernel_name``.

    Raises:
        EngineError: a Keras 3 engine (it has no kernel), or Jupyter's kernel registry could
            not be written (jupyter_client or ipykernel missing, a read-only data directory).

    >>> import dtype_explorer as dx
    >>> engine, where = dx.engines.kernel("tf_keras")            # doctest: +SKIP
    >>> engine.kernel_name                                      # doctest: +SKIP
    'dtype-explorer-tf_keras-2.21.0'
    """
    engine = _keras2_engine(spec, progress)
    try:
        return engine, keras2_kernel.register(engine)
    except (ImportError, OSError) as exc:
        raise EngineError(f"the kernel of {engine.spec} could not be registered: {exc}") from None


def enter_kernel(spec: str = "tf_keras", *, progress: Progress = True) -> Engine:
    """Make this process the Keras 2 kernel of ``spec`` (created first when missing), as its
    registered kernel does, before anything imports TensorFlow or Keras (Colab, which runs
    one kernel: ``dx.colab.setup(keras2=True)``). Raises ``EngineError`` where it cannot.

    >>> dx.engines.enter_kernel("tf_keras")        # doctest: +SKIP
    Engine(spec='tf_keras==2.21.0', ...)
    """
    engine = _keras2_engine(spec, progress)
    keras2_launcher.enter_engine(engine.path)
    return engine


def _keras2_engine(spec: str, progress: Progress) -> Engine:
    if engine_package(spec)[0] != "tf_keras":
        raise EngineError(
            f"only the Keras 2 engine has a kernel (a Keras 3 notebook already runs Keras 3); "
            f"received: {spec!r}"
        )
    return _create(spec, progress, None)


def _register_quietly(engine: Engine) -> None:
    """:func:`create`'s kernel: a registry that cannot be written leaves the engine usable by
    its workers (``kernel`` says why)."""
    try:
        keras2_kernel.register(engine)
    except (ImportError, OSError) as exc:
        warnings.warn(
            f"the Jupyter kernel of {engine.spec} was not registered ({exc}); the engine "
            "works in dx.probe(engine=...); dx.engines.kernel() retries and says why",
            stacklevel=3,
        )


def script_command(spec: str, script: str, args: Sequence[str] = ()) -> list[str]:
    """The command that runs ``script`` under the Keras 2 engine ``spec`` as its kernel does
    (site first, ``TF_USE_LEGACY_KERAS=1``, ``dtype_explorer`` answering with it).

    Raises:
        EngineError: ``spec`` is not created yet, or is a Keras 3 engine.
    """
    engine = require(spec)
    if engine is None or engine.package != "tf_keras":
        raise EngineError(f"a script runs under the Keras 2 engine only; received: {spec!r}")
    return [sys.executable, "-m", keras2_kernel.LAUNCHER, "script", engine.path, script, *args]


def keras2_display(engine: Engine) -> str:
    """The Keras 2 kernel's name in Jupyter's launcher."""
    return keras2_kernel.display_name(engine)


def current() -> str | None:
    """The engine this process runs under (the Keras 2 kernel's, or a script it runs); ``None``
    in an ordinary Python."""
    return os.environ.get(keras2_kernel.KERNEL_ENGINE) or None


def stamp(spec: str | None) -> str:
    """What the cache key adds for an engine: its pinned spec and what it installed
    (``""`` for the installed Keras). An engine not created yet stamps as missing."""
    if spec is None:
        return ""
    found = _find(pinned_engine(spec) or "")  # never "nightly": a key names one build
    if found is None:
        return f"{spec}:missing"
    return f"{found.spec}:{','.join(found.packages)}"


# ---------------------------------------------------------------- creation's parts


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _read(path: Path, *, disk: bool = True) -> Engine | None:
    """The engine in ``path`` (``None`` when there is none, or its ``engine.json`` is not
    ours: an engine directory from elsewhere is not trusted)."""
    try:
        info = json.loads((path / "engine.json").read_text(encoding="utf-8"))
        return Engine(
            spec=info["spec"],
            package=info["package"],
            version=info["version"],
            path=str(path),
            disk_bytes=site_files.disk_use(path) if disk else 0,
            packages=tuple(info.get("packages", ())),
            base=info.get("base", {}),
            python=info.get("python", ""),
            created=info.get("created", ""),
            install_seconds=info.get("install_seconds"),
            site_sha256=info.get("site_sha256"),
        )
    except (OSError, ValueError, KeyError, TypeError, pydantic.ValidationError):
        return None


def _broken(path: Path) -> Engine:
    raise EngineError(f"{path}/engine.json is unreadable; dx.engines.remove it and create again")


#: ``dx.engines.list()``, the name users call: defined last, so that above ``list`` is the builtin.
list = created
