"""Long-lived worker processes per Keras backend, so one kernel can ask all five at once (the
ones installed: openvino's worker starts only where ``openvino`` is installed).

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
import concurrent.futures
import functools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import cloudpickle
import pebble

from dtype_explorer import backends as backend_names
from dtype_explorer import keras_facts, keras_run
from dtype_explorer.errors import InvalidSpecError, unknown
from dtype_explorer.records import ProbeResult, ProbeSpec, engine_spec, pinned_engine
from dtype_explorer.runtime import _allowed, _failures, _limits, _sizing, cache, engines
from dtype_explorer.runtime import _call_trust as call_trust
from dtype_explorer.runtime import _spawn as spawn
from dtype_explorer.runtime import _worker as worker
from dtype_explorer.runtime._failures import TRANSIENT_ERRORS, storable
from dtype_explorer.runtime._payload import code_payload, load_code, target_payload
from dtype_explorer.runtime._sizing import (
    MAX_DEFAULT_WORKERS,
    MAX_WORKERS,
    MEMORY_SHARE,
    WORKER_MIB,
)
from dtype_explorer.runtime._spawn import SHUT_DOWN, WORKER_PROCESS_NAME, WorkerShutdown

__all__ = [
    "DEFAULT_START_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "ENV_BACKENDS",
    "ENV_WORKERS",
    "MAX_DEFAULT_WORKERS",
    "MAX_SECONDS",
    "MAX_WORKERS",
    "MEMORY_SHARE",
    "SHUT_DOWN",
    "TRANSIENT_ERRORS",
    "WORKER_MIB",
    "WORKER_PROCESS_NAME",
    "WorkerShutdown",
    "WorkerStartError",
    "allowed_backends",
    "call",
    "code_payload",
    "configure",
    "default_workers_per_backend",
    "installed",
    "installed_backends",
    "load_code",
    "log_path",
    "log_paths",
    "lost_worker",
    "run_many",
    "shutdown",
    "slots",
    "stop_engine",
    "storable",
    "submit",
    "target_payload",
    "time_limit",
    "trusted_entry",
    "usable",
    "user_slot",
    "warm",
    "workers_chosen",
    "workers_per_backend",
]

#: Registers a dtype-explorer function that ``call`` may run in a cache-keeping worker.
trusted_entry = call_trust.entry
time_limit = _limits.time_limit
lost_worker = _failures.lost_in_call

ENV_BACKENDS = _allowed.ENV_BACKENDS
ENV_WORKERS = "DTYPE_EXPLORER_WORKERS_PER_BACKEND"
DEFAULT_TIMEOUT = 60.0
#: Seconds a worker may take to import its backend (TensorFlow on a busy 2-core machine: ~30).
DEFAULT_START_TIMEOUT = 300.0
MAX_SECONDS = _limits.MAX_SECONDS

#: Running pools by slot name (``_spawn`` holds them): a *group* (the backend, ``numpy``, or
#: an engine's workers on it, ``numpy@keras==3.11.3``) for its first worker, and
#: ``<group>-<k>`` for the next ones.
_pools = spawn.pools
_config: dict[str, Any] = {
    "backends": None,
    "timeout": DEFAULT_TIMEOUT,
    "start_timeout": DEFAULT_START_TIMEOUT,
    "workers_per_backend": None,  # a number, "auto", or None: $DTYPE_EXPLORER_WORKERS_PER_BACKEND
}


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
        name: _limits.seconds(name, value)
        for name, value in (("timeout", timeout), ("start_timeout", start_timeout))
        if value is not None
    }
    count = (
        None
        if workers_per_backend is None
        else _limits.worker_count(workers_per_backend, default_workers_per_backend)
    )
    with spawn.lock:
        if chosen is not None:
            _config["backends"] = chosen
            spawn.stop_slots(
                [s for s in spawn.pools if spawn.backend_of(s) not in chosen or spawn.is_user(s)]
            )
        _config.update(limits)
        if count is not None:
            _config["workers_per_backend"] = count
            keep = _workers()
            spawn.stop_slots([s for s in spawn.pools if spawn.slot_index(s) >= keep])


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


def workers_chosen() -> bool:
    """Whether ``configure(workers_per_backend=)`` or ``$DTYPE_EXPLORER_WORKERS_PER_BACKEND``
    chose the workers per backend (else the pool sizes itself).

    Returns:
        ``True`` when a count (or ``"auto"``) was chosen.

    >>> isinstance(workers_chosen(), bool)
    True
    """
    return _config["workers_per_backend"] is not None or bool(os.environ.get(ENV_WORKERS))


def _workers() -> int:
    configured = _config["workers_per_backend"]
    if configured is None:  # not configured: the environment's, if set
        env = os.environ.get(ENV_WORKERS, "").strip()
        if env:
            configured = _limits.worker_count(
                int(env) if env.isdigit() else env,
                default_workers_per_backend,
                f"${ENV_WORKERS}",
            )
    if configured is None or configured == "auto":
        return default_workers_per_backend()
    return int(configured)


@functools.cache
def default_workers_per_backend() -> int:
    """The default number of workers per backend, chosen once per process: the CPUs this
    process may use shared among the installed, allowed backends, and no more workers of all
    of them than half the memory available holds (:data:`WORKER_MIB` each); at least 1, at
    most :data:`MAX_DEFAULT_WORKERS`. On 2 cores with four or five backends: 1 (the workers
    already take turns on two cores); on 16 cores and 64 GB with four backends: 4 (3 with five).

    Returns:
        The default, at least 1.

    >>> 1 <= default_workers_per_backend() <= MAX_DEFAULT_WORKERS
    True
    """
    return _sizing.default_workers(installed_backends() or ["numpy"])


def slots(backend: str, engine: str | None = None, *, user: bool = False) -> list[str]:
    """The slot names of ``backend``'s workers (``numpy``, ``numpy-1``, ...; an engine's:
    ``numpy@keras==3.11.3``, ...; with ``user``, those that run user code: ``numpy~user``,
    ``numpy~user-1``), one per worker (:func:`workers_per_backend`); each has its own pool and
    log (:func:`log_path`)."""
    group = spawn.group(backend, engine)
    group = spawn.user_slot(group) if user else group
    return [spawn.slot_name(group, k) for k in range(_workers())]


def allowed_backends() -> list[str]:
    """The backends a worker may start for: ``configure(backends=...)``, else the env var."""
    if _config["backends"] is not None:
        return list(_config["backends"])
    env = _allowed.env_backends()
    return list(backend_names.BACKENDS) if env is None else env


def installed(backend: str) -> bool:
    """Whether Keras can import ``backend`` here (its packages, ``_allowed.NEEDS``), allowed
    or not."""
    return _allowed.installed(backend)


def installed_backends() -> list[str]:
    """Allowed backends whose package is installed (found without importing it)."""
    return [b for b in allowed_backends() if _allowed.installed(b)]


def usable(backends: str | Iterable[str] | None = None) -> list[str]:
    """``backends`` checked to be installed and allowed (``None`` or ``"all"``: every such
    backend), so that work fails before it starts rather than half-way.

    Raises ``InvalidSpecError`` naming an unknown, uninstalled or disallowed backend.
    """
    available = installed_backends()
    if backends is None or backend_names.is_all(backends):
        return available
    names = backend_names.names(backends)
    for name in names:
        if name not in available:
            raise unknown("backend (installed and allowed)", name, available)
    return names


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
    backends); it runs in the backend's user-code worker (``<backend>~user``, apart from the
    workers whose answers the cache keeps) and its results are never cached. ``timeout``
    defaults to the configured one.
    """
    (backend,) = usable(spec.backend)
    engines.check_backend(spec.engine, backend)
    engines.require(spec.engine)  # created first (dx.probe does it): a clear error if not
    missing = engines.missing_backend(spec.engine, backend)
    if missing is not None:  # openvino on keras-nightly: that Keras's answer, not supported
        return _completed(_failures.unsupported(spec, missing))
    limit = time_limit(timeout)
    cacheable = use_cache and target_payload is None and not spec.target.startswith("custom:")
    if cacheable:
        with _failures.cache_optional():
            hit = cache.get(spec)
            if hit is not None:
                return _completed(hit)
    seconds = _config["timeout"] if limit is None else limit
    user_code = target_payload is not None or spec.target.startswith("custom:")
    task, slot = _schedule(
        backend,
        worker.run,
        (_checked(spec), target_payload),
        seconds,
        engine=spec.engine,
        user=user_code,
    )
    out: Future[ProbeResult] = Future()
    out.add_done_callback(lambda f: f.cancelled() and task.cancel())
    task.add_done_callback(
        lambda f: _failures.deliver_answer(f, out, spec, seconds, slot, cacheable=cacheable)
    )
    return out


