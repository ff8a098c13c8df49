"""The workers' processes: one ``pebble.ProcessPool`` with a single spawned worker per *slot*,
its log, and how it starts and stops. :mod:`~dtype_explorer.runtime.pool` decides which slots
there are and what they run; this module holds the running pools and spawns them.

A slot is named by its *group* (the backend, ``numpy``, or an engine's workers on it,
``numpy@keras==3.11.3``) for its first worker (log ``workers/numpy.log``), and
``<group>-<k>`` for the next ones (``workers/numpy-1.log``). A user's code (a custom layer,
an instance) runs in a worker of its own, ``<group>~user`` (:func:`user_slot`), so the workers
that answer built-in questions, whose answers the cache keeps, never run it.

>>> slot_name(group("numpy", "keras==3.11.3"), 1), backend_of("numpy@keras==3.11.3-1")
('numpy@keras==3.11.3-1', 'numpy')
>>> user_slot("numpy@keras==3.11.3"), group_of("numpy@keras==3.11.3~user-1")
('numpy@keras==3.11.3~user', 'numpy@keras==3.11.3')
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import math
import multiprocessing.context
import multiprocessing.spawn
import os
import re
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pebble

from dtype_explorer.records import Engine
from dtype_explorer.runtime import _worker as worker
from dtype_explorer.runtime import _worker_log as worker_log
from dtype_explorer.runtime import _zygote as zygote
from dtype_explorer.runtime import cache, engines
from dtype_explorer.versions import settings

_log = logging.getLogger("dtype_explorer.pool")
lock = threading.RLock()
#: Running pools by slot name.
pools: dict[str, pebble.ProcessPool] = {}
pending: dict[pebble.ProcessPool, set[Future]] = {}  # pebble leaves these pending on stop
shut_down: weakref.WeakSet[Future] = weakref.WeakSet()  # tasks of pools stopped on purpose
#: The pool each task was sent to (a retired worker's later answers retire nothing more).
owners: weakref.WeakKeyDictionary[Future, pebble.ProcessPool] = weakref.WeakKeyDictionary()
#: The device each group's workers run on (``"cpu"``), as they last said.
devices: dict[str, str] = {}


@dataclasses.dataclass(frozen=True)
class Start:
    """How a pool starts its workers: their log (and its size then: older text is another
    pool's), the start deadline they were given (``None``: none) and the settings their Keras
    reads at start (``versions.settings()``: keras.json, ``KERAS_*``, ``JAX_*``)."""

    log: Path
    log_offset: int
    deadline: float | None
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The engine its workers run (``None``: the installed Keras).
    engine: Engine | None = None


starts: dict[str, Start] = {}  # per slot, how its current pool starts workers


class WorkerShutdown(Exception):
    """A probe's worker was stopped on purpose (``shutdown``/``configure``) before it answered."""


SHUT_DOWN = "the worker was shut down before answering (dx.shutdown or configure)"


def group(backend: str, engine: str | None) -> str:
    """The workers that answer for ``backend`` and ``engine``: the backend's (``"jax"``), or
    the engine's on that backend (``"jax@keras==3.11.3"``), each group its own workers."""
    return backend if engine is None else f"{backend}@{engine}"


def slot_name(group: str, index: int) -> str:
    return group if index == 0 else f"{group}-{index}"


#: The suffix of the slot that runs a group's user code (:func:`user_slot`).
USER = "~user"


def user_slot(group: str) -> str:
    """The worker of ``group`` that runs user code (custom layers, instances): one per group,
    started on first use, its answers never stored, so a user's layer that patches Keras or
    fills its registry never reaches the workers whose answers the cache keeps."""
    return group + USER


def is_user(slot: str) -> bool:
    """Whether worker ``slot`` runs user code (:func:`user_slot`, ``numpy~user-1``)."""
    return re.sub(r"-\d+$", "", slot).endswith(USER)


def group_of(slot: str) -> str:
    """The group of worker ``slot`` (``numpy-1`` -> ``numpy``, ``numpy~user`` -> ``numpy``); an
    engine's name never ends in ``-<digits>`` (``keras==3.11.3``, ``tf_keras``)."""
    return re.sub(r"-\d+$", "", slot).removesuffix(USER)


def backend_of(slot: str) -> str:
    return group_of(slot).partition("@")[0]


def slot_index(slot: str) -> int:
    found = re.search(r"-(\d+)$", slot)
    return int(found.group(1)) if found else 0


def log_path(slot: str) -> Path:
    """Worker ``slot``'s log: the one its pool started with, else where a new one would go."""
    start = starts.get(slot)
    return start.log if start else new_log_path(slot)


def new_log_path(slot: str) -> Path:
    return cache.path() / "workers" / f"{slot.replace('==', '-')}.log"


def pool_for(slot: str, start_timeout: float) -> pebble.ProcessPool:
    """The running pool of worker ``slot``; a new one if it never started or broke, or if the
    settings a worker reads at start changed since it started (``KERAS_HOME`` pointed at
    another keras.json, ``JAX_ENABLE_X64`` set): the cache key says the new settings, so the
    worker must run under them. An engine's workers get its directory, put first on
    ``sys.path`` before their backend imports (``_worker.init``). A new worker has
    ``start_timeout`` seconds to import its backend (``math.inf``: no limit)."""
    now = settings()
    with lock:
        pool = pools.get(slot)
        if pool is not None and not pool.active:
            stop(pool, on_purpose=False)
            pool = None
        if pool is not None and starts[slot].settings != now:
            stop(pools.pop(slot), on_purpose=True)
            pool = None
        if pool is None:
            pool = pools[slot] = _start(slot, now, start_timeout)
        return pool


def _start(slot: str, now: dict[str, Any], start_timeout: float) -> pebble.ProcessPool:
    """A new pool for worker ``slot`` (``lock`` held), its :class:`Start` recorded."""
    engine = engines.require(group_of(slot).partition("@")[2] or None)
    log = new_log_path(slot)
    worker_log.keep(log)
    deadline = None if start_timeout == math.inf else start_timeout
    start = starts[slot] = Start(log, worker_log.size(log), deadline, now, engine)
    return pebble.ProcessPool(
        max_workers=1,
        initializer=worker.init,
        initargs=(
            backend_of(slot),
            os.getpid(),
            str(log),
            start.deadline,
            None if engine is None else engine.to_dict(),
            dict(os.environ),
        ),
        context=context_for(backend_of(slot), engine, start.deadline),
    )


def schedule(
    candidates: Sequence[str],
    function: Any,
    args: tuple = (),
    timeout: float | None = None,
    *,
    start_timeout: float,
) -> tuple[Future, str]:
    """Schedule ``function(*args)`` on the slot of ``candidates`` with the fewest probes
    waiting, replacing its pool once if it broke just now; ``(task, slot)``."""
    if timeout == math.inf:
        timeout = None
    with lock:
        slot = min(candidates, key=waiting)
        try:
            pool = pool_for(slot, start_timeout)
            task = pool.schedule(function, args=args, timeout=timeout)
        except RuntimeError:  # the pool broke between the check and the call
            pool = pool_for(slot, start_timeout)
            task = pool.schedule(function, args=args, timeout=timeout)
        waiting_tasks = pending.setdefault(pool, set())
        waiting_tasks.add(task)
        owners[task] = pool
    task.add_done_callback(waiting_tasks.discard)
    return task, slot


def waiting(slot: str) -> int:
    """Probes sent to ``slot``'s worker and not answered yet (0: no pool yet)."""
    pool = pools.get(slot)
    return len(pending.get(pool, ())) if pool is not None else 0


def stop(pool: pebble.ProcessPool, *, on_purpose: bool) -> None:
    """Stop ``pool``'s worker and resolve the tasks it leaves unanswered: as a shutdown when
    stopped on purpose (marked first: pebble may report the worker it kills as expired), as
    the pool's breakage when it is replaced because it broke."""
    left = list(pending.pop(pool, ()))
    if on_purpose:
        shut_down.update(left)
    pool.stop()
    pool.join()
    for task in left:
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            task.set_exception(
                WorkerShutdown(SHUT_DOWN) if on_purpose else BrokenProcessPool("the pool broke")
            )


def stop_slots(names: Sequence[str]) -> None:
    """Stop the running workers of the slots ``names``, on purpose (their probes answer
    :class:`WorkerShutdown`)."""
    with lock:
        doomed = [pools.pop(name) for name in names if name in pools]
    for pool in doomed:
        stop(pool, on_purpose=True)


def retire(slot: str, task: Future | None = None, why: str = "") -> bool:
    """Replace worker ``slot`` after a probe changed settings it could not put back, or after
    it grew past its memory budget: new probes go to a new pool; the old one ends once its
    queued probes are answered (each once, by the old worker: none is lost or sent twice;
    refused there when its settings could not be put back, see ``_worker.run``). With
    ``task``, only the pool that ran it is retired: the answers a retired worker gives to its
    queued probes replace nothing more. ``why`` is logged (``dtype_explorer.pool``).

    Returns:
        Whether a pool was retired.
    """
    with lock:
        pool = pools.get(slot)
        if pool is None or (task is not None and owners.get(task) is not pool):
            return False
        del pools[slot]
    _log.info("worker %s replaced%s", slot, f": {why}" if why else "")
    pool.close()
    threading.Thread(target=pool.join, name="dx-retire", daemon=True).start()
    return True


def kept_log(slot: str) -> Path:
    """The file that keeps a dead worker's output (its traceback): its log, moved aside now
    when the next worker would start it afresh (``_worker_log.keep``). Called before pebble
    starts the replacement (it runs the task's callbacks first)."""
    start = starts.get(slot)
    if start is None:
        return log_path(slot)
    with lock:
        kept = worker_log.keep(start.log)
        if kept != start.log:  # the new log starts at 0
            starts[slot] = dataclasses.replace(start, log_offset=0)
    return kept


#: The name every worker process's name starts with (see :class:`WorkerContext`).
WORKER_PROCESS_NAME = "dtype-explorer-worker"


#: What a worker's exit code 0 reads as to pebble (:attr:`_WorkerProcess.exitcode`); no exit
#: status is 256.
ZERO_EXIT = 256


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A spawned worker process, named so that its start leaves the user's ``__main__`` out."""

    def __init__(self, *args: Any, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, name=f"{WORKER_PROCESS_NAME}/{name}", **kwargs)

    @property
    def exitcode(self) -> int | None:
        """The worker's exit code, 0 read as :data:`ZERO_EXIT`.

        pebble takes a worker that exits with 0 for one that ended as asked, and leaves the
        task it was running unanswered: a function that called ``os._exit(0)`` in a worker
        (``dx.trace(backend=...)``, a custom layer's ``call``) made its caller wait forever,
        or to the task's time limit. Our workers (no task limit) end on their own with 0 only
        when the pool closes their pipe, after pebble stopped watching, or when their parent
        (the kernel, or the zygote they were forked from) is gone
        (``_worker._exit_with_parent``). So 0 reads as a worker lost: its task answers
        ``ProcessExpired`` (``_failures.how_it_ended`` says 0); one lost while idle breaks its
        pool, which :func:`pool_for` replaces for the next task."""
        code = super().exitcode
        return ZERO_EXIT if code == 0 else code


class WorkerContext(multiprocessing.context.SpawnContext):
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


WORKER_CONTEXT = WorkerContext()


class _ForkedWorkerProcess(_WorkerProcess):
    """A worker process that starts from its backend's (or engine's) zygote when it can
    (:meth:`ZygoteContext.popen`); ``_dx_start`` says which: ``(backend, engine, deadline)``."""

    _dx_start: tuple[str, Engine | None, float | None]

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        backend, engine, deadline = process_obj._dx_start
        log = new_log_path(f"{group(backend, engine and engine.spec)}.zygote")
        found = zygote.zygote_for(backend, log, engine and engine.to_dict())
        if found is not None and found.ready(deadline):
            return zygote.ZygotePopen(process_obj, found)
        return _WorkerProcess._Popen(process_obj)


class ZygoteContext(WorkerContext):
    """:class:`WorkerContext` whose workers are forked from their backend's (or engine's)
    zygote (:mod:`~dtype_explorer.runtime._zygote`) once it is ready, and spawned as before
    when there is none, its imports failed or it is not ready within ``deadline`` seconds."""

    def __init__(self, backend: str, engine: Engine | None, deadline: float | None) -> None:
        super().__init__()
        self.start = (backend, engine, deadline)

    def Process(self, *args: Any, **kwargs: Any) -> _ForkedWorkerProcess:
        process = _ForkedWorkerProcess(*args, **kwargs)
        process._dx_start = self.start
        return process


def context_for(
    backend: str, engine: Engine | None, deadline: float | None
) -> multiprocessing.context.BaseContext:
    """How a new worker of ``backend`` (and ``engine``) starts: from a zygote where
    :func:`~dtype_explorer.runtime._zygote.available`, else spawned."""
    return ZygoteContext(backend, engine, deadline) if zygote.available() else WORKER_CONTEXT


def close_zygotes(engine: str | None = None) -> None:
    """End the zygotes (after the workers: ``pool.shutdown``); with ``engine`` (a pinned
    spec), that engine's only (``pool.stop_engine``, and before the engine is removed)."""
    zygote.close_all(engine)
