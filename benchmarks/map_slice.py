"""A slice of the whole map (layers + ops + losses + metrics x dtypes x policies x backends),
cold, on a 2-worker Dask ``LocalCluster``: wall, CPU, peak RSS of every process, cache and
site size, and the whole map extrapolated from the measured rate.

    python benchmarks/map_slice.py                  # the default slice, a table
    python benchmarks/map_slice.py --stride 10 --json
    python benchmarks/map_slice.py --whole --keep map/ --json   # the whole map, resumable

``--whole`` is every target (stride 1) x the survey's default dtypes, in one ``build_atlas``
call: Keras's dtypes for every target, and the weak Python scalars for the ops only (a layer
takes arrays only, ``Survey.op_dtypes``), each op under float32 only (an op reads no policy,
``Survey.op_policy``). With ``--keep DIR``
the caches (``DIR/cache``, ``DIR/worker-cache``) and the site (``DIR/site``) stay: run the same
command again and it resumes, the answers already stored served from the caches.

Every ``--stride``-th target of each kind (layers, ops, losses and metrics), ``--dtypes``,
the four default policies and every installed backend. Both the client's cache and the Dask
workers' start empty (temporary directories). A thread samples every process of the run (this
one, the Dask workers and their dtype-explorer workers) with psutil every 0.25 s: each one's
peak resident set, and the peak of their sum. CPU is each process's user + system time at its
last sample, summed. The *floor* is the bare construct-and-call time of every probe, serially
(their own ``timings``, read back from the client's cache). The cache figure compares the
rows as stored (compressed, ``runtime/_rows.py``) with the same answers' plain JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

DTYPES = ("float32", "float16", "int32", "uint8")


class Sampler(threading.Thread):
    """Peak RSS per process and of the sum, and CPU time per process, of this process tree."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.me = psutil.Process()
        self.peak: dict[int, tuple[int, str]] = {}
        self.cpu: dict[int, float] = {}
        self.peak_sum = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            total = 0
            for proc in [self.me, *self.me.children(recursive=True)]:
                try:
                    rss = proc.memory_info().rss
                    times = proc.cpu_times()
                    name = self.peak.get(proc.pid, (0, ""))[1] or role(proc)
                except psutil.Error:
                    continue
                total += rss
                self.peak[proc.pid] = (max(rss, self.peak.get(proc.pid, (0, ""))[0]), name)
                self.cpu[proc.pid] = times.user + times.system
            self.peak_sum = max(self.peak_sum, total)
            self.stop.wait(0.25)


def role(proc: psutil.Process) -> str:
    """``front`` (this process), ``dask-worker`` (its children: LocalCluster's worker
    processes), ``pool-worker`` (theirs: a backend's dtype-explorer worker)."""
    depth, parent = 0, proc
    while parent is not None and parent.pid != os.getpid():
        parent, depth = parent.parent(), depth + 1
    if "resource_tracker" in " ".join(proc.cmdline()):
        return "resource-tracker"
    return {0: "front", 1: "dask-worker"}.get(depth, "pool-worker")


def slice_targets(stride: int) -> tuple[list[str], list[str]]:
    """Every ``stride``-th target of each kind: (layers, losses and metrics), (ops)."""
    from dtype_explorer.keras_run import catalog

    kinds = [
        [e.name for e in catalog.layers()],
        [e.name for e in catalog.objectives() if e.name.startswith("losses.")],
        [e.name for e in catalog.objectives() if e.name.startswith("metrics.")],
    ]
    ops = [e.name for e in catalog.ops()][::stride]
    return [name for names in kinds for name in names[::stride]], ops


def whole_map(backends: int) -> dict:
    """The number of probes of the whole map, as the survey plans it: every layer, loss and
    metric x Keras's dtypes x the four default policies, every op x Keras's dtypes and the
    weak Python scalars (an op reads no policy: under float32 only), x ``backends``."""
    from dtype_explorer.analyses import _survey
    from dtype_explorer.keras_run import catalog
    from dtype_explorer.records import Survey, op_dtypes, op_policy

    layered = [e.name for e in [*catalog.layers(), *catalog.objectives()]]
    ops = [e.name for e in catalog.ops()]
    names, dtypes, policies = _survey.resolve(layered + ops, None, None)
    plan = Survey(
        targets=names,
        input_dtypes=dtypes,
        policies=policies,
        backends=(),
        compute_dtypes={},
        results=(),
        op_policy=op_policy(names, policies),
        op_dtypes=op_dtypes(names, dtypes),
    )
    return {
        "layers_losses_metrics": len(layered),
        "ops": len(ops),
        "dtypes": len(plan.dtypes_of(layered[0])),
        "op_dtypes": len(plan.dtypes_of(ops[0])),
        "policies": len(policies),
        "plan": plan.plan_text(),
        "probes": plan.planned_cells() * backends,
    }


def size(path: Path, skip: tuple[str, ...] = ()) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and p.name not in skip)


