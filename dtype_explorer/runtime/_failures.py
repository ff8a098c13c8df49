"""A worker's answer, or its failure, made into a ``ProbeResult``: timeouts, crashes, workers
stopped on purpose or at their start deadline each become a result that says what happened
(``ErrorInfo(where="worker")``), and :func:`storable` decides what the cache may keep. A
failure of a worker is never presented as Keras's answer.

>>> from dtype_explorer.records import ProbeSpec
>>> lost = failure(ProbeSpec(target="Dense"), "timeout", "TimeoutError", "no answer")
>>> lost.status, lost.error.where, storable(lost)
('timeout', 'worker', False)
"""

from __future__ import annotations

import builtins
import concurrent.futures
import contextlib
import signal
import warnings
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pebble

from dtype_explorer.records import UNSUPPORTED, ErrorInfo, ProbeResult, ProbeSpec
from dtype_explorer.runtime import _spawn as spawn
from dtype_explorer.runtime import _worker as worker
from dtype_explorer.runtime import _worker_log as worker_log
from dtype_explorer.runtime import cache, engines
from dtype_explorer.runtime._mac import CacheKeyError
from dtype_explorer.versions import versions

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


def deliver_answer(
    task: Future, out: Future, spec: ProbeSpec, seconds: float, slot: str, *, cacheable: bool
) -> None:
    """Turn the answer of worker ``slot`` (or its failure) into a ``ProbeResult``; store it,
    unless the worker had run user code (tainted: its answers are never stored)."""
    if out.done():  # cancelled by the caller
        return
    tainted = False
    try:
        answer = dict(task.result())
        replace = answer.pop(worker.REPLACE_ME, False)
        if replace:
            spawn.retire(slot, task, replace if isinstance(replace, str) else "")
        tainted = bool(answer.pop(worker.TAINTED, False))
        result = worker.read_answer(answer)
        spawn.devices[spawn.group_of(slot)] = result.device
    except concurrent.futures.CancelledError:
        if task not in spawn.shut_down:
            return
        result = lost_worker(spec, slot, spawn.WorkerShutdown(spawn.SHUT_DOWN), on_purpose=True)
    except concurrent.futures.TimeoutError:
        message = (
            f"no answer within {seconds:g} s; the {spec.backend} worker was stopped and "
            "will be restarted for the next probe (set timeout= to allow longer)"
        )
        result = failure(spec, "timeout", "TimeoutError", message)
    except (pebble.ProcessExpired, BrokenProcessPool, spawn.WorkerShutdown) as exc:
        result = lost_worker(spec, slot, exc, on_purpose=task in spawn.shut_down)
    except BaseException as exc:  # a bug in the worker's code, or a
        # BaseException that got out of it: reported, never raised into pebble's thread
        result = failure(spec, "error", type(exc).__name__, str(exc)[:2000])
    if cacheable and not tainted and storable(result):  # before answering: a repeat is a hit
        with cache_optional():
            cache.put(result)
    with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled meanwhile
        out.set_result(result)


def deliver_call(slot: str, out: Future, task: Future) -> None:
    """``task``'s outcome passed on to ``out`` (the future ``pool.call`` returned); a worker
    lost while it ran the task (``ProcessExpired``) has its log moved aside first, before
    pebble starts the next worker (it runs the task's callbacks first), and the path kept on
    the error for :func:`lost_in_call`."""
    if task.cancelled():
        out.cancel()
        return
    error = task.exception()
    if isinstance(error, pebble.ProcessExpired):
        error.log = spawn.kept_log(slot)  # type: ignore[attr-defined]
    with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled meanwhile
        if error is None:
            out.set_result(task.result())
        else:
            out.set_exception(error)


def lost_in_call(error: BaseException) -> tuple[str, Path | None] | None:
    """How the worker running a ``pool.call`` ended, and where its output was kept, where
    ``error`` (what its future raised) says it was lost before answering (``os._exit``, a
    crash, the memory killer); ``None`` for any other error.

    >>> lost_in_call(ValueError("the function's own error")) is None
    True
    >>> lost_in_call(pebble.ProcessExpired("Abnormal termination", code=-9))
    ('was killed by SIGKILL', None)
    """
    if not isinstance(error, pebble.ProcessExpired):
        return None
    return how_it_ended(error.exitcode), getattr(error, "log", None)


@contextlib.contextmanager
def cache_optional() -> Iterator[None]:
    """The cache only saves time: an unusable one (read-only, locked, truncated, damaged)
    warns, never fails."""
    try:
        yield
    except Exception as exc:  # OSError, sqlite3.Error, a damaged database
        fix = (
            "(its key file is named above)"
            if isinstance(exc, CacheKeyError)
            else f"Set ${cache.ENV_DIR} to a writable directory."
        )
        warnings.warn(
            f"dtype-explorer's result cache is unusable ({exc}); running live. {fix}",
            stacklevel=4,
        )


