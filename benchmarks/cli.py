"""The front ends' own cost: the CLI and a script, cold and cached, against bare Python and bare
Keras measured in the same run.

    python benchmarks/cli.py                 # 3 repeats each, medians
    python benchmarks/cli.py --repeats 5 --json
    python benchmarks/cli.py --first --repeats 5    # only the first run ever, against bare Keras

Every case is a fresh process (``python -c``), timed wall-clock from start to exit; its
``RSS`` is the peak resident memory of that process alone (``RUSAGE_SELF`` written at exit:
workers and helper processes are not counted). Bytecode is written and reused (as for an
installed package, whatever ``PYTHONDONTWRITEBYTECODE`` says here), after one unmeasured
warm-up run of each kind. Cases:

* ``bare python``: ``pass``.
* ``bare keras``: ``import keras`` on ``KERAS_BACKEND=numpy``; ``+ call``: and one
  ``Dense(4)`` call on a uint8 batch (what a user pays to answer the question by hand).
* ``cli cold``: ``dtype-explorer probe Dense --input-dtype uint8 --backend numpy --kwargs
  '{"units": 4}'`` with an empty cache directory that already holds the Keras snapshot (a new
  question); ``cli first run``: the same with nothing in it (the snapshot is made too).
* ``cli cached``: the same command again (the answer comes from the cache).
* ``script cold`` / ``script cached``: ``import dtype_explorer as dx; dx.probe("Dense",
  "uint8", backend="numpy", kwargs={"units": 4})``.

``--first`` measures only ``bare keras (numpy) + call`` and ``cli first run``, alternating,
the CLI through the ``dtype-explorer`` script's entry point (``frontends.command:main``), with
the CPU seconds of each process and its children (workers, a snapshot run) beside the wall; it
checks that each first run left the Keras snapshot in its cache directory (issue 27.2: the
snapshot is written by the worker that answers, not by a second Keras import first).

Goals (issue 18): cli cached <= 0.5 s and <= 150 MB; cli cold <= 1.3x ``bare keras + call``.
The machine may be shared: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Run first in every measured process: its peak RSS (KB on Linux) written at exit.
_RSS = (
    "import atexit, os, resource\n"
    "atexit.register(lambda: open(os.environ['DX_BENCH_RSS'], 'w').write("
    "str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))\n"
)
_CLI = "from dtype_explorer.frontends.cli import app\napp(prog_name='dtype-explorer')\n"
#: The ``dtype-explorer`` script's entry point (a cached answer without typer, else the app).
_COMMAND = "from dtype_explorer.frontends.command import main\nmain()\n"
ARGS = [
    "probe",
    "Dense",
    "--input-dtype",
    "uint8",
    "--backend",
    "numpy",
    "--kwargs",
    '{"units": 4}',
]
_BARE_CALL = (
    "import keras, numpy as np\nkeras.layers.Dense(4)(np.arange(8, dtype='uint8').reshape(2, 4))\n"
)
_SCRIPT = (
    "import dtype_explorer as dx\n"
    "r = dx.probe('Dense', 'uint8', backend='numpy', kwargs={'units': 4})\n"
    "assert r.ok, r\n"
)


#: CPU seconds (user + system) of each measured process and its waited-for children, by code.
CPU: dict[str, list[float]] = {}


def measure(code: str, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One fresh process: (wall seconds, peak RSS of that process in MB); the CPU seconds of it
    and its children are added to :data:`CPU` under the code."""
    with tempfile.NamedTemporaryFile(suffix=".rss", delete=False) as handle:
        rss_file = handle.name
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _RSS + code, *args],
        env={**env, "DX_BENCH_RSS": rss_file},
        # not in a checkout: ``python -c`` puts the cwd first on sys.path (--root is measured)
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(code, []).append(
        after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    )
    if done.returncode != 0:
        raise RuntimeError(f"{code!r} {args} failed:\n{done.stdout}\n{done.stderr}")
    rss_kb = int(Path(rss_file).read_text() or 0)
    os.unlink(rss_file)
    return wall, rss_kb / 1024


def _base_env(root: Path, work: Path) -> dict[str, str]:
    skipped = ("KERAS_", "DTYPE_EXPLORER_", "PYTHONDONTWRITEBYTECODE")
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(skipped)},
        "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p),
        # bytecode is written and reused, as for an installed package (pip compiles it)
        "PYTHONPYCACHEPREFIX": str(work / "pycache"),
    }


