"""Long-lived worker processes per Keras backend, so one kernel can ask all four at once.

Keras fixes its backend at import, so each backend gets its own workers: one or more *slots*,
each a ``pebble.ProcessPool`` with a single spawned worker
(:mod:`dtype_explorer.runtime._worker`) and its own log, started on first use and reused. A
probe goes to the backend's slot with the fewest probes waiting (:func:`workers_per_backend`:
the default follows the cores and memory, ``configure(workers_per_backend=...)`` sets it). The
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
import re
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
ENV_WORKERS = "DTYPE_EXPLORER_WORKERS_PER_BACKEND"
DEFAULT_TIMEOUT = 60.0
#: Seconds a worker may take to import its backend (TensorFlow on a busy 2-core machine: ~30).
DEFAULT_START_TIMEOUT = 300.0
#: The longest finite time limit (faulthandler's timer cannot count past ~30 years).
MAX_SECONDS = 1e8

#: What one worker may hold, in MiB: its measured resident set after importing its backend
#: and probing Dense, Conv2D, LSTM and MultiHeadAttention (numpy 273, jax 394, tensorflow
#: 698, torch 473 on Linux x86-64, CPU; ``benchmarks/README.md``), with room to grow over a
#: survey (jax's compile cache, TensorFlow's graphs). The default number of workers per
#: backend leaves room for this much per worker.
WORKER_MIB = {"numpy": 400, "jax": 800, "tensorflow": 1000, "torch": 700}
#: The share of the memory available at the first probe that the default lets workers take.
MEMORY_SHARE = 0.5
#: The most workers per backend the default chooses, and the most ``configure`` accepts.
MAX_DEFAULT_WORKERS = 8
MAX_WORKERS = 64

_lock = threading.RLock()
#: Running pools by slot name: a *group* (the backend, ``numpy``, or an engine's workers on
#: it, ``numpy@keras==3.11.3``) for its first worker (log ``workers/numpy.log``), and
#: ``<group>-<k>`` for the next ones (``workers/numpy-1.log``).
_pools: dict[str, pebble.ProcessPool] = {}
_pending: dict[pebble.ProcessPool, set[Future]] = {}  # pebble leaves these pending on stop
_shut_down: weakref.WeakSet[Future] = weakref.WeakSet()  # tasks of pools stopped on purpose
_devices: dict[str, str] = {}
_starts: dict[str, _Start] = {}  # per slot, how its current pool starts workers
_config: dict[str, Any] = {
    "backends": None,
    "timeout": DEFAULT_TIMEOUT,
    "start_timeout": DEFAULT_START_TIMEOUT,
    "workers_per_backend": None,  # a number, "auto", or None: $DTYPE_EXPLORER_WORKERS_PER_BACKEND
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
    workers_per_backend: int | str | None = None,
) -> None:
    """Cap the backends that may start a worker (small machines), set the time limits and how
    many workers each backend runs.

    Args:
        backends: overrides ``$DTYPE_EXPLORER_BACKENDS`` (e.g. ``jax,numpy``); running
            workers of backends left out are stopped.
        timeout: seconds per probe.
        start_timeout: bounds a worker's start (importing its backend); applies to workers
            that start after this call (``shutdown()`` first to apply it to all).
            ``math.inf``: no limit.
        workers_per_backend: worker processes per backend, 1 to :data:`MAX_WORKERS`, or
            ``"auto"`` for :func:`default_workers_per_backend`. Workers beyond a lower number
            are stopped (their probes answer ``WorkerShutdown``); more start on first use.

    Returns:
        ``None``. Nothing changes when an argument is invalid.

    >>> configure(workers_per_backend=2); workers_per_backend()
    2
    >>> configure(workers_per_backend=1)
    >>> configure(workers_per_backend=0)  # doctest: +ELLIPSIS, +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InvalidSpecError: workers_per_backend must be a whole number from 1 to 64, or 'auto' ...
    """
    chosen = None if backends is None else _validated(backends)
    limits = {
        name: _seconds(name, value)
        for name, value in (("timeout", timeout), ("start_timeout", start_timeout))
        if value is not None
    }
    count = None if workers_per_backend is None else _worker_count(workers_per_backend)
    with _lock:
        if chosen is not None:
            _config["backends"] = chosen
            for name in [s for s in _pools if _backend_of(s) not in chosen]:
                _stop(_pools.pop(name), on_purpose=True)
        _config.update(limits)
        if count is not None:
            _config["workers_per_backend"] = count
            keep = _workers()
            for name in [s for s in _pools if _slot_index(s) >= keep]:
                _stop(_pools.pop(name), on_purpose=True)


def _worker_count(value: Any, name: str = "workers_per_backend") -> int | str:
    """``workers_per_backend`` checked: a whole number from 1 to :data:`MAX_WORKERS`, or
    ``"auto"``."""
    if value == "auto" and isinstance(value, str):
        return "auto"
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_WORKERS:
        return value
    raise InvalidSpecError(
        f"{name} must be a whole number from 1 to {MAX_WORKERS}, or 'auto' for "
        f"the default from the cores and memory ({default_workers_per_backend()} here). "
        f"Received: {_short(value)}"
    )


def workers_per_backend() -> int:
    """How many worker processes each backend runs: ``configure(workers_per_backend=...)``,
    else ``$DTYPE_EXPLORER_WORKERS_PER_BACKEND`` (a number or ``auto``), else
    :func:`default_workers_per_backend`.

    Returns:
        The number of workers per backend (at least 1).

    >>> workers_per_backend() >= 1
    True
    """
    return _workers()


def _workers() -> int:
    configured = _config["workers_per_backend"]
    if configured is None:  # not configured: the environment's, if set
        env = os.environ.get(ENV_WORKERS, "").strip()
        if env:
            configured = _worker_count(int(env) if env.isdigit() else env, f"${ENV_WORKERS}")
    if configured is None or configured == "auto":
        return default_workers_per_backend()
    return int(configured)


@functools.cache
def default_workers_per_backend() -> int:
    """The default number of workers per backend, chosen once per process: the CPUs this
    process may use shared among the installed, allowed backends, and no more workers of all
    of them than half the memory available holds (:data:`WORKER_MIB` each); at least 1, at
    most :data:`MAX_DEFAULT_WORKERS`. On 2 cores with four backends: 1 (the four workers
    already take turns on two cores); on 16 cores and 64 GB with four backends: 4.

    Returns:
        The default, at least 1.

    >>> 1 <= default_workers_per_backend() <= MAX_DEFAULT_WORKERS
    True
    """
    backends = installed_backends() or ["numpy"]
    by_cores = _cpus() // len(backends)
    per_round = sum(WORKER_MIB.get(b, max(WORKER_MIB.values())) for b in backends) << 20
    by_memory = int(_available_memory() * MEMORY_SHARE // per_round)
    return max(1, min(by_cores, by_memory, MAX_DEFAULT_WORKERS))


def _cpus() -> int:
    """The CPUs this process may run on (its affinity, and a cgroup's CPU quota if lower)."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            count = min(count, max(1, int(int(quota) // int(period))))
    return max(1, count)


def _available_memory() -> int:
    """Bytes of memory available now (Linux: ``MemAvailable``, capped by a cgroup limit);
    elsewhere the physical memory."""
    available = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    if available is None:
        try:
            available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, OSError, ValueError):
            available = 8 << 30
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            available = min(available, int(limit))
    return available


