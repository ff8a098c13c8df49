"""A worker's log: where its output goes, the lines it writes as it starts, and how its last
start ended, read back by the kernel when pebble only says that the worker is gone.

A worker writes ``--- <backend> worker <pid> started <time>`` when it begins and
``--- <backend> worker <pid> ready`` once its backend imported. A worker that hit its start
deadline left faulthandler's ``Timeout (h:mm:ss)!`` and the tracebacks of its threads
between the two.

>>> last_start(Path("numpy.log"), "numpy", since=0)   # doctest: +SKIP
'timed-out'
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import BinaryIO, Literal

#: A log longer than this is moved to ``<name>.1`` (the one before is dropped) and started
#: afresh by the next worker.
MAX_BYTES = 1 << 20
#: How much of a log's end is read back.
_TAIL_BYTES = 64_000
#: What faulthandler writes when its timer ends a process.
_DEADLINE = re.compile(r"^Timeout \(\d+:\d\d:\d\d(\.\d+)?\)!$", re.MULTILINE)

Ending = Literal["ready", "timed-out", "died-starting"]


def open_for_worker(path: Path, backend: str) -> BinaryIO:
    """Open ``path`` for a starting worker (a long one is rotated first, see :func:`keep`) and
    write its start line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keep(path)
    log = path.open("ab", buffering=0)
    log.write(f"--- {backend} worker {os.getpid()} started {time.ctime()}\n".encode())
    return log


def rotated(path: Path) -> Path:
    """Where a long log is kept when a new one starts: ``<name>.1``."""
    return path.with_name(f"{path.name}.1")


def keep(path: Path) -> Path:
    """The file that keeps the log's present text: the log itself, or, when it is over
    :data:`MAX_BYTES` (the next worker would start afresh), :func:`rotated` once it is moved
    there now. The pool calls it when a worker died, so that the crash message names the file
    its traceback will stay in."""
    if size(path) <= MAX_BYTES:
        return path
    try:
        os.replace(path, rotated(path))
    except OSError:
        return path
    return rotated(path)


def ready_line(backend: str) -> bytes:
    """The line a worker writes once its backend imported."""
    return f"--- {backend} worker {os.getpid()} ready\n".encode()


def last_start(path: Path, backend: str, *, since: int) -> Ending:
    """How the last worker started after byte ``since`` ended its start: ``ready``, stopped at
    its deadline (``timed-out``) or gone before either (``died-starting``, also when it wrote
    nothing at all)."""
    text = _tail(path, since)
    starts = list(re.finditer(rf"^--- {re.escape(backend)} worker (\d+) started", text, re.M))
    if not starts:
        return "died-starting"
    last = starts[-1]
    after = text[last.end() :]
    if f"--- {backend} worker {last.group(1)} ready" in after:
        return "ready"
    return "timed-out" if _DEADLINE.search(after) else "died-starting"


def size(path: Path) -> int:
    """The log's size in bytes (0 when there is none yet)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _tail(path: Path, since: int) -> str:
    length = size(path)
    if length < since:  # a worker started the log afresh since then
        since = 0
    try:
        with path.open("rb") as file:
            file.seek(max(since, length - _TAIL_BYTES))
            return file.read().decode(errors="replace")
    except OSError:
        return ""
