"""The CLI's cached answer, whole process, against the floor it cannot go under: a Python that
imports NumPy and pydantic (what the records are made of), measured in the same run.

    python benchmarks/cli_front.py                      # this checkout, 9 repeats, medians
    python benchmarks/cli_front.py --root /work/main    # another checkout (before/after)
    python benchmarks/cli_front.py --importtime         # also the slowest imports of the front

Each case is a fresh process (``python -c``), run alternately after one unmeasured warm-up
(the cache filled, bytecode written); wall is start to exit, RSS the peak resident memory of
that process alone (``RUSAGE_SELF`` at exit), CPU its user + system seconds (steadier than wall
on a loaded machine). ``PYTHONDONTWRITEBYTECODE`` is dropped from the processes' environment:
an installed package has its bytecode, and without it every run compiled the checkout's
modules from source. Cases:

* ``floor``: ``import numpy, pydantic``.
* ``floor + 1 model``: the floor, plus one pydantic model declared and one JSON validated
  (pydantic's ``main``/``fields``/``types`` and, at a validator's build, its plugin loader's
  ``importlib.metadata``): what any pydantic answer costs, whatever its records.
* ``records``: importing the records a cached answer is validated into (each model's validator
  built at its first use, ``defer_build``): the part of the cached answer no front can skip.
* ``cli cached``: ``dtype-explorer probe Dense --backend numpy`` with the answer in the cache
  (the warm-up asked it once, live), through the script's entry point: the same command line
  again, whose printed answer is kept (``runtime.printed``: no NumPy or pydantic imported).
* ``cli stored``: the same, its printed answer removed first (as when ``dx.probe`` stored the
  answer): the stored answer read, validated and laid out, then kept as printed (after the
  answer is out, and counted here).

Goal (issue 27): cli cached <= 0.2 s; the ratio to the floor is what the machine's load does
not change much.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Run first in every measured process: its peak RSS (KB on Linux) and CPU seconds (user +
#: system) written at exit.
_RSS = (
    "import atexit, os, resource\n"
    "def _dx_usage():\n"
    "    use = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    open(os.environ['DX_BENCH_RSS'], 'w').write("
    "f'{use.ru_maxrss} {use.ru_utime + use.ru_stime}')\n"
    "atexit.register(_dx_usage)\n"
)
CASES = {
    "floor": "import numpy, pydantic\n",
    # what any pydantic answer costs besides: pydantic's models and validator machinery
    "floor + 1 model": (
        "import numpy, pydantic\n"
        "class M(pydantic.BaseModel):\n"
        "    x: int\n"
        "M.model_validate_json('{\"x\": 1}')\n"
    ),
    # what any answer is made of: the records (pydantic models, built at import)
    "records": "from dtype_explorer.records import ProbeResult, ProbeSpec\n",
    # the ``dtype-explorer`` script's entry point (a checkout from before it: the typer app)
    "cli cached": (
        "import sys\n"
        "sys.argv = ['dtype-explorer', 'probe', 'Dense', '--backend', 'numpy']\n"
        "try:\n"
        "    from dtype_explorer.frontends.command import main\n"
        "except ImportError:\n"
        "    from dtype_explorer.frontends.cli import app as main\n"
        "main()\n"
    ),
}
#: The same command line once its printed answer is gone (as after ``dx.probe`` stored the
#: answer): the stored answer validated and laid out (lane 2), then kept as printed. Its
#: first lines (sqlite3 imported, one row deleted: a few ms) are counted in its time.
CASES["cli stored"] = (
    "import os, sqlite3\n"
    "db = sqlite3.connect(os.path.join(os.environ['DTYPE_EXPLORER_CACHE_DIR'], 'cache.db'),"
    " isolation_level=None)\n"
    "db.execute(\"DELETE FROM Cache WHERE key LIKE 'printed|%'\")\n"
    "db.close()\n" + CASES["cli cached"]
)


def _run(code: str, env: dict[str, str], rss_file: Path) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds of one fresh process running ``code``."""
    t0 = time.perf_counter()
    subprocess.run(  # not in a checkout: ``python -c`` puts the cwd first on sys.path
        [sys.executable, "-c", _RSS + code],
        env=env,
        check=True,
        capture_output=True,
        cwd=rss_file.parent,
    )
    wall = time.perf_counter() - t0
    rss, cpu = rss_file.read_text().split()
    return wall, int(rss) / 1024, float(cpu)


def measure(
    root: Path, repeats: int, imports: list[tuple[float, str]] | None = None
) -> dict[str, dict[str, float]]:
    """Median wall seconds and peak RSS of each case, alternating, in one cache directory
    (and, into ``imports``, the cached answer's slowest imports)."""
    with tempfile.TemporaryDirectory() as scratch:
        rss_file = Path(scratch) / "rss"
        env = {
            **os.environ,
            "PYTHONPATH": str(root),
            "DTYPE_EXPLORER_CACHE_DIR": str(Path(scratch) / "cache"),
            "DX_BENCH_RSS": str(rss_file),
        }
        # an installed package has its bytecode (pip compiles it): the warm-up writes it here
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for code in CASES.values():  # warm-up: the live answer cached, bytecode written
            _run(code, env, rss_file)
        found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in CASES}
        for _ in range(repeats):
            for name, code in CASES.items():
                found[name].append(_run(code, env, rss_file))
        if imports is not None:  # in the same cache: the answer is there
            imports.extend(slowest_imports(env))
    return {
        name: {
            "wall_s": statistics.median(w for w, _, _ in runs),
            "wall_min_s": min(w for w, _, _ in runs),
            "rss_mb": statistics.median(r for _, r, _ in runs),
            "cpu_s": statistics.median(c for _, _, c in runs),
        }
        for name, runs in found.items()
    }


def slowest_imports(env: dict[str, str], count: int = 12) -> list[tuple[float, str]]:
    """The front's ``count`` largest cumulative imports (ms), from ``python -X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", CASES["cli cached"]],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=env["DX_BENCH_RSS"].rpartition(os.sep)[0],
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]) / 1000, parts[2].rstrip()))
    return sorted(rows, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    imports: list[tuple[float, str]] | None = [] if args.importtime else None
    rows = measure(args.root, args.repeats, imports)
    floor, cli = rows["floor"], rows["cli cached"]
    ratio = cli["wall_s"] / floor["wall_s"]
    if args.json:
        print(json.dumps({"root": str(args.root), "load": load, **rows, "ratio": ratio}))
        return
    print(f"{args.root}: load {load:.1f} -> {os.getloadavg()[0]:.1f}; median of {args.repeats}")
    print("| case | wall s | CPU s | peak RSS MB |\n|---|---:|---:|---:|")
    for name, row in rows.items():
        print(f"| {name} | {row['wall_s']:.3f} | {row['cpu_s']:.3f} | {row['rss_mb']:.0f} |")
    cpu_ratio = cli["cpu_s"] / floor["cpu_s"]
    rss_ratio = cli["rss_mb"] / floor["rss_mb"]
    print(f"| ratio | **{ratio:.2f}x** | {cpu_ratio:.2f}x | {rss_ratio:.2f}x |")
    if imports:
        for ms, name in imports:
            print(f"{ms:8.1f} ms {name}")


if __name__ == "__main__":
    main()
