"""Where a whole test run's time goes: the rest tier run as ``./dev.sh test`` runs it (two
pytest-xdist processes, a test file at a time, the lessons' files together), every test's
setup, call and teardown written down as it ends (which process, when it started and stopped),
then summed per test file and per process (issue 36: the whole CI run under 18 min).

Where the machine lets it (Linux, a cgroup folder this user may create: cgroup v1's
``cpuacct``), each pytest process moves itself into a cgroup of its own at start, so every
process it starts (workers, zygotes, kernels, scripts, Chromium, pip) is counted with it, and
each report carries the CPU seconds that whole tree used during that phase (``cpu``): a test's
real cost, children included, where its wall time also holds waiting for the other process.
Elsewhere the CPU columns are left out.

    python benchmarks/run_timeline.py                   # the rest tier, then the summary
    python benchmarks/run_timeline.py --read FILE       # the summary of a run written down
    python benchmarks/run_timeline.py -- -k audit      # pytest's options after ``--``

This file is also the pytest plugin that writes the timeline (``-p run_timeline``, found on
``PYTHONPATH=benchmarks``): in pytest-xdist's controller each report names the process that ran
it. What the summary tells: whether the two processes end together (the run is as short as its
work allows) or one waits for the other, and which files hold the work.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Where the plugin writes the timeline (one JSON line a report), set by :func:`main`.
ENV_FILE = "DX_TEST_TIMELINE"
#: cgroup v1's CPU accounting: a folder made there is a cgroup whose ``cpuacct.usage`` counts
#: the nanoseconds of CPU of every process in it, and a process's children start in its cgroup.
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class _Cgroup:
    """This pytest process's own CPU-accounting cgroup, or nothing where none can be made."""

    folder: Path | None = None
    #: The CPU seconds read when the current test phase began.
    mark: float | None = None

    @classmethod
    def enter(cls) -> None:
        for stale in CPUACCT.glob("dx-timeline-*"):  # an earlier run's, its process gone
            if not Path(f"/proc/{stale.name.rsplit('-', 1)[-1]}").exists():
                with contextlib.suppress(OSError):
                    stale.rmdir()
        name = f"dx-timeline-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{os.getpid()}"
        try:
            folder = CPUACCT / name
            folder.mkdir()
            (folder / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            return
        cls.folder = folder

    @classmethod
    def seconds(cls) -> float | None:
        if cls.folder is None:
            return None
        return int((cls.folder / "cpuacct.usage").read_text()) / 1e9

    @classmethod
    def leave(cls) -> None:
        """Back to the parent cgroup; the folder is removed once nothing is left in it."""
        if cls.folder is None:
            return
        try:
            (cls.folder.parent / "cgroup.procs").write_text(str(os.getpid()))
            cls.folder.rmdir()
        except OSError:
            pass  # a process it started still runs there: the folder stays, empty soon


def pytest_configure(config) -> None:
    if os.environ.get(ENV_FILE) and (os.environ.get("PYTEST_XDIST_WORKER") or not _xdist(config)):
        _Cgroup.enter()


def pytest_unconfigure(config) -> None:
    _Cgroup.leave()


def _xdist(config) -> bool:
    return bool(getattr(config.option, "numprocesses", None))


def pytest_runtest_logstart(nodeid, location) -> None:
    _Cgroup.mark = _Cgroup.seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """The CPU of this process's tree since the phase began, on the report (``cpu``), which
    pytest-xdist carries to its controller with the report's other attributes."""
    outcome = yield
    now = _Cgroup.seconds()
    if now is not None and _Cgroup.mark is not None:
        outcome.get_result().cpu = now - _Cgroup.mark
    _Cgroup.mark = now


def pytest_runtest_logreport(report) -> None:
    """One line a report, in the process that runs pytest: pytest-xdist's controller
    (``report.node``: the process that ran the test), or pytest itself (``--processes 0``)."""
    out = os.environ.get(ENV_FILE)
    if not out or os.environ.get("PYTEST_XDIST_WORKER"):  # the controller writes a worker's
        return
    node = getattr(report, "node", None)
    line = {
        "id": report.nodeid,
        "when": report.when,
        "process": getattr(getattr(node, "gateway", None), "id", "main"),
        "start": report.start,
        "stop": report.stop,
        "seconds": report.duration,
        "cpu": getattr(report, "cpu", None),
    }
    with open(out, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def summary(path: Path, top: int) -> str:
    """Each process's end, busy seconds (and CPU seconds of its tree, where counted), then the
    ``top`` test files by seconds."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if not rows:
        return f"{path}: no test reported"
    counted = any(r.get("cpu") is not None for r in rows)
    cpu = "| CPU s " if counted else ""
    t0 = min(r["start"] for r in rows)
    lines = [
        f"| process | tests | busy s {cpu}| ends at s |",
        "|---|---:|---:|" + "---:|" * counted + "---:|",
    ]
    for process in sorted({r["process"] for r in rows}):
        mine = [r for r in rows if r["process"] == process]
        tests = len({r["id"] for r in mine})
        busy = sum(r["seconds"] for r in mine)
        used = f"| {sum(r.get('cpu') or 0 for r in mine):.0f} " if counted else ""
        end = max(r["stop"] for r in mine) - t0
        lines.append(f"| {process} | {tests} | {busy:.0f} {used}| {end:.0f} |")
    files: dict[str, list] = collections.defaultdict(lambda: [0.0, float("inf"), 0.0, "", 0.0])
    for r in rows:
        entry = files[r["id"].split("::", 1)[0]]
        entry[0] += r["seconds"]
        entry[1] = min(entry[1], r["start"] - t0)
        entry[2] = max(entry[2], r["stop"] - t0)
        entry[3] = r["process"]
        entry[4] += r.get("cpu") or 0.0
    total = sum(e[0] for e in files.values())
    used = (
        f", {sum(e[4] for e in files.values()):.0f} CPU s (their processes' trees)"
        if counted
        else ""
    )
    lines += ["", f"all files: {total:.0f} s of tests{used}", ""]
    lines += [
        f"| test file | s {cpu}| process | from s | to s |",
        "|---|---:|" + "---:|" * counted + "---|---:|---:|",
    ]
    ranked = sorted(files.items(), key=lambda item: -item[1][0])[:top]
    for name, (seconds, start, stop, process, spent) in ranked:
        used = f"| {spent:.1f} " if counted else ""
        lines.append(f"| `{name}` | {seconds:.1f} {used}| {process} | {start:.0f} | {stop:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read", type=Path, help="summarise this timeline; run nothing")
    parser.add_argument("--top", type=int, default=25, help="how many files to list")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's own options")
    args = parser.parse_args()
    if args.read is not None:
        print(summary(args.read, args.top))
        return
    out = Path(tempfile.mkdtemp(prefix="dx-timeline-")) / "timeline.jsonl"
    out.touch()
    env = {
        **os.environ,
        ENV_FILE: str(out),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")])
        ),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as dev.sh runs the tests
    command = [
        sys.executable, "-m", "pytest", "--tier=rest", "-n", str(args.processes),
        "--dist", "loadfile", "--no-loadscope-reorder", "-p", "run_timeline", "-q",
        *args.pytest_args,
    ]  # fmt: skip
    load = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, check=False)
    wall = time.monotonic() - started
    print(f"\nrest tier: {wall:.0f} s wall, exit {done.returncode}; load {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; timeline: {out}\n")  # fmt: skip
    print(summary(out, args.top))
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