def _group(backend: str, engine: str | None) -> str:
    """The workers that answer for ``backend`` and ``engine``: the backend's (``"jax"``), or
    the engine's on that backend (``"jax@keras==3.11.3"``), each group its own workers."""
    return backend if engine is None else f"{backend}@{engine}"


def _slot_name(group: str, index: int) -> str:
    return group if index == 0 else f"{group}-{index}"


def _group_of(slot: str) -> str:
    """The group of worker ``slot`` (``numpy-1`` -> ``numpy``); an engine's name never ends
    in ``-<digits>`` (``keras==3.11.3``, ``tf_keras``)."""
    return re.sub(r"-\d+$", "", slot)


def _backend_of(slot: str) -> str:
    return _group_of(slot).partition("@")[0]


def _slot_index(slot: str) -> int:
    found = re.search(r"-(\d+)$", slot)
    return int(found.group(1)) if found else 0


def slots(backend: str, engine: str | None = None) -> list[str]:
    """The slot names of ``backend``'s workers (``numpy``, ``numpy-1``, ...; an engine's:
    ``numpy@keras==3.11.3``, ...), one per worker (:func:`workers_per_backend`); each has its
    own pool and log (:func:`log_path`)."""
    return [_slot_name(_group(backend, engine), k) for k in range(workers_per_backend())]


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
    task, slot = _schedule(
        backend, worker.run, (spec.to_dict(), target_payload), seconds, engine=spec.engine
    )
    out: Future[ProbeResult] = Future()
    out.add_done_callback(lambda f: f.cancelled() and task.cancel())
    task.add_done_callback(lambda f: _finish(f, out, spec, seconds, slot, cacheable=cacheable))
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
    return _schedule(backend, function, args, seconds, engine=engine_spec(engine))[0]


