"""How many workers a backend runs by default: the CPUs this process may use (its affinity, a
cgroup's CPU quota) and the memory available (``MemAvailable``, a cgroup's limit), shared
among the backends that run workers. ``pool.default_workers_per_backend`` asks it once.

>>> 1 <= default_workers(["numpy"]) <= MAX_DEFAULT_WORKERS
True
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

#: What one worker may hold, in MiB: its measured resident set after importing its backend
#: and probing Dense, Conv2D, LSTM and MultiHeadAttention (numpy 273, jax 394, tensorflow
#: 698, torch 473, openvino 328 on Linux x86-64, CPU; ``benchmarks/README.md``), with room to
#: grow over a survey (jax's compile cache, TensorFlow's graphs, OpenVINO's compiled ops). The
#: default number of workers per backend leaves room for this much per worker.
WORKER_MIB = {"numpy": 400, "jax": 800, "tensorflow": 1000, "torch": 700, "openvino": 500}
#: A worker that holds more than this many times :data:`WORKER_MIB` after a probe (a user's
#: layer kept arrays alive) is replaced once it has answered; ``$DTYPE_EXPLORER_WORKER_MIB``
#: sets the budget in MiB for every backend instead.
MEMORY_BUDGET_FACTOR = 2
ENV_WORKER_MIB = "DTYPE_EXPLORER_WORKER_MIB"
#: The share of the memory available at the first probe that the default lets workers take.
MEMORY_SHARE = 0.5
#: The most workers per backend the default chooses, and the most ``configure`` accepts.
MAX_DEFAULT_WORKERS = 8
MAX_WORKERS = 64


def default_workers(backends: Sequence[str]) -> int:
    """Workers per backend for ``backends``: their share of the CPUs, and no more workers of
    all of them than :data:`MEMORY_SHARE` of the memory available holds (:data:`WORKER_MIB`
    each); at least 1, at most :data:`MAX_DEFAULT_WORKERS`.

    Args:
        backends: the backends that run workers (at least one).

    Returns:
        The number of workers per backend.

    >>> default_workers(["numpy"] * 10_000)   # more backends than cores: one each
    1
    """
    by_cores = cpus() // len(backends)
    per_round = sum(WORKER_MIB.get(b, max(WORKER_MIB.values())) for b in backends) << 20
    by_memory = int(available_memory() * MEMORY_SHARE // per_round)
    return max(1, min(by_cores, by_memory, MAX_DEFAULT_WORKERS))


def memory_budget(backend: str) -> int:
    """Bytes a worker of ``backend`` may hold after a probe before it is replaced:
    ``$DTYPE_EXPLORER_WORKER_MIB`` MiB, else :data:`MEMORY_BUDGET_FACTOR` times its
    :data:`WORKER_MIB`, capped for the machine: no more than :data:`MEMORY_SHARE` of its
    physical memory shared among its CPUs (a worker each), and never under its
    :data:`WORKER_MIB` (what it holds once started).

    Args:
        backend: the worker's backend.

    Returns:
        The budget in bytes.

    >>> memory_budget("numpy") >> 20 if ENV_WORKER_MIB not in os.environ else 800
    800
    """
    override = os.environ.get(ENV_WORKER_MIB, "").strip()
    if override.isdigit() and int(override) > 0:
        return int(override) << 20
    floor = WORKER_MIB.get(backend, max(WORKER_MIB.values())) << 20
    by_machine = int(physical_memory() * MEMORY_SHARE // cpus())
    return max(floor, min(MEMORY_BUDGET_FACTOR * floor, by_machine))


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux: ``/proc/self/statm``, what
    ``psutil.Process().memory_info().rss`` reads there), or ``None`` where the system does not
    say (no worker is then replaced for its memory)."""
    with contextlib.suppress(OSError, ValueError, IndexError, AttributeError):
        with open("/proc/self/statm", "rb") as statm:  # read after every probe: no pathlib
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    return None


def physical_memory() -> int:
    """Bytes of physical memory (8 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 8 << 30


def cpus() -> int:
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


def available_memory() -> int:
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
