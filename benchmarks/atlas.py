"""The atlas at scale (issue 17): workers per backend, a Dask LocalCluster, the atlas build
and diff, and a representative slice of the full default survey, cold.

    python benchmarks/atlas.py                    # scaling + atlas build/diff + the slice
    python benchmarks/atlas.py --skip-slice       # without the slice (minutes less)
    python benchmarks/atlas.py --json

Every measured survey starts from an empty cache (its own temporary
``DTYPE_EXPLORER_CACHE_DIR``) with its workers already started (the clock does not count
importing Keras). The *floor* is the sum of the bare construct-and-call times measured inside
the same probes (``timings["construct_ms"] + ["call_ms"]``): what Keras itself costs, serially.

* scaling (cold cache, then a second pass with the cache off in the same workers): the same
  small survey (every 4th catalog layer x 4 dtypes x 2 policies) on one
  backend with 1 and 2 workers per backend, and on a 2-process ``LocalCluster`` (1 thread
  each, each Dask worker running its own pool and cache); on numpy and on jax (which compiles
  every new shape and dtype, in each worker's own compile cache);
* atlas: building the atlas and its site from a warm cache, its size, and a diff;
* slice: every catalog layer x 3 dtypes x the 4 default policies on one backend, cold, and
  the full default survey (every layer x every dtype x 4 policies x 4 backends) extrapolated
  from the slice's rate, labelled as such.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

SCALING_DTYPES = ["float32", "float16", "int32", "uint8"]
SCALING_POLICIES = ["float32", "mixed_float16"]
SLICE_DTYPES = ["uint8", "float16", "float64"]


@contextlib.contextmanager
def fresh_cache():
    """An empty result cache for the block (and the workers started inside it)."""
    from dtype_explorer import pool

    pool.shutdown()
    path = tempfile.mkdtemp(prefix="dx-bench-atlas-")
    old = os.environ.get("DTYPE_EXPLORER_CACHE_DIR")
    os.environ["DTYPE_EXPLORER_CACHE_DIR"] = path
    try:
        yield Path(path)
    finally:
        pool.shutdown()
        if old is not None:
            os.environ["DTYPE_EXPLORER_CACHE_DIR"] = old
        shutil.rmtree(path, ignore_errors=True)


def floor_s(survey) -> float:
    return sum(
        (r.timings.get("construct_ms", 0) + r.timings.get("call_ms", 0)) / 1e3
        for r in survey.results
    )


def timed_survey(targets, dtypes, policies, backend, **options) -> dict:
    import dtype_explorer as dx

    started = time.perf_counter()
    survey = dx.survey(targets, dtypes, policies, backends=backend, progress=False, **options)
    wall = time.perf_counter() - started
    floor = floor_s(survey)
    return {
        "probes": len(survey.results),
        "wall_s": round(wall, 2),
        "probes_per_s": round(len(survey.results) / wall, 2),
        "floor_s": round(floor, 2),
        "wall_over_floor": round(wall / floor, 2) if floor else None,
        "statuses": dict(sorted(_count(r.status for r in survey.results).items())),
    }


def _count(values) -> dict:
    found: dict = {}
    for v in values:
        found[v] = found.get(v, 0) + 1
    return found


def scaling(backend: str) -> dict:
    from dtype_explorer import catalog, pool

    targets = [e.name for e in catalog.layers()][::4]
    warm_up = ["Identity"]  # starts the workers' Keras on a cell outside the measured ones
    report = {}
    for workers in (1, 2):
        with fresh_cache():
            pool.configure(workers_per_backend=workers)
            pool.warm([backend])
            timed_survey(warm_up, ["float32"], ["float32"], backend)
            report[f"{workers}_workers"] = timed_survey(
                targets, SCALING_DTYPES, SCALING_POLICIES, backend
            )
            # the same probes again, live (cache off), in workers that already ran them once:
            # what the workers cost when each has paid its own first-time costs (imports,
            # jax's compile cache, Keras's lazily built functions)
            report[f"{workers}_workers_second_pass"] = timed_survey(
                targets, SCALING_DTYPES, SCALING_POLICIES, backend, use_cache=False
            )
    pool.configure(workers_per_backend="auto")
    from distributed import Client, LocalCluster

    with (
        fresh_cache(),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        timed_survey(warm_up, ["float32"], ["float32"], backend, cluster=client)
        result = timed_survey(targets, SCALING_DTYPES, SCALING_POLICIES, backend, cluster=client)
        result["pools"] = client.run(lambda: len(__import__("dtype_explorer").pool._pools))
        report["localcluster_2x1"] = result
    one = report["1_workers"]["wall_s"]
    report["speedup_2_workers"] = round(one / report["2_workers"]["wall_s"], 2)
    report["speedup_2_workers_second_pass"] = round(
        report["1_workers_second_pass"]["wall_s"] / report["2_workers_second_pass"]["wall_s"], 2
    )
    report["speedup_localcluster"] = round(one / report["localcluster_2x1"]["wall_s"], 2)
    report["targets"] = len(targets)
    return report


def atlas_times(out: Path) -> dict:
    from dtype_explorer import catalog
    from dtype_explorer.analyses import build_atlas
    from dtype_explorer.records import Atlas

    targets = [e.name for e in catalog.layers()][::4]
    with fresh_cache():
        started = time.perf_counter()
        a = build_atlas(
            targets, SCALING_DTYPES, SCALING_POLICIES, "numpy", out=out / "a", progress=False
        )
        cold = time.perf_counter() - started
        started = time.perf_counter()
        build_atlas(
            targets, SCALING_DTYPES, SCALING_POLICIES, "numpy", out=out / "a", progress=False
        )
        warm = time.perf_counter() - started
        b = build_atlas(
            targets,
            SCALING_DTYPES,
            SCALING_POLICIES,
            "numpy",
            floatx="float16",
            out=out / "b",
            progress=False,
        )
    started = time.perf_counter()
    loaded = Atlas.load(out / "a"), Atlas.load(out / "b")
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    diff = loaded[0].diff(loaded[1])
    diff.to_html()
    diff_s = time.perf_counter() - started
    site = sum(p.stat().st_size for p in (out / "a").rglob("*") if p.is_file())
    runs = sum(len(c.runs) for c in a.cells)
    return {
        "cells": len(a.cells),
        "runs": runs,
        "build_cold_s": round(cold, 2),
        "build_from_cache_s": round(warm, 2),
        "atlas_json_bytes": (out / "a" / "atlas.json").stat().st_size,
        "bytes_per_run": round((out / "a" / "atlas.json").stat().st_size / runs),
        "site_bytes": site,
        "pages": len(list((out / "a").rglob("*.html"))),
        "load_two_s": round(load_s, 3),
        "diff_and_page_s": round(diff_s, 3),
        "changed_runs_floatx16": len(diff.changes),
        "same_fingerprint_as_b": a.fingerprint() == b.fingerprint(),
    }


def full_slice(backend: str, dtype_names: list[str]) -> dict:
    from dtype_explorer import catalog, dtypes, pool
    from dtype_explorer.analyses import DEFAULT_POLICIES

    layers = [e.name for e in catalog.layers()]
    with fresh_cache():
        pool.configure(workers_per_backend="auto")
        pool.warm([backend])
        result = timed_survey(layers, dtype_names, list(DEFAULT_POLICIES), backend)
    full = len(layers) * len(dtypes.keras_dtypes()) * len(DEFAULT_POLICIES) * 4
    result.update(
        {
            "backend": backend,
            "layers": len(layers),
            "dtypes": dtype_names,
            "full_default_probes": full,
            # this backend's share of the full survey (every dtype), at the slice's rate
            "backend_share_extrapolated_min": round(
                full / 4 / (result["probes"] / result["wall_s"]) / 60, 1
            ),
            "workers_per_backend": pool.workers_per_backend(),
        }
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-slice", action="store_true")
    parser.add_argument("--backends", default="numpy,jax", help="backends for the scaling runs")
    parser.add_argument("--slice-backends", default="numpy", help="one slice per backend")
    parser.add_argument("--slice-dtypes", default=",".join(SLICE_DTYPES))
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    report: dict = {"cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}
    for backend in args.backends.split(","):
        report[f"scaling_{backend}"] = scaling(backend)
        print(json.dumps({backend: report[f"scaling_{backend}"]}), file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as out:
        report["atlas"] = atlas_times(Path(out))
    print(json.dumps({"atlas": report["atlas"]}), file=sys.stderr, flush=True)
    if not args.skip_slice:
        for backend in args.slice_backends.split(","):
            report[f"slice_{backend}"] = full_slice(backend, args.slice_dtypes.split(","))
            print(json.dumps({backend: report[f"slice_{backend}"]}), file=sys.stderr, flush=True)
    report["load_average_after"] = os.getloadavg()[0]
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return
    for key, value in report.items():
        print(f"{key}: {json.dumps(value)}")


if __name__ == "__main__":
    main()
