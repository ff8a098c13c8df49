"""Benchmark the worker pool against its goals; prints a table (or ``--json``).

    .venv/bin/python benchmarks/pool.py [--json] [--repeat 200] [--backend numpy]

- round trip: one warm probe through the pool minus the same probe run in this process
  (medians, interleaved so machine load hits both alike); goal <= 2 ms. Shown too: the pool's
  own share (round trip minus the probe's time inside the worker; on a loaded machine the two
  processes' probe times drift apart) and the round trip of a task that does nothing;
- cold start: all installed backends' workers started in parallel (``pool.warm()``) vs the
  slowest single ``import keras`` in a fresh interpreter; goal <= 1.5x. Bare ``import keras``
  of every backend at once (no pool) is shown too: with fewer cores than backends, that is
  the floor the pool cannot beat;
- cache hit: ``pool.submit(spec).result()`` answered from the cache; goal <= 1 ms median;
- memory: resident memory of this process plus every worker (sum of RSS, psutil), after each
  worker has answered a probe; goal <= 2 GB. PSS (shared pages split) is shown for context.

The cache lives in a temporary directory, so the user's cache is untouched.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MB = 1 << 20


def _import_keras(backend: str) -> subprocess.Popen:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.Popen(
        [sys.executable, "-c", "import keras"], env=env, stderr=subprocess.DEVNULL
    )


def single_imports(backends: list[str]) -> dict[str, float]:
    """Seconds for ``import keras`` on each backend, each alone in a fresh interpreter."""
    seconds = {}
    for backend in backends:
        started = time.perf_counter()
        _import_keras(backend).wait()
        seconds[backend] = time.perf_counter() - started
    return seconds


def parallel_imports(backends: list[str]) -> float:
    """Seconds for bare ``import keras`` on every backend at once: the machine's own floor
    for a parallel cold start, without any pool."""
    started = time.perf_counter()
    for process in [_import_keras(b) for b in backends]:
        process.wait()
    return time.perf_counter() - started


def memory(workers: dict[str, int]) -> dict[str, float]:
    """MB of RSS and PSS of this process and all its children, and RSS by process."""
    import psutil

    me = psutil.Process()
    names = {pid: f"{backend} worker" for backend, pid in workers.items()}
    numbers = {"rss_mb": 0.0, "pss_mb": 0.0}
    for process in [me, *me.children(recursive=True)]:
        try:
            info = process.memory_full_info()
        except psutil.NoSuchProcess:
            continue
        numbers["rss_mb"] += info.rss / MB
        numbers["pss_mb"] += getattr(info, "pss", info.rss) / MB
        name = "kernel" if process.pid == me.pid else names.get(process.pid, "other")
        numbers[f"rss_mb {name}"] = numbers.get(f"rss_mb {name}", 0.0) + info.rss / MB
    return numbers


def trivial_round_trips(backend: str, repeat: int) -> list[float]:
    """Timings (ms) of a task that does nothing through the warm worker: the pool's floor."""
    from dtype_explorer import pool

    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        pool.warm([backend])
        times.append((time.perf_counter() - started) * 1e3)
    return times


def round_trips(spec, repeat: int) -> tuple[list[float], list[float], list[float]]:
    """Interleaved timings (ms) of the probe in this process and through the warm worker, and
    the pool's own share of each round trip (wall time minus the worker's ``total_ms``)."""
    from dtype_explorer import pool
    from dtype_explorer.keras_run import run_probe as run

    local, remote, transport = [], [], []
    for _ in range(repeat):
        started = time.perf_counter()
        run(spec)
        local.append((time.perf_counter() - started) * 1e3)
        started = time.perf_counter()
        result = pool.submit(spec, use_cache=False).result()
        remote.append((time.perf_counter() - started) * 1e3)
        transport.append(remote[-1] - result.timings["total_ms"])
    return local, remote, transport


def cache_hits(spec, repeat: int) -> list[float]:
    from dtype_explorer import pool

    pool.submit(spec).result()  # store it
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = pool.submit(spec).result()
        times.append((time.perf_counter() - started) * 1e3)
        assert result.cached, "expected a cache hit"
    return times


