"""Where a whole test run's time goes: the rest tier run as ``./dev.sh test`` runs it (two
pytest-xdist processes, a test file at a time, the lessons' files together), every test's
setup, call and teardown written down as it ends (which process, when it started and stopped),
then summed per test file and per process (issue 36: the whole CI run under 18 min).

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
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Where the plugin writes the timeline (one JSON line a report), set by :func:`main`.
ENV_FILE = "DX_TEST_TIMELINE"


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
    }
    with open(out, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def summary(path: Path, top: int) -> str:
    """Each process's end and busy seconds, then the ``top`` test files by seconds."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if not rows:
        return f"{path}: no test reported"
    t0 = min(r["start"] for r in rows)
    lines = ["| process | tests | busy s | ends at s |", "|---|---:|---:|---:|"]
    for process in sorted({r["process"] for r in rows}):
        mine = [r for r in rows if r["process"] == process]
        tests = len({r["id"] for r in mine})
        busy = sum(r["seconds"] for r in mine)
        end = max(r["stop"] for r in mine) - t0
        lines.append(f"| {process} | {tests} | {busy:.0f} | {end:.0f} |")
    files: dict[str, list] = collections.defaultdict(lambda: [0.0, float("inf"), 0.0, ""])
    for r in rows:
        entry = files[r["id"].split("::", 1)[0]]
        entry[0] += r["seconds"]
        entry[1] = min(entry[1], r["start"] - t0)
        entry[2] = max(entry[2], r["stop"] - t0)
        entry[3] = r["process"]
    total = sum(e[0] for e in files.values())
    lines += ["", f"all files: {total:.0f} s of tests", ""]
    lines += ["| test file | s | process | from s | to s |", "|---|---:|---|---:|---:|"]
    ranked = sorted(files.items(), key=lambda item: -item[1][0])[:top]
    for name, (seconds, start, stop, process) in ranked:
        lines.append(f"| `{name}` | {seconds:.1f} | {process} | {start:.0f} | {stop:.0f} |")
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