def run_first(repeats: int, root: Path) -> dict:
    """``bare keras (numpy) + call`` against the CLI's first run ever (a fresh cache directory
    each time), alternating after one unmeasured warm-up of each; medians, CPU with children."""
    work = Path(tempfile.mkdtemp(prefix="dx-bench-first-"))
    base = _base_env(root, work)
    numpy_env = {**base, "KERAS_BACKEND": "numpy"}
    walls: dict[str, list[float]] = {"bare keras (numpy) + call": [], "cli first run": []}
    CPU.clear()
    load_before = os.getloadavg()
    try:
        for i in range(repeats + 1):
            bare = measure(_BARE_CALL, [], numpy_env)
            folder = work / f"first-{i}"
            first = measure(_COMMAND, ARGS, {**base, "DTYPE_EXPLORER_CACHE_DIR": str(folder)})
            if not list(folder.glob("keras-facts-*.json")):
                raise RuntimeError(f"the first run left no Keras snapshot in {folder}")
            if i:  # the first pair writes the bytecode
                walls["bare keras (numpy) + call"].append(bare[0])
                walls["cli first run"].append(first[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cpu = {"bare keras (numpy) + call": CPU[_BARE_CALL][1:], "cli first run": CPU[_COMMAND][1:]}
    results = {
        name: {
            "wall_s": round(statistics.median(runs), 3),
            "wall_min_s": round(min(runs), 3),
            "cpu_s": round(statistics.median(cpu[name]), 3),
        }
        for name, runs in walls.items()
    }
    bare_row, first_row = results["bare keras (numpy) + call"], results["cli first run"]
    first_row["x_bare_keras_call"] = round(first_row["wall_s"] / bare_row["wall_s"], 2)
    first_row["cpu_x_bare"] = round(first_row["cpu_s"] / bare_row["cpu_s"], 2)
    return {
        "root": str(root),
        "repeats": repeats,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "results": results,
    }


def run(repeats: int) -> dict:
    root = Path(__file__).resolve().parents[1]
    work = Path(tempfile.mkdtemp(prefix="dx-bench-cli-"))
    base = _base_env(root, work)
    snapshot_home = work / "snapshot"
    cases: dict[str, list[tuple[float, float]]] = {}

    def add(name: str, code: str, args: list[str], env: dict[str, str]) -> None:
        cases.setdefault(name, []).append(measure(code, args, env))

    def cache(name: str, with_snapshot: bool) -> dict[str, str]:
        folder = work / name
        folder.mkdir()
        if with_snapshot:
            for file in snapshot_home.glob("keras-facts-*.json"):
                shutil.copy(file, folder / file.name)
        return {**base, "DTYPE_EXPLORER_CACHE_DIR": str(folder)}

    load_before = os.getloadavg()
    try:
        numpy_env = {**base, "KERAS_BACKEND": "numpy"}
        warm = cache("warm-up", with_snapshot=False)  # writes the bytecode; not measured
        for code, args, env in (
            (_BARE_CALL, [], numpy_env),
            (_CLI, ARGS, warm),
            (_SCRIPT, [], warm),
        ):
            measure(code, args, env)
        for i in range(repeats):
            add("bare python", "pass", [], base)
            add("bare keras (numpy)", "import keras", [], numpy_env)
            add("bare keras (numpy) + call", _BARE_CALL, [], numpy_env)
            first = cache(f"first-{i}", with_snapshot=False)
            add("cli first run (no snapshot)", _CLI, ARGS, first)
            if i == 0:
                shutil.copytree(first["DTYPE_EXPLORER_CACHE_DIR"], snapshot_home)
            cold = cache(f"cold-{i}", with_snapshot=True)
            add("cli cold", _CLI, ARGS, cold)
            add("cli cached", _CLI, ARGS, cold)
            script = cache(f"script-{i}", with_snapshot=True)
            add("script cold", _SCRIPT, [], script)
            add("script cached", _SCRIPT, [], script)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {
        name: {
            "wall_s": round(statistics.median(w for w, _ in runs), 3),
            "rss_mb": round(statistics.median(r for _, r in runs), 1),
        }
        for name, runs in cases.items()
    }
    bare = results["bare keras (numpy) + call"]["wall_s"]
    for name in ("cli cold", "cli first run (no snapshot)", "script cold"):
        results[name]["x_bare_keras_call"] = round(results[name]["wall_s"] / bare, 2)
    return {
        "repeats": repeats,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "results": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--first", action="store_true", help="only the first run ever")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    options = parser.parse_args()
    report = run_first(options.repeats, options.root) if options.first else run(options.repeats)
    if options.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['repeats']} repeats, medians; load average before {report['load_before']}, "
        f"after {report['load_after']} ({report['cpus']} CPUs)"
    )
    for name, row in report["results"].items():
        ratio = (
            f"  {row['x_bare_keras_call']}x bare keras + call" if "x_bare_keras_call" in row else ""
        )
        if "cpu_s" in row:  # --first
            cpu = f"  CPU {row['cpu_x_bare']}x" if "cpu_x_bare" in row else ""
            print(f"  {name:<30} {row['wall_s']:>7.3f} s  CPU {row['cpu_s']:>6.3f} s{ratio}{cpu}")
            continue
        print(f"  {name:<30} {row['wall_s']:>7.3f} s {row['rss_mb']:>8.1f} MB{ratio}")


if __name__ == "__main__":
    main()