def warm(
    backends: Iterable[str] | None = None, *, engine: str | None = None
) -> dict[str, dict[str, Any]]:
    """Start every worker of ``backends`` (default: all installed) in parallel and wait until
    each has imported its backend; returns what each backend's first worker says about itself,
    with ``pids``, every worker's. A worker that cannot start (or not within the start
    timeout) raises :class:`WorkerStartError`. ``engine`` (a created engine's name) warms
    that engine's workers instead."""
    names = installed_backends() if backends is None else _validated(backends)
    for name in names:
        engines.check_backend(engine, name)
    engines.require(engine)
    engine = engine_spec(engine)
    futures = {s: _schedule(b, worker.describe, slot=s)[0] for b in names for s in slots(b, engine)}
    by_slot = {}
    for slot, future in futures.items():
        try:
            by_slot[slot] = future.result()
        except (pebble.ProcessExpired, BrokenProcessPool) as exc:
            if future in _shut_down:
                raise WorkerShutdown(SHUT_DOWN) from None
            raise WorkerStartError(_lost_before_answering(slot, exc)[2]) from None
    described = {}
    for backend in names:  # the first worker's description, and every worker's pid
        first = by_slot[_slot_name(_group(backend, engine), 0)]
        described[backend] = {
            **first,
            "pids": [by_slot[s]["pid"] for s in slots(backend, engine)],
        }
    _devices.update({_group(b, engine): d["device"] for b, d in described.items()})
    return described


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
    """Where worker ``backend``'s output goes (backend messages, crash tracebacks):
    ``workers/<backend>.log`` in the cache directory it was started with; a slot name gives
    that worker's log (``numpy-1``; an engine's, ``jax@keras==3.11.3``:
    ``workers/jax@keras-3.11.3.log``)."""
    start = _starts.get(backend)
    return start.log if start else _new_log_path(backend)


def log_paths(backend: str, engine: str | None = None) -> list[Path]:
    """The logs of every worker of ``backend`` (:func:`slots`), the first one first."""
    return [log_path(slot) for slot in slots(backend, engine)]


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
    """The running pool of worker ``slot``; a new one if it never started or broke, or if the
    settings a worker reads at start changed since it started (``KERAS_HOME`` pointed at
    another keras.json, ``JAX_ENABLE_X64`` set): the cache key says the new settings, so the
    worker must run under them. An engine's workers get its directory, put first on
    ``sys.path`` before their backend imports (``_worker.init``)."""
    now = settings()
    backend = _backend_of(slot)
    with _lock:
        pool = _pools.get(slot)
        if pool is not None and not pool.active:
            _stop(pool, on_purpose=False)
            pool = None
        if pool is not None and _starts[slot].settings != now:
            _stop(_pools.pop(slot), on_purpose=True)
            pool = None
        if pool is None:
            engine = engines.require(_group_of(slot).partition("@")[2] or None)
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
    backend: str,
    function: Any,
    args: tuple = (),
    timeout: float | None = None,
    *,
    slot: str | None = None,
    engine: str | None = None,
) -> tuple[Future, str]:
    """Schedule on one of ``backend``'s workers (of ``engine``'s, when given): ``slot``, else
    the one with the fewest probes waiting, replacing its pool once if it broke just now;
    ``(task, slot)``."""
    if timeout == math.inf:
        timeout = None
    with _lock:
        if slot is None:
            slot = min(slots(backend, engine), key=_waiting)
        try:
            pool = _pool(slot)
            task = pool.schedule(function, args=args, timeout=timeout)
        except RuntimeError:  # the pool broke between the check and the call
            pool = _pool(slot)
            task = pool.schedule(function, args=args, timeout=timeout)
        pending = _pending.setdefault(pool, set())
        pending.add(task)
    task.add_done_callback(pending.discard)
    return task, slot


def _waiting(slot: str) -> int:
    """Probes sent to ``slot``'s worker and not answered yet (0: no pool yet)."""
    pool = _pools.get(slot)
    return len(_pending.get(pool, ())) if pool is not None else 0


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


