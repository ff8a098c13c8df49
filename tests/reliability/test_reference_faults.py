"""The TensorFlow reference process fails (issue 43): its answer is the tool's own failure,
never cached, and never served to a later run.

The tensorflow worker's reference process (``keras_run.references._tf_reference``, a child of the
worker) is stopped, the probe sent, and once the probe's call is waiting in the stopped
process's call queue (bytes in one of its pipes: no timing) the process is killed: the
worker's executor answers ``BrokenProcessPool``.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import os
import signal
import struct
import termios
import time

import psutil
import pytest

import dtype_explorer as dx
from dtype_explorer import cache, pool

WITHIN = 300


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    pool.shutdown(zygotes=False)
    yield
    pool.shutdown(zygotes=False)


def maximum():
    return dx.probe("ops.maximum", ["float32", "float64"], backend="tensorflow", timeout=WITHIN)


def reference_process() -> psutil.Process:
    """The tensorflow worker's reference process (started by a first op probe)."""
    assert dx.probe("ops.minimum", ["float32", "float64"], backend="tensorflow").ok
    (worker,) = pool.warm(["tensorflow"])["tensorflow"]["pids"]
    found = [
        child
        for child in psutil.Process(worker).children()
        if "spawn_main" in " ".join(child.cmdline())
    ]
    assert len(found) == 1, found
    return found[0]


def waiting_bytes(process: psutil.Process) -> int:
    """Bytes waiting in the pipes ``process`` reads (its call queue among them)."""
    total = 0
    for name in os.listdir(f"/proc/{process.pid}/fd"):
        path = f"/proc/{process.pid}/fd/{name}"
        try:
            if not os.readlink(path).startswith("pipe:"):
                continue
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            raw = fcntl.ioctl(descriptor, termios.FIONREAD, struct.pack("i", 0))
            total += struct.unpack("i", raw)[0]
        finally:
            os.close(descriptor)
    return total


def test_a_killed_reference_process_is_never_cached(own_cache):
    reference = reference_process()
    reference.send_signal(signal.SIGSTOP)
    try:
        idle = waiting_bytes(reference)
        with concurrent.futures.ThreadPoolExecutor(1) as run:
            future = run.submit(maximum)
            deadline = time.monotonic() + WITHIN  # a wait for a state, never an assertion
            while waiting_bytes(reference) <= idle and time.monotonic() < deadline:
                time.sleep(0.2)
            reference.kill()
            result = future.result(timeout=WITHIN)
    finally:
        if reference.is_running():
            reference.kill()
    said = result.expectation("tensorflow")
    assert said is not None and said.tool_failed, result.summary()
    assert "reference process failed" in said.error and "BrokenProcessPool" in said.error
    assert not pool.storable(result)
    assert cache.get(result.spec) is None
    pool.shutdown(zygotes=False)
    again = maximum()
    assert again.cached is False, again.summary()
    answered = again.expectation("tensorflow")
    assert answered.dtype == "float64" and not answered.tool_failed, again.summary()
    assert cache.get(again.spec) is not None  # a good answer is kept


def ended(process: psutil.Process) -> bool:
    """Whether ``process`` ends (gone, or a zombie nobody reaped yet), waiting for that state
    up to :data:`WITHIN` seconds (a state waited for, never a timed assertion)."""
    deadline = time.monotonic() + WITHIN
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def test_a_stopped_reference_process_goes_with_its_worker(own_cache):
    """Issue 43: a SIGSTOPped reference process whose worker was killed stayed, orphaned,
    until it ran again (its own watch of its parent cannot run while it is stopped)."""
    reference = reference_process()
    (worker,) = pool.warm(["tensorflow"])["tensorflow"]["pids"]
    reference.send_signal(signal.SIGSTOP)
    try:
        psutil.Process(worker).kill()
        assert ended(reference), f"the stopped reference process {reference.pid} stayed"
    finally:
        if reference.is_running():
            reference.kill()
