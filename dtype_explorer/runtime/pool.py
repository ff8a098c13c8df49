"""One long-lived worker process per Keras backend, so one kernel can ask all four at once.

Keras fixes its backend at import, so each backend gets its own ``pebble.ProcessPool`` with a
single spawned worker (:mod:`dtype_explorer.runtime._worker`), started on first use and reused. The
kernel's own Keras is never touched. pebble enforces the per-probe timeout (the worker is
killed and restarted) and notices a worker that dies mid-probe (reported as ``crashed``, and
restarted for the next probe). Answers go through the persistent
:mod:`~dtype_explorer.runtime.cache`.

>>> from dtype_explorer.records import ProbeSpec
>>> futures = [submit(ProbeSpec(target="Conv1D", input_dtypes=("uint8",), backend=b,
...                             kwargs={"filters": 2, "kernel_size": 3}))
...            for b in installed_backends()]                            # doctest: +SKIP
>>> [f.result().status for f in futures]                                 # doctest: +SKIP
['ok', 'error', 'error', 'error']
"""

from __future__ import annotations

import atexit
import builtins
import concurrent.futures
import contextlib
import dataclasses
import functools
import importlib.util
import math
import multiprocessing
import multiprocessing.context
import multiprocessing.spawn
import os
import pickle
import signal
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

from dtype_explorer import backends as backend_names
from dtype_explorer.errors import InvalidSpecError, unknown
from dtype_explorer.records import Engine, ErrorInfo, ProbeResult, ProbeSpec, engine_spec
from dtype_explorer.runtime import _worker as worker
from dtype_explorer.runtime import _worker_log as worker_log
from dtype_explorer.runtime import cache, engines
from dtype_explorer.versions import settings, versions

ENV_BACKENDS = "DTYPE_EXPLORER_BACKENDS"
DEFAULT_TIMEOUT = 60.0
#: Seconds a worker may take to import its backend (TensorFlow on a busy 2-core machine: ~30).
DEFAULT_START_TIMEOUT = 300.0
#: The longest finite time limit (faulthandler's timer cannot count past ~30 years).
MAX_SECONDS = 1e8

_lock = threading.RLock()
_pools: dict[str, pebble.ProcessPool] = {}  # by slot: "<backend>" or "<backend>@<engine>"
_pending: dict[pebble.ProcessPool, set[Future]] = {}  # pebble leaves these pending on stop
_shut_down: weakref.WeakSet[Future] = weakref.WeakSet()  # tasks of pools stopped on purpose
_devices: dict[str, str] = {}
_starts: dict[str, _Start] = {}  # per slot, how its current pool starts workers
_config: dict[str, Any] = {
    "backends": None,
    "timeout": DEFAULT_TIMEOUT,
    "start_timeout": DEFAULT_START_TIMEOUT,
}


@dataclasses.dataclass(frozen=True)
class _Start:
    """How a pool starts its workers: their log (and its size then: older text is another
    pool's), the start deadline they were given (``None``: none) and the settings their Keras
    reads at start (``versions.settings()``: keras.json, ``KERAS_*``, ``JAX_*``)."""

    log: Path
    log_offset: int
    deadline: float | None
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The engine its workers run (``None``: the installed Keras).
    engine: Engine | None = None


class WorkerShutdown(Exception):
    """A probe's worker was stopped on purpose (``shutdown``/``configure``) before it answered."""