def _finish(
    task: Future, out: Future, spec: ProbeSpec, seconds: float, slot: str, *, cacheable: bool
) -> None:
    """Turn the answer of worker ``slot`` (or its failure) into a ``ProbeResult``; store it."""
    if out.done():  # cancelled by the caller
        return
    try:
        answer = dict(task.result())
        if answer.pop(worker.REPLACE_ME, False):
            _retire(slot)
        result = ProbeResult.from_dict(answer)
        _devices[_group_of(slot)] = result.device
    except concurrent.futures.CancelledError:
        if task not in _shut_down:
            return
        result = _lost_worker(spec, slot, WorkerShutdown(SHUT_DOWN), on_purpose=True)
    except concurrent.futures.TimeoutError:
        message = (
            f"no answer within {seconds:g} s; the {spec.backend} worker was stopped and "
            "will be restarted for the next probe (set timeout= to allow longer)"
        )
        result = _failure(spec, "timeout", "TimeoutError", message)
    except (pebble.ProcessExpired, BrokenProcessPool, WorkerShutdown) as exc:
        result = _lost_worker(spec, slot, exc, on_purpose=task in _shut_down)
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


def _retire(slot: str) -> None:
    """Replace worker ``slot`` after a probe changed settings it could not put back: new
    probes go to a new pool; the old one ends once its queued probes (refused by the worker
    meanwhile, see ``_worker.run``) are answered."""
    with _lock:
        pool = _pools.pop(slot, None)
    if pool is not None:
        pool.close()
        threading.Thread(target=pool.join, name="dx-retire", daemon=True).start()


def _lost_worker(
    spec: ProbeSpec, slot: str, exc: BaseException, *, on_purpose: bool
) -> ProbeResult:
    """The answer for a probe whose worker went away: stopped on purpose (``shutdown``,
    ``configure``; pebble may then report the killed worker as expired or the pool as broken),
    stopped at its start deadline, or died on its own."""
    if on_purpose or isinstance(exc, WorkerShutdown):
        return _failure(spec, "error", "WorkerShutdown", SHUT_DOWN)
    if isinstance(exc, pebble.ProcessExpired):
        return _failure(spec, "crashed", "WorkerCrashed", _crash_message(spec, slot, exc.exitcode))
    status, kind, message = _lost_before_answering(slot, exc)
    return _failure(spec, status, kind, message)


def _lost_before_answering(slot: str, exc: BaseException) -> tuple[str, str, str]:
    """``(status, error type, message)`` for worker ``slot`` that pebble reports only as gone
    (the pool broke): its log tells whether it was starting, hit its start deadline, or had
    started and died (before pebble saw it take the task)."""
    backend = _backend_of(slot)
    start = _starts[slot]  # set when its pool was made, which every task went through
    ending = worker_log.last_start(start.log, backend, since=start.log_offset)
    if ending == "timed-out":
        return (
            "timeout",
            "WorkerStartTimeout",
            f"the {backend} worker did not finish starting (importing Keras on {backend}) "
            f"within {start.deadline:g} s and was stopped; the next probe starts a new one "
            f"(pool.configure(start_timeout=...) allows longer). Where it hung: {start.log}",
        )
    kept = _kept_log(slot)
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


def _kept_log(slot: str) -> Path:
    """The file that keeps a dead worker's output (its traceback): its log, moved aside now
    when the next worker would start it afresh (``_worker_log.keep``). Called before pebble
    starts the replacement (it runs the task's callbacks first)."""
    start = _starts.get(slot)
    if start is None:
        return log_path(slot)
    with _lock:
        kept = worker_log.keep(start.log)
        if kept != start.log:  # the new log starts at 0
            _starts[slot] = dataclasses.replace(start, log_offset=0)
    return kept


def _crash_message(spec: ProbeSpec, slot: str, exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        how = f"was killed by {signal.Signals(-exitcode).name}"
    else:
        how = f"exited with code {exitcode}"
    return (
        f"the {spec.backend} worker {how} while running this probe (a segfault, os._exit "
        "or running out of memory); it is restarted for the next probe. Its output is in "
        f"{_kept_log(slot)}"
    )


def _failure(spec: ProbeSpec, status: str, kind: str, message: str) -> ProbeResult:
    return ProbeResult(
        spec=spec,
        status=status,  # type: ignore[arg-type]
        backend=spec.backend,
        device=_devices.get(_group(spec.backend, spec.engine), "unknown"),
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
