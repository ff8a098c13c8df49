"""Run a command and measure the memory of the processes it starts, as Binder's limit sees it.

A notebook run under nbval is a pytest process that starts a kernel, which starts the workers
(one per backend) and throwaway processes. The demo's memory is that of every descendant of
the command's own process: the kernel and everything it started. Each process's proportional
set size (PSS) counts a shared page once across the processes sharing it, so the sum is close
to what a container's memory limit charges; the plain sum of resident sizes (RSS), which
counts shared libraries once per process, is reported beside it as an upper bound.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

MIB = 1 << 20


@dataclass
class Usage:
    """What one measured run did: exit code, wall time, peak memory and its output."""

    returncode: int
    seconds: float
    peak_pss: int = 0
    peak_rss: int = 0
    peak_processes: dict[str, int] = field(default_factory=dict)
    output: str = ""

    def describe(self) -> str:
        parts = ", ".join(f"{name} {pss / MIB:.0f}" for name, pss in self.peak_processes.items())
        return (
            f"{self.seconds:.0f} s, peak {self.peak_pss / MIB:.0f} MiB PSS "
            f"({self.peak_rss / MIB:.0f} MiB RSS summed); at the peak, MiB PSS: {parts}"
        )


def run_measured(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    log: Path,
    interval: float = 0.25,
) -> Usage:
    """Run ``command``, sampling its descendants' memory every ``interval`` seconds.

    Output goes to ``log`` (a file, so no pipe fills up) and comes back in ``Usage.output``.
    A run that outlives ``timeout`` is killed with its descendants (return code -9).
    """
    started = time.monotonic()
    with log.open("wb") as out:
        proc = psutil.Popen(
            list(command), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT
        )
        usage = Usage(returncode=0, seconds=0.0)
        done = threading.Event()
        sampler = threading.Thread(target=_sample, args=(proc, usage, done, interval))
        sampler.start()
        try:
            usage.returncode = proc.wait(timeout=timeout)
        except psutil.TimeoutExpired:
            _kill_tree(proc)
            usage.returncode = -9
        finally:
            done.set()
            sampler.join()
    usage.seconds = time.monotonic() - started
    usage.output = log.read_text(errors="replace")
    return usage


#: A process's PSS is read again (``/proc/<pid>/smaps_rollup``: 10-20 ms of CPU for a process
#: that imported TensorFlow or jax, a walk of its page tables) only when its resident size moved
#: by this much since the last read, when a process started or ended, and every
#: :data:`REFRESH` samples; otherwise the last PSS read stands (the resident size, from
#: ``statm``, costs microseconds). A private page counts whole in both, so a PSS left standing
#: is off by less than this per process.
RSS_STEP = 4 * MIB
REFRESH = 8


def _sample(root: psutil.Process, usage: Usage, done: threading.Event, interval: float) -> None:
    read: dict[int, tuple[int, int]] = {}  # pid -> (RSS when its PSS was read, that PSS)
    labels: dict[int, str] = {}
    tick = 0
    while not done.is_set():
        try:
            children = root.children(recursive=True)
        except psutil.Error:
            return
        fresh = tick % REFRESH == 0 or {c.pid for c in children} != set(read)
        tick += 1
        pss = rss = 0
        by_process: dict[str, int] = {}
        now: dict[int, tuple[int, int]] = {}
        for child in children:
            try:
                resident = child.memory_info().rss
                known = read.get(child.pid)
                if fresh or known is None or abs(resident - known[0]) >= RSS_STEP:
                    known = (resident, child.memory_full_info().pss)
                if child.pid not in labels:
                    labels[child.pid] = _label(child)
            except psutil.Error:  # exited between listing and reading
                continue
            now[child.pid] = known
            pss += known[1]
            rss += resident
            by_process[f"{labels[child.pid]}[{child.pid}]"] = known[1]
        read = now
        if pss > usage.peak_pss:
            usage.peak_pss, usage.peak_processes = pss, by_process
        usage.peak_rss = max(usage.peak_rss, rss)
        done.wait(interval)


def _label(process: psutil.Process) -> str:
    """``kernel``, ``worker`` or the program's name, for the report."""
    cmdline = " ".join(process.cmdline())
    if "ipykernel" in cmdline:
        return "kernel"
    if "multiprocessing" in cmdline:
        return "worker"
    return process.name()


def _kill_tree(root: psutil.Process) -> None:
    processes = [*root.children(recursive=True), root]
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(processes, timeout=10)