def storable(result: ProbeResult) -> bool:
    """Whether ``result`` is an answer Keras itself gave (``ok``, a Keras error, ``invalid``),
    which the cache may keep: not a timeout, crash or shutdown, not a worker, transfer or
    engine problem (an engine whose files changed), not dtype-explorer's own failure
    (``where="tool"``, or an expectation its reference process failed to make: a
    killed TensorFlow reference process), not a resource failure of the process
    (:data:`TRANSIENT_ERRORS`, or a
    message saying it ran out of memory), and not computed while a user's layer had changed the
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
    if any(expectation.tool_failed for expectation in result.expectations):
        return False  # a reference the tool's own process failed to run (never a library's)
    error = result.error
    if error is None:
        return True
    if error.where in ("worker", "transfer", "engine", "tool") or error.type in TRANSIENT_ERRORS:
        return False
    return not any(text in error.message for text in _TRANSIENT_TEXT)


def lost_worker(spec: ProbeSpec, slot: str, exc: BaseException, *, on_purpose: bool) -> ProbeResult:
    """The answer for a probe whose worker went away: stopped on purpose (``shutdown``,
    ``configure``; pebble may then report the killed worker as expired or the pool as broken),
    stopped at its start deadline, or died on its own."""
    if on_purpose or isinstance(exc, spawn.WorkerShutdown):
        return failure(spec, "error", "WorkerShutdown", spawn.SHUT_DOWN)
    if isinstance(exc, pebble.ProcessExpired):
        return failure(spec, "crashed", "WorkerCrashed", _crash_message(spec, slot, exc.exitcode))
    status, kind, message = lost_before_answering(slot, exc)
    return failure(spec, status, kind, message)


def lost_before_answering(slot: str, exc: BaseException) -> tuple[str, str, str]:
    """``(status, error type, message)`` for worker ``slot`` that pebble reports only as gone
    (the pool broke): its log tells whether it was starting, hit its start deadline, or had
    started and died (before pebble saw it take the task)."""
    backend = spawn.backend_of(slot)
    start = spawn.starts[slot]  # set when its pool was made, which every task went through
    ending = worker_log.last_start(start.log, backend, since=start.log_offset)
    if ending == "timed-out":
        return (
            "timeout",
            "WorkerStartTimeout",
            f"the {backend} worker did not finish starting (importing Keras on {backend}) "
            f"within {start.deadline:g} s and was stopped; the next probe starts a new one "
            f"(pool.configure(start_timeout=...) allows longer). Where it hung: {start.log}",
        )
    kept = spawn.kept_log(slot)
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


def how_it_ended(exitcode: int | None) -> str:
    """How a worker process ended, from its exit code as pebble reports it (``ProcessExpired``).

    >>> how_it_ended(-9), how_it_ended(3), how_it_ended(spawn.ZERO_EXIT)
    ('was killed by SIGKILL', 'exited with code 3', 'exited with code 0')
    """
    if exitcode == spawn.ZERO_EXIT:
        return "exited with code 0"
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def _crash_message(spec: ProbeSpec, slot: str, exitcode: int | None) -> str:
    how = how_it_ended(exitcode)
    return (
        f"the {spec.backend} worker {how} while running this probe (a segfault, os._exit "
        "or running out of memory); it is restarted for the next probe. Its output is in "
        f"{spawn.kept_log(slot)}"
    )


def failure(spec: ProbeSpec, status: str, kind: str, message: str) -> ProbeResult:
    """A result of ``spec`` that says its worker gave no answer (``where="worker"``)."""
    return ProbeResult(
        spec=spec,
        status=status,  # type: ignore[arg-type]
        backend=spec.backend,
        device=spawn.devices.get(spawn.group(spec.backend, spec.engine), "unknown"),
        verdict="error",
        error=ErrorInfo(type=kind, message=message, where="worker"),
        versions=_versions(spec),
    )


def unsupported(spec: ProbeSpec, message: str) -> ProbeResult:
    """The answer of a backend that cannot run ``spec`` at all (the engine's Keras has no such
    backend): ``not supported here`` (``ProbeResult.unsupported``), ``message`` saying why;
    no worker ran, nothing is cached."""
    return ProbeResult(
        spec=spec,
        status="invalid",
        backend=spec.backend,
        verdict="error",
        error=ErrorInfo(type="NotSupported", message=message, where=UNSUPPORTED),
        versions=_versions(spec),
    )


def _versions(spec: ProbeSpec) -> dict[str, str]:
    """The versions a result of ``spec`` carries: the backend's, and its engine's Keras."""
    found = versions(spec.backend)
    engine = engines.get(spec.engine) if spec.engine is not None else None
    return found if engine is None else {**found, **engine.versions()}
