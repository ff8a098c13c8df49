"""How TensorFlow references are run: ``tf.experimental.numpy`` as it intends, with its NumPy
behaviour switched on, in a process of its own.

``tnp`` calls NumPy methods on its tensors (``tnp.sqrt`` of an int32 tensor calls
``.astype``), which exist only after ``tnp.experimental_enable_numpy_behavior()``. That switch
is process-wide and also changes TensorFlow's dtype promotion, so it is never made in a
process that answers for Keras (a backend worker, the user's kernel). Every TensorFlow
reference (the probe's expectation of an op probed on tensorflow, the promotion table's
column) runs here instead: one long-lived reference process per calling process, started on
first use (importing TensorFlow once), restarted if it died, and gone with its parent. It is
the one owner of that switch; the probe and the promotion table both call :func:`submit`.

In a backend worker the reference process writes to the worker's log (it inherits its
output); a caller in the kernel names a log (``log``) and a process name (``process_name``,
the pool's, so that a spawn start leaves the user's main module out).

>>> numpy_behaviour_on()   # never in the process that answers for Keras
False
"""

from __future__ import annotations

import atexit
import concurrent.futures
import multiprocessing
import multiprocessing.context
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["NUMPY_BEHAVIOUR", "TIMEOUT", "numpy_behaviour_on", "run", "stop", "submit"]

#: How the reference process switches TensorFlow's NumPy behaviour on (NumPy 2's promotion,
#: as ``jax.numpy`` and NumPy themselves).
NUMPY_BEHAVIOUR: dict[str, Any] = {"dtype_conversion_mode": "all"}
#: Seconds one reference call may take, the reference process's start (TensorFlow's import on
#: a busy machine) included.
TIMEOUT = 300.0

_lock = threading.Lock()
_running: dict[str, concurrent.futures.ProcessPoolExecutor] = {}


def submit(
    fn: Any, *args: Any, log: str | Path | None = None, process_name: str | None = None
) -> concurrent.futures.Future:
    """Run ``fn(*args)`` in this process's TensorFlow reference process, NumPy behaviour on.

    Args:
        fn: a module-level function (it travels by reference) and its picklable ``args``.
        log: where the reference process's output goes (default: this process's own).
        process_name: the reference process's name (default: multiprocessing's).

    Returns:
        A future of what ``fn`` returned (a crashed reference process: ``BrokenProcessPool``;
        the next call starts a fresh one).
    """
    with _lock:
        executor = _running.get("executor")
        if executor is None or getattr(executor, "_broken", False):
            executor = concurrent.futures.ProcessPoolExecutor(
                max_workers=1,
                mp_context=_context(process_name),
                initializer=_start,
                initargs=(None if log is None else str(log), os.getpid()),
            )
            _running["executor"] = executor
        return executor.submit(fn, *args)


def run(fn: Any, *args: Any, timeout: float = TIMEOUT, **where: Any) -> Any:
    """:func:`submit`, waiting up to ``timeout`` seconds for the answer."""
    return submit(fn, *args, **where).result(timeout=timeout)


def numpy_behaviour_on() -> bool:
    """Whether TensorFlow's NumPy behaviour is on in this process (``tf.Tensor.astype``
    exists, or NumPy-style promotion is on); ``False`` where TensorFlow is not imported."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return False
    from tensorflow.python.framework import ops

    return hasattr(tf.Tensor, "astype") or bool(ops.is_numpy_style_type_promotion())


def stop(wait: bool = False) -> None:
    """Stop this process's reference process (the next :func:`submit` starts a new one);
    ``wait``: until it has exited (``pool.shutdown`` leaves no process behind)."""
    with _lock:
        executor = _running.pop("executor", None)
    if executor is not None:
        executor.shutdown(wait=wait, cancel_futures=True)


atexit.register(stop)  # before teardown, so the executor's own cleanup finds its modules


def _context(name: str | None) -> multiprocessing.context.SpawnContext:
    """Spawn, the process named ``name``."""
    return multiprocessing.get_context("spawn") if name is None else _Named(name)


class _Named(multiprocessing.context.SpawnContext):
    """Spawn, every process it starts named ``name``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def Process(self, *args: Any, **kwargs: Any) -> Any:
        return multiprocessing.context.SpawnProcess(*args, name=self.name, **kwargs)


def _start(log: str | None, parent: int) -> None:
    """In the reference process, before any call: its output into ``log``, an exit with its
    parent, TensorFlow imported with its NumPy behaviour on."""
    if log is not None:
        path = Path(log)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as out:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
    threading.Thread(target=_exit_with, args=(parent,), name="dx-parent-watch", daemon=True).start()
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # it warns about every op it does not cover
    tf.experimental.numpy.experimental_enable_numpy_behavior(**NUMPY_BEHAVIOUR)


def _exit_with(parent: int) -> None:
    """Leave no orphan: exit when the parent is gone (killed mid-probe by its time limit)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)
