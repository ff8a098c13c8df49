"""Survey throughput: a cold survey against the floor Keras itself sets, and a cached rerun.

    python benchmarks/survey.py                 # the documented subset (below), a table
    python benchmarks/survey.py --full          # the full default survey (hours on 2 cores)
    python benchmarks/survey.py --json

The cache starts empty (a temporary ``DTYPE_EXPLORER_CACHE_DIR``) and the workers are started
before the clock runs. The *floor* is the sum, over every probe of the same survey, of the bare
construct-and-call time measured inside the probe (``timings["construct_ms"] + ["call_ms"]``):
what building and calling those layers costs with no framework around it. The declared
(symbolic) call and the numerics reference run are part of a probe but not of the floor.

Goals (issue 4): cold survey wall time <= 1.5x the floor, all backends in parallel; cached
rerun < 2 s. The default subset is every 10th catalog layer x 3 dtypes (uint8, float16,
float64) x the 4 default policies
x every installed backend; ``--full`` reports the full default survey, and the subset's rate
extrapolated to it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

SUBSET_DTYPES = ["uint8", "float16", "float64"]
SUBSET_STRIDE = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full default survey")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    cache_dir = tempfile.mkdtemp(prefix="dx-bench-cache-")
    os.environ["DTYPE_EXPLORER_CACHE_DIR"] = cache_dir
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        report = measure(full=args.full, progress=not args.json)
    finally:
        from dtype_explorer import pool

        pool.shutdown()
        shutil.rmtree(cache_dir, ignore_errors=True)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
    print(
        f"goal: cold <= 1.5x floor: {'met' if report['cold_over_floor'] <= 1.5 else 'NOT met'}; "
        f"cached rerun < 2 s (this scope): {'met' if report['cached_rerun_s'] < 2 else 'NOT met'}"
    )


def measure(*, full: bool, progress: bool) -> dict:
    """Run the survey cold, then cached; return the numbers."""
    import dtype_explorer as dx
    from dtype_explorer import catalog, dtypes, pool
    from dtype_explorer.analyses import DEFAULT_POLICIES

    layers = [e.name for e in catalog.layers()]
    targets = layers if full else layers[::SUBSET_STRIDE]
    dtype_names = list(dtypes.keras_dtypes()) if full else SUBSET_DTYPES
    started = time.perf_counter()
    pool.warm()
    startup = time.perf_counter() - started

    started = time.perf_counter()
    cold = dx.survey(targets, dtype_names, progress=progress)
    cold_s = time.perf_counter() - started
    started = time.perf_counter()
    cached = dx.survey(targets, dtype_names, progress=False)
    cached_s = time.perf_counter() - started

    floor = collections.Counter()
    probe = collections.Counter()
    for r in cold.results:
        floor[r.backend] += (r.timings.get("construct_ms", 0) + r.timings.get("call_ms", 0)) / 1e3
        probe[r.backend] += r.timings.get("total_ms", 0) / 1e3
    floor_s = sum(floor.values())
    n = len(cold.results)
    full_probes = (
        len(layers) * len(dtypes.keras_dtypes()) * len(DEFAULT_POLICIES) * len(cold.backends)
    )
    return {
        "scope": "full default survey" if full else f"every {SUBSET_STRIDE}th layer",
        "targets": len(targets),
        "dtypes": dtype_names,
        "policies": list(DEFAULT_POLICIES),
        "backends": list(cold.backends),
        "probes": n,
        "cpus": os.cpu_count(),
        "worker_startup_s": round(startup, 2),
        "cold_s": round(cold_s, 2),
        "probes_per_s": round(n / cold_s, 2),
        "floor_s": round(floor_s, 2),
        "cold_over_floor": round(cold_s / floor_s, 2) if floor_s else None,
        "floor_s_by_backend": {b: round(v, 2) for b, v in floor.items()},
        "probe_s_by_backend": {b: round(v, 2) for b, v in probe.items()},
        "cached_rerun_s": round(cached_s, 3),
        "cached_all": all(r.cached for r in cached.results),
        "full_survey_probes": full_probes,
        "full_survey_extrapolated_min": round(full_probes / (n / cold_s) / 60, 1),
        "full_survey_cached_extrapolated_s": round(cached_s / n * full_probes, 1),
    }


if __name__ == "__main__":
    main()