def _check_has_backend(engine: str | None, backend: str) -> None:
    """``InvalidSpecError`` where the engine's Keras has no ``backend`` (no worker can start)."""
    missing = engines.missing_backend(engine, backend)
    if missing is not None:
        raise InvalidSpecError(f"backend {backend!r} with engine {engine!r}: {missing}")


def _checked(spec: ProbeSpec) -> dict[str, Any]:
    """``spec`` as the worker receives it, validated again (a spec changed with
    ``model_copy(update=...)`` skipped its checks: a ``structure`` that does not fit its
    values would be answered)."""
    data = spec.to_dict()
    try:
        ProbeSpec.from_dict(data)
    except ValueError as exc:  # pydantic's ValidationError
        raise InvalidSpecError(f"the probe's spec is not valid: {exc}") from None
    return data


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
    fresh: bool = False,
) -> Future:
    """Run ``function(*args)`` in ``backend``'s worker, where that backend's library is already
    imported (reference promotion tables use it); its future. ``engine`` (a created
    engine's name) runs it in that engine's worker instead. ``fresh`` replaces the worker once
    it has answered (a user's traced cell: whatever it changed in that process goes with it;
    the next task starts a new worker, as a time limit or a crash does already).

    The function and its arguments travel by value (cloudpickle), so a function defined in
    the user's script or notebook runs too. A function that is not one of dtype-explorer's
    registered entries (:func:`trusted_entry`) is user code, whatever it is (``_worker.call``
    itself included): it runs in the backend's user-code worker (``<backend>~user``, as custom
    layers do), never in a worker whose answers the cache keeps; the worker checks the payload
    again (``_call_trust.load``) and taints itself for anything but an entry and plain data.

    Raises:
        InvalidSpecError: ``function`` is not callable, or it or its arguments cannot be
            pickled.
    """
    if not callable(function):
        raise InvalidSpecError(
            f"pool.call needs a callable function. Received: {_limits.short(function)}"
        )
    usable(backend)
    engines.check_backend(engine, backend)
    engines.require(engine)
    _check_has_backend(engine, backend)
    limit = time_limit(timeout)
    seconds = _config["timeout"] if limit is None else limit
    try:
        payload = cloudpickle.dumps((function, args))
    except Exception as exc:
        raise InvalidSpecError(
            f"pool.call could not send {_limits.short(function)} and its arguments to the "
            f"{backend} worker: they cannot be pickled ({type(exc).__name__}: {exc})"
        ) from None
    trusted = call_trust.is_entry(function)  # the worker decides again, on what it unpickles
    call_args = (payload, trusted, fresh)
    task, slot = _schedule(
        backend, worker.call, call_args, seconds, engine=pinned_engine(engine), user=not trusted
    )
    out: Future = Future()
    task.add_done_callback(functools.partial(_failures.deliver_call, slot, out))
    if fresh:
        task.add_done_callback(functools.partial(_replace_after, slot))
    return out


