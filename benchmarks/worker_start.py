"""Benchmark a worker's replacement: spawned (importing its backend again) vs forked from its
backend's zygote (``runtime/_zygote.py``), alternating in one run; prints a table (``--json``).

    .venv/bin/python benchmarks/worker_start.py [--repeats 5] [--backends numpy,jax,...]
    .venv/bin/python benchmarks/worker_start.py --engine tf_keras --backends tensorflow

For each backend and each way, the pool's workers are retired (as after a user's traced cell)
and the time to the next answer of an uncached probe is measured (wall), with the CPU the new
worker spent to get there (its own ``cpu_times``, read through psutil), and the PSS of the
new worker plus its zygote after the answer (shared pages split: what a container's memory
limit charges). The first start of each way is left out (the zygote's own imports, paid once
per kernel, are shown as ``zygote import``). The cache lives in a temporary directory.

``--engine SPEC`` (a created engine: ``tf_keras``, ``keras==3.11.3``) measures that engine's
workers instead; an engine's zygote is made at its second worker start, so the first two
rounds are left out there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["DTYPE_EXPLORER_CACHE_DIR"] = tempfile.mkdtemp(prefix="dx-bench-start-")

import psutil

from dtype_explorer import pool
from dtype_explorer.records import ProbeSpec
from dtype_explorer.runtime import _spawn, _zygote

MIB = 1 << 20


def _answer(backend: str, units: int, engine: str | None) -> None:
    spec = ProbeSpec(
        target="Dense",
        input_dtypes=("float32",),
        backend=backend,
        kwargs={"units": units},
        engine=engine,
    )
    assert pool.submit(spec, use_cache=False).result(timeout=600).ok


def _worker(backend: str, engine: str | None) -> psutil.Process:
    (pid,) = pool.warm([backend], engine=engine)[backend]["pids"]
    return psutil.Process(pid)


def _pss(process: psutil.Process) -> int:
    return process.memory_full_info().pss


def measure(backend: str, repeats: int, engine: str | None = None) -> dict:
    found: dict[str, dict[str, list[float]]] = {
        way: {"wall_ms": [], "cpu_s": [], "pss_mib": []} for way in ("spawn", "zygote")
    }
    units = 1
    zygote_import = None
    warm_up = 1 if engine is None else 2  # an engine's zygote comes at its second start
    for round_ in range(repeats + warm_up):
        for way in ("spawn", "zygote"):
            os.environ[_zygote.WORKER_START_VARIABLE] = way
            for slot in list(_spawn.pools):
                _spawn.retire(slot)
            units += 1
            t0 = time.perf_counter()
            _answer(backend, units, engine)
            wall = (time.perf_counter() - t0) * 1000
            worker = _worker(backend, engine)
            pss = _pss(worker)
            parent = worker.parent()
            if way == "zygote" and parent is not None and parent.pid != os.getpid():
                pss += _pss(parent)
                if zygote_import is None:
                    zygote_import = sum(parent.cpu_times()[:2])
            if round_ < warm_up:
                continue
            found[way]["wall_ms"].append(wall)
            found[way]["cpu_s"].append(sum(worker.cpu_times()[:2]))
            found[way]["pss_mib"].append(pss / MIB)
    pool.shutdown()
    shown = backend if engine is None else f"{backend}@{engine}"
    out = {"backend": shown, "zygote import cpu_s": zygote_import}
    for way, values in found.items():
        for name, series in values.items():
            out[f"{way} {name}"] = statistics.median(series)
    out["wall ratio"] = out["zygote wall_ms"] / out["spawn wall_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backends", default="numpy,jax,torch,tensorflow")
    parser.add_argument("--engine", default=None, help="a created engine's workers instead")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = [measure(b, args.repeats, args.engine) for b in args.backends.split(",")]
    if args.json:
        print(json.dumps({"load": [load, os.getloadavg()[0]], "rows": rows}))
        return
    print(f"load {load:.1f} -> {os.getloadavg()[0]:.1f}; medians of {args.repeats}")
    print(
        "| backend | spawn: wall ms / worker CPU s / PSS MiB | zygote: wall ms / worker CPU s "
        "/ PSS MiB (worker + zygote) | wall zygote/spawn | zygote's import, CPU s |"
    )
    print("|---|---|---|---:|---:|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['spawn wall_ms']:.0f} / {r['spawn cpu_s']:.2f} / "
            f"{r['spawn pss_mib']:.0f} | {r['zygote wall_ms']:.0f} / {r['zygote cpu_s']:.2f} / "
            f"{r['zygote pss_mib']:.0f} | {r['wall ratio']:.2f}x | "
            f"{r['zygote import cpu_s'] or 0:.2f} |"
        )


if __name__ == "__main__":
    main()