def measure(
    stride: int,
    dtypes: list[str] | None,
    out: Path,
    worker_cache: Path,
    progress: bool,
    held: bool = False,
) -> dict:
    import distributed

    import dtype_explorer as dx
    from dtype_explorer import cache
    from dtype_explorer.analyses import build_atlas, query_atlas, save_atlas, write_atlas

    layered, ops = slice_targets(stride)
    sampler = Sampler()
    sampler.start()
    started, cpu0 = time.perf_counter(), sum(psutil.Process().cpu_times()[:2])
    env = {"DTYPE_EXPLORER_CACHE_DIR": str(worker_cache), "TF_CPP_MIN_LOG_LEVEL": "3"}
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, env=env
        ) as local,
        distributed.Client(local) as client,
    ):
        # One atlas of layers and ops: the survey probes each op under float32 only (an op
        # reads no dtype policy: Survey.op_policy), each layer under the four policies; the
        # whole map's default dtypes are Keras's for all, the weak Python scalars for the ops
        # only (a layer takes arrays only: Survey.op_dtypes).
        if held:  # the atlas held whole, then saved (before write_atlas)
            atlas = build_atlas(
                layered + ops, dtypes, None, None, cluster=client, progress=progress
            )
            save_atlas(atlas, out)
            probes = atlas.build.get("probes", 0)
        else:  # written a target at a time, never held (what `atlas build` runs)
            written = write_atlas(
                layered + ops, dtypes, None, None, cluster=client, progress=progress, out=out
            )
            probes = written.probes
        wall = time.perf_counter() - started
        sampler.stop.set()
        sampler.join()
    floor = plain = rows = 0  # streamed: the whole map's answers are never held at once
    for r in cache.results():
        floor += r.timings.get("construct_ms", 0) + r.timings.get("call_ms", 0)
        plain += len(r.to_json())
        rows += 1
    stored = cache._store().run(lambda db: sum(len(k) + len(db.get(k) or "") for k in db))
    peaks: dict[str, int] = {}
    for rss, name in sampler.peak.values():
        peaks[name] = max(peaks.get(name, 0), rss)
    axes = query_atlas(
        "SELECT count(DISTINCT input_dtype) d, count(DISTINCT policy) p, "
        "count(DISTINCT run) b, count(*) n FROM runs",
        out,
    ).iloc[0]
    return {
        "targets": len(layered) + len(ops),
        "dtypes": int(axes["d"]),
        "policies": int(axes["p"]),
        "backends": int(axes["b"]),
        "runs_in_store": int(axes["n"]),
        "front": "held" if held else "written",
        "probes": probes,
        "wall_s": round(wall, 1),
        "probes_per_s": round(probes / wall, 2),
        "cpu_s_all_processes": round(sum(sampler.cpu.values()) - cpu0, 1),
        "floor_s": round(floor / 1000, 1),
        "wall_over_floor": round(wall / (floor / 1000), 2) if floor else None,
        "processes": len(sampler.peak),
        "peak_rss_mb_by_role": {k: v >> 20 for k, v in sorted(peaks.items())},
        "peak_rss_sum_mb": sampler.peak_sum >> 20,
        "cache_mb_client": round(size(Path(dx.cache.path())) / 1e6, 2),
        "cache_mb_workers": round(size(worker_cache) / 1e6, 2),
        "cache_rows_plain_json_mb": round(plain / 1e6, 2),
        "cache_rows_stored_mb": round(stored / 1e6, 2),  # keys + compressed bodies
        "cache_rows": rows,
        "site_mb": round(size(out, ("atlas.json", "atlas.parquet")) / 1e6, 2),
        "site_bytes_per_run": round(size(out, ("atlas.json", "atlas.parquet")) / max(probes, 1)),
        "site_largest_data_kb": round(
            max(p.stat().st_size for p in (out / "data").iterdir()) / 1e3
        ),
        "atlas_json_mb": round((out / "atlas.json").stat().st_size / 1e6, 2),
        "atlas_parquet_mb": round((out / "atlas.parquet").stat().st_size / 1e6, 2),
        "whole_map": whole_map(int(axes["b"])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=15)
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--whole", action="store_true", help="every target x every dtype")
    parser.add_argument("--keep", type=Path, help="keep caches and site here (resumable)")
    parser.add_argument("--held", action="store_true", help="build_atlas + save_atlas (before)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    stride, dtypes = (1, None) if args.whole else (args.stride, args.dtypes.split(","))
    if args.keep:
        root = args.keep.resolve()
        cache_dir, worker_cache, out = root / "cache", root / "worker-cache", root / "site"
        for d in (cache_dir, worker_cache, out):
            d.mkdir(parents=True, exist_ok=True)
    else:
        cache_dir = Path(tempfile.mkdtemp(prefix="dx-map-cache-"))
        worker_cache = Path(tempfile.mkdtemp(prefix="dx-map-workers-"))
        out = Path(tempfile.mkdtemp(prefix="dx-map-site-"))
    os.environ["DTYPE_EXPLORER_CACHE_DIR"] = str(cache_dir)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        report = measure(stride, dtypes, out, worker_cache, progress=args.whole, held=args.held)
    finally:
        if not args.keep:
            for d in (cache_dir, worker_cache, out):
                shutil.rmtree(d, ignore_errors=True)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return
    for key, value in report.items():
        print(f"{key:<28} {value}")


if __name__ == "__main__":
    main()