def _replace_after(slot: str, task: Future) -> None:
    """Replace worker ``slot`` once ``task`` (``call(fresh=True)``) is done there: new tasks go
    to a new worker. A task stopped at its time limit or lost with its worker needs nothing:
    pebble has started a new process already."""
    if task.cancelled():
        return
    if isinstance(task.exception(), (concurrent.futures.TimeoutError, pebble.ProcessExpired)):
        return
    spawn.retire(slot, task, "it ran the user's traced code (call(fresh=True))")


def warm(
    backends: Iterable[str] | None = None, *, engine: str | None = None
) -> dict[str, dict[str, Any]]:
    """Start every worker of ``backends`` (default: all installed) in parallel and wait until
    each has imported its backend; returns what each backend's first worker says about itself,
    with ``pids``, every worker's. A worker that cannot start (or not within the start
    timeout) raises :class:`WorkerStartError`. ``engine`` (a created engine's name) warms
    that engine's workers instead."""
    names = installed_backends() if backends is None else _validated(backends)
    engine = pinned_engine(engine)  # one build ("nightly": dx.engines.pin names it first)
    for name in names:
        engines.check_backend(engine, name)
    engines.require(engine)
    for name in names:
        _check_has_backend(engine, name)
    futures = {s: _schedule(b, worker.describe, slot=s)[0] for b in names for s in slots(b, engine)}
    by_slot = {}
    for slot, future in futures.items():
        try:
            by_slot[slot] = future.result()
        except (pebble.ProcessExpired, BrokenProcessPool) as exc:
            if future in spawn.shut_down:
                raise WorkerShutdown(SHUT_DOWN) from None
            raise WorkerStartError(_failures.lost_before_answering(slot, exc)[2]) from None
    described = {}
    for backend in names:  # the first worker's description, and every worker's pid
        first = by_slot[spawn.slot_name(spawn.group(backend, engine), 0)]
        described[backend] = {
            **first,
            "pids": [by_slot[s]["pid"] for s in slots(backend, engine)],
        }
    spawn.devices.update({spawn.group(b, engine): d["device"] for b, d in described.items()})
    return described