def measure(repeat: int, backend: str) -> dict:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    from dtype_explorer import pool
    from dtype_explorer.records import ProbeSpec

    backends = pool.installed_backends()
    imports = single_imports(backends)
    bare_parallel = parallel_imports(backends)
    started = time.perf_counter()
    described = pool.warm(backends)
    cold = time.perf_counter() - started

    peak: dict[str, float] = {}

    def sample() -> None:
        for k, v in memory({b: d["pid"] for b, d in described.items()}).items():
            peak[k] = max(peak.get(k, 0.0), v)

    for b in backends:  # every worker has done real work before memory is read
        pool.submit(
            ProbeSpec(target="Dense", backend=b, kwargs={"units": 4}), use_cache=False
        ).result()
    sample()

    os.environ["KERAS_BACKEND"] = backend  # this process probes in-process on the same backend
    spec = ProbeSpec(target="Dense", backend=backend, kwargs={"units": 4})
    local, remote, transport = round_trips(spec, repeat)
    trivial = trivial_round_trips(backend, repeat)
    hits = cache_hits(spec, repeat)
    sample()
    pool.shutdown()

    slowest = max(imports, key=imports.get)
    overhead = statistics.median(remote) - statistics.median(local)
    return {
        "backends": backends,
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "round_trip": {
            "backend": backend,
            "in_process_median_ms": statistics.median(local),
            "pool_median_ms": statistics.median(remote),
            "overhead_median_ms": overhead,
            "transport_median_ms": statistics.median(transport),
            "trivial_task_median_ms": statistics.median(trivial),
            "goal_ms": 2.0,
            "met": overhead <= 2.0,
        },
        "cold_start": {
            "parallel_s": cold,
            "bare_parallel_imports_s": bare_parallel,
            "single_imports_s": imports,
            "slowest_single": slowest,
            "ratio": cold / imports[slowest],
            "goal_ratio": 1.5,
            "met": cold / imports[slowest] <= 1.5,
        },
        "cache_hit": {
            "median_ms": statistics.median(hits),
            "goal_ms": 1.0,
            "met": statistics.median(hits) <= 1.0,
        },
        "memory": {**peak, "goal_mb": 2048, "met": peak["rss_mb"] <= 2048},
        "repeat": repeat,
    }


def table(numbers: dict) -> str:
    rt, cs, ch, mem = (numbers[k] for k in ("round_trip", "cold_start", "cache_hit", "memory"))
    ok = {True: "yes", False: "NO"}
    slowest = cs["slowest_single"]
    rows = [
        (
            "warm round trip overhead",
            f"{rt['overhead_median_ms']:.2f} ms ({rt['pool_median_ms']:.2f} pool vs "
            f"{rt['in_process_median_ms']:.2f} in-process, {rt['backend']})",
            "<= 2 ms",
            ok[rt["met"]],
        ),
        (
            "cold start, all in parallel",
            f"{cs['parallel_s']:.1f} s = {cs['ratio']:.2f}x slowest single import "
            f"({slowest} {cs['single_imports_s'][slowest]:.1f} s)",
            "<= 1.5x",
            ok[cs["met"]],
        ),
        ("cache hit", f"{ch['median_ms']:.3f} ms median", "<= 1 ms", ok[ch["met"]]),
        (
            "memory, kernel + workers",
            f"{mem['rss_mb']:.0f} MB RSS ({mem['pss_mb']:.0f} MB PSS)",
            "<= 2048 MB",
            ok[mem["met"]],
        ),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    imports = ", ".join(f"{b} {s:.1f} s" for b, s in cs["single_imports_s"].items())
    lines.append(
        f"round trip context: the pool's own share of a probe's round trip (wall time minus the "
        f"probe's time in the worker) {rt['transport_median_ms']:.2f} ms; a task that does "
        f"nothing {rt['trivial_task_median_ms']:.2f} ms"
    )
    by_process = ", ".join(
        f"{k.removeprefix('rss_mb ')} {v:.0f}" for k, v in mem.items() if k.startswith("rss_mb ")
    )
    lines.append(f"memory context: peak RSS (MB) by process: {by_process}")
    lines.append(
        f"cold start context: bare `import keras` of all {len(cs['single_imports_s'])} "
        f"backends at once, no pool: {cs['bare_parallel_imports_s']:.1f} s"
    )
    lines.append(
        f"single imports: {imports}; {numbers['cpu_count']} CPUs, load average "
        f"{numbers['load_average'][0]:.1f}; {numbers['repeat']} repeats"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--repeat", type=int, default=200, help="timed repeats per measure")
    parser.add_argument("--backend", default="numpy", help="backend for round trip and cache")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dx-bench-cache-") as cache_dir:
        os.environ["DTYPE_EXPLORER_CACHE_DIR"] = cache_dir
        numbers = measure(args.repeat, args.backend)
    print(json.dumps(numbers, indent=2) if args.json else table(numbers))


if __name__ == "__main__":
    main()
