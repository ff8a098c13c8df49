"""One long-lived worker process per Keras backend, so one kernel can ask all four at once.

Keras fixes its backend at import, so each backend gets its own ``pebble.ProcessPool`` with a
single spawned worker (:mod:`dtype_explorer.worker`), started on first use and reused. The
kernel's own Keras is never touched. pebble enforces the per-probe timeout (the worker is
killed and restarted) and notices a worker that dies mid-probe (reported as ``crashed``, and
restarted for the next probe). Answers go through the persistent :mod:`~dtype_explorer.cache`.

>>> from dtype_explorer.model import ProbeSpec
>>> futures = [submit(ProbeSpec(target="Conv1D", input_dtypes=("uint8",), backend=b,
...                             kwargs={"filters": 2, "kernel_size": 3}))
...            for b in installed_backends()]                            # doctest: +SKIP
>>> [f.result().status for f in futures]                                 # doctest: +SKIP
['ok', 'error', 'error', 'error']
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import functools
import importlib.util
import multiprocessing
import os
import pickle
import signal
import sqlite3
import sys
import threading
import warnings
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import cloudpickle
import pebble

from dtype_explorer import cache, worker
from dtype_explorer.errors import InvalidSpecError, unknown
from dtype_explorer.model import BACKENDS, ErrorInfo, ProbeResult, ProbeSpec
from dtype_explorer.versions import versions

ENV_BACKENDS = "DTYPE_EXPLORER_BACKENDS"
DEFAULT_TIMEOUT = 60.0
#: Seconds a worker may take to import its backend (TensorFlow on a busy 2-core machine: ~30).
DEFAULT_START_TIMEOUT = 300.0

_lock = threading.RLock()
_pools: dict[str, pebble.ProcessPool] = {}
_pending: dict[pebble.ProcessPool, set[Future]] = {}  # pebble leaves these pending on stop
_shut_down: weakref.WeakSet[Future] = weakref.WeakSet()  # tasks of pools stopped on purpose
_devices: dict[str, str] = {}
_logs: dict[str, Path] = {}
_log_starts: dict[str, int] = {}  # each log's size when its pool started: older text is stale
_config: dict[str, Any] = {
    "backends": None,
    "timeout": DEFAULT_TIMEOUT,
    "start_timeout": DEFAULT_START_TIMEOUT,
}


class WorkerShutdown(Exception):
    """A probe's worker was stopped on purpose (``shutdown``/``configure``) before it answered."""


class WorkerStartError(RuntimeError):
    """A worker died or hung while importing its backend (see its log, ``log_path``)."""


def configure(
    *,
    backends: Iterable[str] | None = None,
    timeout: float | None = None,
    start_timeout: float | None = None,
) -> None:
    """Cap the backends that may start a worker (small machines) and set the time limits.

    ``backends`` overrides ``$DTYPE_EXPLORER_BACKENDS`` (e.g. ``jax,numpy``); running workers
    of backends left out are stopped. ``timeout`` is in seconds, per probe; ``start_timeout``
    bounds a worker's start (importing its backend), for workers started from now on.
    """
    with _lock:
        if backends is not None:
            chosen = _validated(backends)
            _config["backends"] = chosen
            for name in [b for b in _pools if b not in chosen]:
                _stop(_pools.pop(name))
        for name, seconds in (("timeout", timeout), ("start_timeout", start_timeout)):
            if seconds is not None:
                if seconds <= 0:
                    raise InvalidSpecError(
                        f"{name} must be a positive number of seconds, not {seconds!r}"
                    )
                _config[name] = float(seconds)


def allowed_backends() -> list[str]:
    """The backends a worker may start for: ``configure(backends=...)``, else the env var."""
    if _config["backends"] is not None:
        return list(_config["backends"])
    env = os.environ.get(ENV_BACKENDS, "").strip()
    if env:
        return _validated(b.strip() for b in env.split(",") if b.strip())
    return list(BACKENDS)