SHUT_DOWN = "the worker was shut down before answering (dx.shutdown or configure)"


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
    of backends left out are stopped. ``timeout`` is in seconds, per probe. ``start_timeout``
    bounds a worker's start (importing its backend) and applies to backends whose workers
    start after this call (``shutdown()`` first to apply it to all). ``math.inf``: no limit.
    Nothing changes when an argument is invalid.
    """
    chosen = None if backends is None else _validated(backends)
    limits = {
        name: _seconds(name, value)
        for name, value in (("timeout", timeout), ("start_timeout", start_timeout))
        if value is not None
    }
    with _lock:
        if chosen is not None:
            _config["backends"] = chosen
            for name in [s for s in _pools if _backend_of(s) not in chosen]:
                _stop(_pools.pop(name), on_purpose=True)
        _config.update(limits)


def time_limit(value: Any, name: str = "timeout") -> float | None:
    """Check a time limit where it enters (``probe``, ``survey``, ``submit``, ...): ``None``
    (the configured default), positive seconds up to :data:`MAX_SECONDS`, or ``math.inf`` for
    none. Zero, negative, NaN, ``-inf``, booleans and non-numbers raise ``InvalidSpecError``.

    Args:
        value: the limit given by the user.
        name: the parameter's name, for the message.

    Returns:
        The limit in seconds as a float, or ``None``.

    >>> time_limit(2), time_limit(None), time_limit(math.inf)
    (2.0, None, inf)
    >>> time_limit(float("nan"))  # doctest: +ELLIPSIS, +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InvalidSpecError: timeout must be a number of seconds in (0, 1e+08], ... Received: nan
    """
    return None if value is None else _seconds(name, value)


def _seconds(name: str, value: Any) -> float:
    """A time limit: positive seconds, or ``math.inf`` for none."""
    problem = (
        f"{name} must be a number of seconds in (0, {MAX_SECONDS:g}], or math.inf for no limit. "
        f"Received: {_short(value)}"
    )
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        raise InvalidSpecError(problem)
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidSpecError(problem) from None
    if not (0 < seconds <= MAX_SECONDS or seconds == math.inf):  # NaN fails both
        raise InvalidSpecError(problem)
    return seconds


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def allowed_backends() -> list[str]:
    """The backends a worker may start for: ``configure(backends=...)``, else the env var."""
    if _config["backends"] is not None:
        return list(_config["backends"])
    env = os.environ.get(ENV_BACKENDS, "").strip()
    if env:
        return _validated(b.strip() for b in env.split(",") if b.strip())
    return list(backend_names.BACKENDS)


def installed_backends() -> list[str]:
    """Allowed backends whose package is installed (found without importing it)."""
    return [b for b in allowed_backends() if _installed(b)]


def usable(backends: str | Iterable[str] | None = None) -> list[str]:
    """``backends`` checked to be installed and allowed (``None`` or ``"all"``: every such
    backend), so that work fails before it starts rather than half-way.

    Raises ``InvalidSpecError`` naming an unknown, uninstalled or disallowed backend.
    """
    available = installed_backends()
    if backends is None or backends == backend_names.ALL:
        return available
    names = backend_names.names(backends)
    for name in names:
        if name not in available:
            raise unknown("backend (installed and allowed)", name, available)
    return names


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
    (backend,) = usable(spec.backend)
    engines.check_backend(spec.engine, backend)
    engines.require(spec.engine)  # created first (dx.probe does it): a clear error if not
    limit = time_limit(timeout)
    cacheable = use_cache and target_payload is None and not spec.target.startswith("custom:")
    if cacheable:
        with _cache_optional():
            hit = cache.get(spec)
            if hit is not None:
                return _completed(hit)
    seconds = _config["timeout"] if limit is None else limit
    task = _schedule(slot(spec), worker.run, (spec.to_dict(), target_payload), seconds)
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


def call(
    backend: str,
    function: Any,
    *args: Any,
    timeout: float | None = None,
    engine: str | None = None,
) -> Future:
    """Run a module-level ``function(*args)`` in ``backend``'s worker, where that backend's
    library is already imported (reference promotion tables use it); a raw future.
    ``engine`` (a created engine's name) runs it in that engine's worker instead."""
    usable(backend)
    engines.check_backend(engine, backend)
    engines.require(engine)
    limit = time_limit(timeout)
    seconds = _config["timeout"] if limit is None else limit
    return _schedule(_slot(backend, engine_spec(engine)), function, args, seconds)


def warm(
    backends: Iterable[str] | None = None, *, engine: str | None = None
) -> dict[str, dict[str, Any]]:
    """Start the workers for ``backends`` (default: all installed) in parallel and wait until
    each has imported its backend; returns what each worker says about itself. A worker that
    cannot start (or not within the start timeout) raises :class:`WorkerStartError`.
    ``engine`` (a created engine's name) warms that engine's workers instead."""
    names = installed_backends() if backends is None else _validated(backends)
    for name in names:
        engines.check_backend(engine, name)
    engines.require(engine)
    slots = {b: _slot(b, engine_spec(engine)) for b in names}
    futures = {b: _schedule(slots[b], worker.describe) for b in names}
    described = {}
    for backend, future in futures.items():
        try:
            described[backend] = future.result()
        except (pebble.ProcessExpired, BrokenProcessPool) as exc:
            if future in _shut_down:
                raise WorkerShutdown(SHUT_DOWN) from None
            raise WorkerStartError(_lost_before_answering(slots[backend], exc)[2]) from None
    _devices.update({slots[b]: d["device"] for b, d in described.items()})
    return described


def slot(spec: ProbeSpec) -> str:
    """The workers that answer ``spec``: its backend's (``"jax"``), or its engine's on that
    backend (``"jax@keras==3.11.3"``), each a pool of its own."""
    return _slot(spec.backend, spec.engine)


def _slot(backend: str, engine: str | None) -> str:
    return backend if engine is None else f"{backend}@{engine}"


def _backend_of(slot: str) -> str:
    return slot.partition("@")[0]


def _stop_engine(spec: str) -> None:
    """Stop the workers of the engine ``spec`` (pinned), before it is removed."""
    with _lock:
        doomed = [
            name
            for name, start in _starts.items()
            if start.engine is not None and start.engine.spec == spec and name in _pools
        ]
        pools = [_pools.pop(name) for name in doomed]
    for pool in pools:
        _stop(pool, on_purpose=True)


engines._before_remove.append(_stop_engine)


def stop_engine(spec: str) -> None:
    """Stop the workers of the engine ``spec`` now, to free their memory (``dx.bisect`` does,
    after each release it asks); its next probe starts them again.

    >>> stop_engine("keras==3.11.3")   # no workers: nothing to do
    """
    found = engines.get(spec) if engine_spec(spec) is not None else None
    if found is not None:
        _stop_engine(found.spec)


def log_path(backend: str) -> Path:
    """Where ``backend``'s worker writes its output (backend messages, crash tracebacks):
    ``workers/<backend>.log`` in the cache directory it was started with (an engine's
    workers, slot ``"jax@keras==3.11.3"``: ``workers/jax@keras-3.11.3.log``)."""
    start = _starts.get(backend)
    return start.log if start else _new_log_path(backend)


def _new_log_path(slot: str) -> Path:
    return cache.path() / "workers" / f"{slot.replace('==', '-')}.log"


def shutdown() -> None:
    """Stop every worker now (also run at interpreter exit); later probes start new ones."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        _stop(pool, on_purpose=True)


def _pool(slot: str) -> pebble.ProcessPool:
    """The running pool for ``slot`` (a backend, or ``backend@engine``); a new one if it never
    started or broke, or if the settings a worker reads at start changed since it started
    (``KERAS_HOME`` pointed at another keras.json, ``JAX_ENABLE_X64`` set): the cache key says
    the new settings, so the worker must run under them. An engine's workers get its
    directory, put first on ``sys.path`` before their backend imports (``_worker.init``)."""
    now = settings()
    with _lock:
        pool = _pools.get(slot)
        if pool is not None and not pool.active:
            _stop(pool, on_purpose=False)
            pool = None
        if pool is not None and _starts[slot].settings != now:
            _stop(_pools.pop(slot), on_purpose=True)
            pool = None
        if pool is None:
            backend, _, name = slot.partition("@")
            engine = engines.require(name or None)
            log = _new_log_path(slot)
            deadline = _config["start_timeout"]
            worker_log.keep(log)
            start = _Start(
                log, worker_log.size(log), None if deadline == math.inf else deadline, now, engine
            )
            _starts[slot] = start
            pool = pebble.ProcessPool(
                max_workers=1,
                initializer=worker.init,
                initargs=(
                    backend,
                    os.getpid(),
                    str(log),
                    start.deadline,
                    None if engine is None else engine.to_dict(),
                ),
                context=_WORKER_CONTEXT,
            )
            _pools[slot] = pool
        return pool


#: The name every worker process's name starts with (see :class:`_WorkerContext`).
WORKER_PROCESS_NAME = "dtype-explorer-worker"


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A spawned worker process, named so that its start leaves the user's ``__main__`` out."""

    def __init__(self, *args: Any, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, name=f"{WORKER_PROCESS_NAME}/{name}", **kwargs)


class _WorkerContext(multiprocessing.context.SpawnContext):
    """multiprocessing's spawn, except that a worker does not run the user's main module.

    Spawn sends a new process the parent's main module (``init_main_from_path`` for
    ``python try.py``, ``init_main_from_name`` for ``python -m pkg.mod``) and the child
    re-imports it before anything else, so that functions defined there unpickle. A worker
    needs nothing from it: it runs functions of this package, and a custom layer travels by
    value (cloudpickle). Re-importing it would run the user's script again in each worker;
    without an ``if __name__ == "__main__":`` guard that script starts probes while the
    worker is starting, and every worker dies. So the preparation data of processes started
    through this context (recognised by their name) loses those two keys; every other
    process (the user's own pools) is prepared as multiprocessing always does.
    """

    Process = _WorkerProcess

    def __init__(self) -> None:
        super().__init__()
        _leave_main_out_of_workers()


def _leave_main_out_of_workers() -> None:
    """Wrap ``multiprocessing.spawn.get_preparation_data`` (called by every spawn start, with
    the new process's name) once, so that workers' preparation data has no main module."""
    original = multiprocessing.spawn.get_preparation_data
    if getattr(original, "_dtype_explorer", False):
        return

    @functools.wraps(original)
    def get_preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        if str(name).startswith(WORKER_PROCESS_NAME):
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data

    get_preparation_data._dtype_explorer = True  # type: ignore[attr-defined]
    multiprocessing.spawn.get_preparation_data = get_preparation_data


_WORKER_CONTEXT = _WorkerContext()


def _schedule(
    backend: str, function: Any, args: tuple = (), timeout: float | None = None
) -> Future:
    """Schedule on ``backend``'s pool, replacing it once if it broke just now."""
    if timeout == math.inf:
        timeout = None
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


def _stop(pool: pebble.ProcessPool, *, on_purpose: bool) -> None:
    """Stop ``pool``'s worker and resolve the tasks it leaves unanswered: as a shutdown when
    stopped on purpose (marked first: pebble may report the worker it kills as expired), as
    the pool's breakage when it is replaced because it broke."""
    pending = list(_pending.pop(pool, ()))
    if on_purpose:
        _shut_down.update(pending)
    pool.stop()
    pool.join()
    for task in pending:
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            task.set_exception(
                WorkerShutdown(SHUT_DOWN) if on_purpose else BrokenProcessPool("the pool broke")
            )


def _finish(task: Future, out: Future, spec: ProbeSpec, seconds: float, *, cacheable: bool) -> None:
    """Turn the worker's answer (or its failure) into a ``ProbeResult`` and store it."""
    if out.done():  # cancelled by the caller
        return
    try:
        answer = dict(task.result())
        if answer.pop(worker.REPLACE_ME, False):
            _retire(slot(spec))
        result = ProbeResult.from_dict(answer)
        _devices[slot(spec)] = result.device
    except concurrent.futures.CancelledError:
        if task not in _shut_down:
            return
        result = _lost_worker(spec, WorkerShutdown(SHUT_DOWN), on_purpose=True)
    except concurrent.futures.TimeoutError:
        message = (
            f"no answer within {seconds:g} s; the {spec.backend} worker was stopped and "
            "will be restarted for the next probe (set timeout= to allow longer)"
        )
        result = _failure(spec, "timeout", "TimeoutError", message)
    except (pebble.ProcessExpired, BrokenProcessPool, WorkerShutdown) as exc:
        result = _lost_worker(spec, exc, on_purpose=task in _shut_down)
    except BaseException as exc:  # a bug in the worker's code, or a
        # BaseException that got out of it: reported, never raised into pebble's thread
        result = _failure(spec, "error", type(exc).__name__, str(exc)[:2000])
    if cacheable and storable(result):  # before answering: a repeat right after is a hit
        with _cache_optional():
            cache.put(result)
    with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled meanwhile
        out.set_result(result)


@contextlib.contextmanager
def _cache_optional() -> Iterator[None]:
    """The cache only saves time: an unusable one (read-only, locked, truncated, damaged)
    warns, never fails."""
    try:
        yield
    except Exception as exc:  # OSError, sqlite3.Error, a damaged database
        warnings.warn(
            f"dtype-explorer's result cache is unusable ({exc}); running live. "
            f"Set ${cache.ENV_DIR} to a writable directory.",
            stacklevel=4,
        )


#: Exceptions that say the process ran short (memory, stack, files, a signal), not what
#: Keras answers: Python's own, and the frameworks' out-of-memory errors.
TRANSIENT_ERRORS = frozenset(
    {
        "MemoryError",
        "RecursionError",
        "SystemExit",
        "KeyboardInterrupt",
        "GeneratorExit",
        *(
            name
            for name, value in vars(builtins).items()
            if isinstance(value, type) and issubclass(value, OSError)
        ),
        "ResourceExhaustedError",  # tensorflow
        "OutOfMemoryError",  # torch
        "XlaRuntimeError",  # jax: RESOURCE_EXHAUSTED, INTERNAL, ... from the runtime
        "JaxRuntimeError",
    }
)
_TRANSIENT_TEXT = ("RESOURCE_EXHAUSTED", "out of memory", "Out of memory", "Cannot allocate memory")


def storable(result: ProbeResult) -> bool:
    """Whether ``result`` is an answer Keras itself gave (``ok``, a Keras error, ``invalid``),
    which the cache may keep: not a timeout, crash or shutdown, not a worker or transfer
    problem, not a resource failure of the process (:data:`TRANSIENT_ERRORS`, or a message
    saying it ran out of memory), and not computed while a user's layer had changed the
    worker's global settings.

    Args:
        result: a live result.

    Returns:
        ``True`` when the cache may store it.

    >>> from dtype_explorer.records import ErrorInfo, ProbeResult, ProbeSpec
    >>> spec = ProbeSpec(target="Dense")
    >>> storable(ProbeResult(spec=spec, status="error", backend="numpy",
    ...                      error=ErrorInfo(type="MemoryError", message="")))
    False
    """
    if result.status not in ("ok", "error", "invalid") or result.state_changed:
        return False
    error = result.error
    if error is None:
        return True
    if error.where in ("worker", "transfer") or error.type in TRANSIENT_ERRORS:
        return False
    return not any(text in error.message for text in _TRANSIENT_TEXT)


def _retire(backend: str) -> None:
    """Replace ``backend``'s worker after a probe changed settings it could not put back: new
    probes go to a new pool; the old one ends once its queued probes (refused by the worker
    meanwhile, see ``_worker.run``) are answered."""
    with _lock:
        pool = _pools.pop(backend, None)
    if pool is not None:
        pool.close()
        threading.Thread(target=pool.join, name="dx-retire", daemon=True).start()


def _lost_worker(spec: ProbeSpec, exc: BaseException, *, on_purpose: bool) -> ProbeResult:
    """The answer for a probe whose worker went away: stopped on purpose (``shutdown``,
    ``configure``; pebble may then report the killed worker as expired or the pool as broken),
    stopped at its start deadline, or died on its own."""
    if on_purpose or isinstance(exc, WorkerShutdown):
        return _failure(spec, "error", "WorkerShutdown", SHUT_DOWN)
    if isinstance(exc, pebble.ProcessExpired):
        return _failure(spec, "crashed", "WorkerCrashed", _crash_message(spec, exc.exitcode))
    status, kind, message = _lost_before_answering(slot(spec), exc)
    return _failure(spec, status, kind, message)


def _lost_before_answering(backend: str, exc: BaseException) -> tuple[str, str, str]:
    """``(status, error type, message)`` for a worker that pebble reports only as gone (the
    pool broke): its log tells whether it was starting, hit its start deadline, or had
    started and died (before pebble saw it take the task)."""
    start = _starts[backend]  # set when its pool was made, which every task went through
    ending = worker_log.last_start(start.log, _backend_of(backend), since=start.log_offset)
    if ending == "timed-out":
        return (
            "timeout",
            "WorkerStartTimeout",
            f"the {backend} worker did not finish starting (importing Keras on {backend}) "
            f"within {start.deadline:g} s and was stopped; the next probe starts a new one "
            f"(pool.configure(start_timeout=...) allows longer). Where it hung: {start.log}",
        )
    kept = _kept_log(backend)
    if ending == "died-starting":
        return (
            "crashed",
            "WorkerCrashed",
            f"the {backend} worker died while starting (importing Keras on {backend}; {exc}); "
            f"the next probe starts a new one. Its output is in {kept}",
        )
    return (
        "crashed",
        "WorkerCrashed",
        f"the {backend} worker died before answering (a segfault, os._exit or running out of "
        f"memory; {exc}); it is restarted for the next probe. Its output is in {kept}",
    )


def _kept_log(backend: str) -> Path:
    """The file that keeps a dead worker's output (its traceback): its log, moved aside now
    when the next worker would start it afresh (``_worker_log.keep``). Called before pebble
    starts the replacement (it runs the task's callbacks first)."""
    start = _starts.get(backend)
    if start is None:
        return log_path(backend)
    with _lock:
        kept = worker_log.keep(start.log)
        if kept != start.log:  # the new log starts at 0
            _starts[backend] = dataclasses.replace(start, log_offset=0)
    return kept


def _crash_message(spec: ProbeSpec, exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        how = f"was killed by {signal.Signals(-exitcode).name}"
    else:
        how = f"exited with code {exitcode}"
    return (
        f"the {spec.backend} worker {how} while running this probe (a segfault, os._exit "
        "or running out of memory); it is restarted for the next probe. Its output is in "
        f"{_kept_log(slot(spec))}"
    )


def _failure(spec: ProbeSpec, status: str, kind: str, message: str) -> ProbeResult:
    return ProbeResult(
        spec=spec,
        status=status,  # type: ignore[arg-type]
        backend=spec.backend,
        device=_devices.get(slot(spec), "unknown"),
        verdict="error",
        error=ErrorInfo(type=kind, message=message, where="worker"),
        versions=_versions(spec),
    )


def _versions(spec: ProbeSpec) -> dict[str, str]:
    """The versions a result of ``spec`` carries: the backend's, and its engine's Keras."""
    found = versions(spec.backend)
    engine = engines.get(spec.engine) if spec.engine is not None else None
    return found if engine is None else {**found, **engine.versions()}


def _completed(result: ProbeResult) -> Future[ProbeResult]:
    future: Future[ProbeResult] = Future()
    future.set_result(result)
    return future


def _validated(backends: str | Iterable[str]) -> list[str]:
    listed = backends if isinstance(backends, str) else list(backends)
    return backend_names.names("all" if listed == ["all"] else listed)


atexit.register(shutdown)