def start_for_facts(backends: Iterable[str]) -> Callable[[], None]:
    """Start the first worker of each of ``backends`` (the installed Keras's) without waiting,
    and return what waits until one of them has written the Keras facts snapshot
    (``worker.init`` writes it once its backend is imported) or every one has started.

    A question asked with no snapshot yet (a fresh cache directory) is then checked against the
    worker's Keras (``keras_facts.expecting``) instead of a second Keras imported first, and
    answered by the same worker. A backend that cannot start is left to :func:`submit` to
    explain; raises ``InvalidSpecError`` for a backend that is not installed or allowed.
    """
    futures = [
        _schedule(name, worker.describe, slot=slots(name)[0])[0] for name in usable(backends)
    ]

    def wait() -> None:
        pending = set(futures)
        while pending and not keras_facts.has_snapshot():
            _, pending = concurrent.futures.wait(
                pending, return_when=concurrent.futures.FIRST_COMPLETED
            )

    return wait


def _stop_engine(spec: str) -> None:
    """Stop the workers of the engine ``spec`` (pinned) and end its zygotes, before it is
    removed."""
    with spawn.lock:
        doomed = [
            name
            for name, start in spawn.starts.items()
            if start.engine is not None and start.engine.spec == spec
        ]
    spawn.stop_slots(doomed)
    spawn.close_zygotes(engine=spec)


engines.BEFORE_REMOVE.append(_stop_engine)


def stop_engine(spec: str) -> None:
    """Stop the workers of the engine ``spec`` now, and end its zygotes, to free their memory
    (``dx.bisect`` does, after each release it asks); its next probe starts them again.

    >>> stop_engine("keras==3.11.3")   # no workers: nothing to do
    """
    found = engines.get(spec) if engine_spec(spec) is not None else None
    if found is not None:
        _stop_engine(found.spec)


def user_slot(backend: str, engine: str | None = None) -> str:
    """The slot of ``backend``'s (or ``engine``'s) user-code worker, ``numpy~user``: custom
    layers, instances and ``pool.call`` of a function that is not dtype-explorer's run there,
    apart from the workers whose answers the cache keeps; its log is ``log_path(slot)``.

    >>> user_slot("numpy")
    'numpy~user'
    """
    return spawn.user_slot(spawn.group(backend, engine))


def log_path(backend: str) -> Path:
    """Where worker ``backend``'s output goes (backend messages, crash tracebacks):
    ``workers/<backend>.log`` in the cache directory it was started with; a slot name gives
    that worker's log (``numpy-1``; an engine's, ``jax@keras==3.11.3``:
    ``workers/jax@keras-3.11.3.log``)."""
    return spawn.log_path(backend)


def log_paths(backend: str, engine: str | None = None, *, user: bool = False) -> list[Path]:
    """The logs of every worker of ``backend`` (:func:`slots`; ``user``: its user-code
    workers'), the first one first."""
    return [log_path(slot) for slot in slots(backend, engine, user=user)]


def shutdown(*, zygotes: bool = True) -> None:
    """Stop every worker now (also run at interpreter exit), and this process's TensorFlow
    reference process (``keras_run.references._tf_reference``); later probes start new ones.

    Args:
        zygotes: also end each backend's and engine's zygote (``runtime/_zygote.py``: the
            process that imported Keras once and forks the workers), freeing the memory its
            imports hold: the default, and always at exit. ``False`` keeps them, so that the
            next workers are forked at once (0.2-0.6 s instead of a 2-4 s import); they are
            as fresh as after a full shutdown, since a zygote never runs a probe or user code.
            Keep them only when nothing a backend imports has changed since (a reinstalled
            Keras, an edited module on ``sys.path``): a zygote keeps what it imported.

    Returns:
        ``None``.

    >>> shutdown(zygotes=False)  # fresh workers next, forked from the zygotes already made
    """
    spawn.stop_slots(list(spawn.pools))
    if zygotes:
        spawn.close_zygotes()
    if "dtype_explorer.keras_run.references._tf_reference" in sys.modules:  # started: stop it
        keras_run.tf_reference_stop(wait=True)


def _schedule(
    backend: str,
    function: Any,
    args: tuple = (),
    timeout: float | None = None,
    *,
    slot: str | None = None,
    engine: str | None = None,
    user: bool = False,
) -> tuple[Future, str]:
    """Schedule on one of ``backend``'s workers (of ``engine``'s, when given; its user-code
    workers for ``user``): ``slot``, else the one with the fewest probes waiting;
    ``(task, slot)``."""
    candidates = [slot] if slot is not None else slots(backend, engine, user=user)
    return spawn.schedule(
        candidates, function, args, timeout, start_timeout=_config["start_timeout"]
    )


def _completed(result: ProbeResult) -> Future[ProbeResult]:
    future: Future[ProbeResult] = Future()
    future.set_result(result)
    return future


def _validated(backends: str | Iterable[str]) -> list[str]:
    return backend_names.names(backends)


atexit.register(shutdown)