def installed_backends() -> list[str]:
    """Allowed backends whose package is installed (found without importing it)."""
    return [b for b in allowed_backends() if _installed(b)]


@functools.cache
def _installed(backend: str) -> bool:
    return backend == "numpy" or importlib.util.find_spec(backend) is not None


def target_payload(target: Any) -> bytes:
    """Pickle a custom layer for the workers: a class or factory by value (cloudpickle, so
    notebook definitions travel), a ``Layer`` instance as its class and ``get_config()``.

    Never raises: what cannot be pickled travels as its error, and every backend's result
    reports it (``ErrorInfo(where="transfer")``).
    """
    keras = sys.modules.get("keras")
    try:
        if keras is not None and isinstance(target, keras.layers.Layer):
            return cloudpickle.dumps(("config", (type(target), target.get_config())))
        return cloudpickle.dumps(("object", target))
    except Exception as exc:
        return pickle.dumps(("unpicklable", f"{type(exc).__name__}: {exc}"))


def submit(
    spec: ProbeSpec,
    *,
    target_payload: bytes | None = None,
    timeout: float | None = None,
    use_cache: bool = True,
) -> Future[ProbeResult]:
    """Run ``spec`` on the worker for ``spec.backend``; the future never raises for a probe.

    A cached answer comes back as an already-completed future (``cached=True``); a live one is
    stored. ``use_cache=False`` leaves the cache out (neither read nor written). A custom layer
    travels as ``target_payload`` (from :func:`target_payload`, made once for several
    backends); its results are never cached. ``timeout`` defaults to the configured one.
    """
    backend = spec.backend
    if backend not in installed_backends():
        raise unknown("backend (installed and allowed)", backend, installed_backends())
    cacheable = use_cache and target_payload is None and not spec.target.startswith("custom:")
    if cacheable:
        with _cache_optional():
            hit = cache.get(spec)
            if hit is not None:
                return _completed(hit)
    seconds = _config["timeout"] if timeout is None else float(timeout)
    task = _schedule(backend, worker.run, (spec.to_dict(), target_payload), seconds)
    out: Future[ProbeResult] = Future()
    out.add_done_callback(lambda f: f.cancelled() and task.cancel())
    task.add_done_callback(lambda f: _finish(f, out, spec, seconds, cacheable=cacheable))
    return out


def run_many(
    specs: Iterable[ProbeSpec], *, target: Any = None, **options: Any
) -> Iterator[ProbeResult]:
    """Submit every spec at once and yield each result as it arrives (options as ``submit``);
    a custom ``target`` is pickled once for all of them."""
    if target is not None:
        options["target_payload"] = target_payload(target)
    futures = [submit(spec, **options) for spec in specs]
    for future in concurrent.futures.as_completed(futures):
        yield future.result()


def call(backend: str, function: Any, *args: Any, timeout: float | None = None) -> Future:
    """Run a module-level ``function(*args)`` in ``backend``'s worker, where that backend's
    library is already imported (reference promotion tables use it); a raw future."""
    if backend not in installed_backends():
        raise unknown("backend (installed and allowed)", backend, installed_backends())
    seconds = _config["timeout"] if timeout is None else float(timeout)
    return _schedule(backend, function, args, seconds)


