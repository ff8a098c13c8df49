"""How a worker's last start ended, read back from its log (the pool's tests run real workers;
these pin the reading on logs written the way a worker and faulthandler write them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dtype_explorer.runtime import _worker_log as worker_log

STARTED = "--- numpy worker {pid} started Mon Nov 30 12:00:00 2026\n"
READY = "--- numpy worker {pid} ready\n"
HUNG = "Timeout (0:05:00)!\nThread 0x00007f (most recent call first):\n  File x, line 1 in init\n"


def write(tmp_path: Path, *parts: str) -> Path:
    log = tmp_path / "numpy.log"
    log.write_text("".join(parts))
    return log


@pytest.mark.parametrize(
    ("parts", "ending"),
    [
        ([STARTED.format(pid=1), READY.format(pid=1), "a probe's chatter\n"], "ready"),
        ([STARTED.format(pid=1), "importing...\n", HUNG], "timed-out"),
        ([STARTED.format(pid=1), "Fatal Python error: Segmentation fault\n"], "died-starting"),
        ([], "died-starting"),  # gone before it wrote anything
        # the last start counts: an earlier worker's ready line is not this one's
        ([STARTED.format(pid=1), READY.format(pid=1), STARTED.format(pid=2), HUNG], "timed-out"),
        # a probe printing "Timeout (" after the worker was ready is not a start deadline
        ([STARTED.format(pid=1), READY.format(pid=1), "Timeout (0:00:01)!\n"], "ready"),
    ],
    ids=["ready", "hung", "died", "empty", "last-start", "later-timeout-text"],
)
def test_how_the_last_start_ended(tmp_path, parts, ending):
    assert worker_log.last_start(write(tmp_path, *parts), "numpy", since=0) == ending


def test_text_before_the_pool_began_is_not_read(tmp_path):
    earlier = STARTED.format(pid=1) + HUNG
    log = write(tmp_path, earlier, "Fatal Python error: Aborted\n")
    assert worker_log.last_start(log, "numpy", since=0) == "timed-out"
    assert worker_log.last_start(log, "numpy", since=len(earlier)) == "died-starting"


def test_a_log_started_afresh_is_read_from_its_beginning(tmp_path):
    log = write(tmp_path, STARTED.format(pid=3), HUNG)
    assert worker_log.last_start(log, "numpy", since=10 * worker_log.size(log)) == "timed-out"


def test_a_worker_opens_its_log_with_its_start_line_and_rotates_long_ones(tmp_path):
    log = tmp_path / "workers" / "numpy.log"
    with worker_log.open_for_worker(log, "numpy") as file:
        file.write(worker_log.ready_line("numpy"))
    assert worker_log.last_start(log, "numpy", since=0) == "ready"
    log.write_bytes(b"x" * (worker_log.MAX_BYTES + 1))
    with worker_log.open_for_worker(log, "numpy"):
        pass
    assert worker_log.size(log) < 200
    assert worker_log.size(worker_log.rotated(log)) == worker_log.MAX_BYTES + 1  # kept