def warm(backends: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """Start the workers for ``backends`` (default: all installed) in parallel and wait until
    each has imported its backend; returns what each worker says about itself. A worker that
    cannot start (or not within the start timeout) raises :class:`WorkerStartError`."""
    names = installed_backends() if backends is None else _validated(backends)
    futures = {b: _schedule(b, worker.describe) for b in names}
    described = {}
    for backend, future in futures.items():
        try:
            described[backend] = future.result()
        except BrokenProcessPool as exc:
            raise WorkerStartError(_start_failure(backend, exc)[2]) from None
    _devices.update({b: d["device"] for b, d in described.items()})
    return described


def log_path(backend: str) -> Path:
    """Where ``backend``'s worker writes its output (backend messages, crash tracebacks):
    ``workers/<backend>.log`` in the cache directory it was started with."""
    return _logs.get(backend) or _new_log_path(backend)


def _new_log_path(backend: str) -> Path:
    return cache.path() / "workers" / f"{backend}.log"


def shutdown() -> None:
    """Stop every worker now (also run at interpreter exit); later probes start new ones."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        _stop(pool)


def _pool(backend: str) -> pebble.ProcessPool:
    """The running pool for ``backend``; a new one if it never started or broke."""
    with _lock:
        pool = _pools.get(backend)
        if pool is not None and not pool.active:
            _stop(pool)
            pool = None
        if pool is None:
            _logs[backend] = _new_log_path(backend)
            _log_starts[backend] = _size(_logs[backend])
            pool = pebble.ProcessPool(
                max_workers=1,
                initializer=worker.init,
                initargs=(backend, os.getpid(), str(log_path(backend)), _config["start_timeout"]),
                context=multiprocessing.get_context("spawn"),
            )
            _pools[backend] = pool
        return pool


def _schedule(
    backend: str, function: Any, args: tuple = (), timeout: float | None = None
) -> Future:
    """Schedule on ``backend``'s pool, replacing it once if it broke just now."""
    with _lock:
        try:
            pool = _pool(backend)
            task = pool.schedule(function, args=args, timeout=timeout)
        except RuntimeError:  # the pool broke between the check and the call
            pool = _pool(backend)
            task = pool.schedule(function, args=args, timeout=timeout)
        pending = _pending.setdefault(pool, set())
        pending.add(task)
    task.add_done_callback(pending.discard)
    return task


def _stop(pool: pebble.ProcessPool) -> None:
    """Stop ``pool``'s worker and resolve the tasks it leaves unanswered.

    Tasks in flight are marked first: pebble may report the worker it kills as expired, and
    that is a shutdown, not a crash."""
    pending = list(_pending.pop(pool, ()))
    _shut_down.update(pending)
    pool.stop()
    pool.join()
    for task in pending:
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            task.set_exception(WorkerShutdown("the worker was shut down before answering"))


def _finish(task: Future, out: Future, spec: ProbeSpec, seconds: float, *, cacheable: bool) -> None:
    """Turn the worker's answer (or its failure) into a ``ProbeResult`` and store it."""
    if out.done():  # cancelled by the caller
        return
    try:
        result = ProbeResult.from_dict(task.result())
        _devices[spec.backend] = result.device
    except concurrent.futures.CancelledError:
        if task not in _shut_down:
            return
        result = _lost_worker(spec, WorkerShutdown(), on_purpose=True)
    except concurrent.futures.TimeoutError:
        message = (
            f"no answer within {seconds:g} s; the {spec.backend} worker was stopped and "
            "will be restarted for the next probe (set timeout= to allow longer)"
        )
        result = _failure(spec, "timeout", "TimeoutError", message)
    except (pebble.ProcessExpired, BrokenProcessPool, WorkerShutdown) as exc:
        result = _lost_worker(spec, exc, on_purpose=task in _shut_down)
    except Exception as exc:  # a bug in the worker's code, reported rather than raised
        result = _failure(spec, "error", type(exc).__name__, str(exc))
    if cacheable and _storable(result):  # before answering: a repeat right after is a hit
        with _cache_optional():
            cache.put(result)
    with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled meanwhile
        out.set_result(result)


@contextlib.contextmanager
def _cache_optional() -> Iterator[None]:
    """The cache only saves time: an unusable one (read-only, locked) warns, never fails."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        warnings.warn(
            f"dtype-explorer's result cache is unusable ({exc}); running live. "
            f"Set ${cache.ENV_DIR} to a writable directory.",
            stacklevel=4,
        )


def _storable(result: ProbeResult) -> bool:
    """A live answer from Keras (not a worker or transfer problem) may be cached."""
    return result.status in ("ok", "error", "invalid") and (
        result.error is None or result.error.where not in ("worker", "transfer")
    )


def _lost_worker(spec: ProbeSpec, exc: BaseException, *, on_purpose: bool) -> ProbeResult:
    """The answer for a probe whose worker went away: stopped on purpose (``shutdown``,
    ``configure``; pebble may then report the killed worker as expired or the pool as broken),
    stopped at its start deadline, or died on its own."""
    if on_purpose or isinstance(exc, WorkerShutdown):
        message = "the worker was shut down before answering (dx.shutdown or configure)"
        return _failure(spec, "error", "WorkerShutdown", message)
    if isinstance(exc, pebble.ProcessExpired):
        return _failure(spec, "crashed", "WorkerCrashed", _crash_message(spec, exc.exitcode))
    status, kind, message = _start_failure(spec.backend, exc)
    return _failure(spec, status, kind, message)


def _start_failure(backend: str, exc: BaseException) -> tuple[str, str, str]:
    """``(status, error type, message)`` for a worker that died before taking a task: pebble
    then reports the pool as broken."""
    log = log_path(backend)
    if _start_timed_out(log, backend):
        return (
            "timeout",
            "WorkerStartTimeout",
            f"the {backend} worker did not finish starting (importing Keras on {backend}) "
            f"within {_config['start_timeout']:g} s and was stopped; the next probe starts a "
            f"new one (pool.configure(start_timeout=...) allows longer). Where it hung: {log}",
        )
    return (
        "crashed",
        "WorkerCrashed",
        f"the {backend} worker died before taking this probe ({exc}); it is restarted for the "
        f"next probe. Its output is in {log}",
    )


def _start_timed_out(log: Path, backend: str) -> bool:
    """Whether the last worker this pool started (the log's last header since the pool began)
    ended at the start deadline; a worker that died before writing a header did not."""
    size, start = _size(log), _log_starts.get(backend, 0)
    if size < start:  # the worker started the log afresh (it had grown too long)
        start = 0
    try:
        with log.open("rb") as file:
            file.seek(max(start, size - 64_000))
            tail = file.read().decode(errors="replace")
    except OSError:
        return False
    last_start = tail.rfind(f"--- {backend} worker ")
    return last_start >= 0 and worker.START_TIMEOUT_MARK in tail[last_start:]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _crash_message(spec: ProbeSpec, exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        how = f"was killed by {signal.Signals(-exitcode).name}"
    else:
        how = f"exited with code {exitcode}"
    return (
        f"the {spec.backend} worker {how} while running this probe (a segfault, os._exit "
        "or running out of memory); it is restarted for the next probe. Its output is in "
        f"{log_path(spec.backend)}"
    )


def _failure(spec: ProbeSpec, status: str, kind: str, message: str) -> ProbeResult:
    return ProbeResult(
        spec=spec,
        status=status,  # type: ignore[arg-type]
        backend=spec.backend,
        device=_devices.get(spec.backend, "unknown"),
        verdict="error",
        error=ErrorInfo(type=kind, message=message, where="worker"),
        versions=versions(spec.backend),
    )


def _completed(result: ProbeResult) -> Future[ProbeResult]:
    future: Future[ProbeResult] = Future()
    future.set_result(result)
    return future


def _validated(backends: Iterable[str]) -> list[str]:
    names = [backends] if isinstance(backends, str) else list(backends)
    if names == ["all"]:
        return list(BACKENDS)
    for name in names:
        if name not in BACKENDS:
            raise unknown("backend", name, BACKENDS)
    if not names:
        raise InvalidSpecError(f"at least one backend is needed; valid: {', '.join(BACKENDS)}")
    return list(dict.fromkeys(names))


atexit.register(shutdown)
