"""A whole-catalog op survey against the bare floor: every ``keras.ops`` function x a few dtypes,
on one backend (numpy) and on every installed backend in parallel.

    python benchmarks/ops.py                          # numpy, then all backends in parallel
    python benchmarks/ops.py --dtypes float32,int32 --backends numpy,torch
    python benchmarks/ops.py --json

The *floor* is measured in the same run, one fresh process per backend: bare Keras calls of the
same ops on the same samples (the catalog's inputs by role, converted to backend tensors of the
dtype, as the probe does), summed call time, no framework around them; the process's import is
not counted, and neither is the workers' start (``pool.warm()`` runs before the clock). The
survey is cold (an empty, temporary cache): every probe makes the eager call, the symbolic call
for the declared dtype, the documented rule and the numerics, and travels through a worker.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

DTYPES = ("float32", "int32", "bfloat16")


def floor(backend: str, dtype_names: list[str]) -> dict:
    """Run in a fresh process with ``KERAS_BACKEND=backend``: bare calls, summed."""
    import keras
    import numpy as np

    from dtype_explorer import catalog
    from dtype_explorer.keras_run.catalog import op_calls

    assert keras.backend.backend() == backend
    total, calls, errors = 0.0, 0, 0
    for entry in catalog.ops():
        for dtype in dtype_names:
            rng = np.random.default_rng(0)

            def tensor(spec, i, dtype=dtype, rng=rng):
                d = spec["dtype"] if i is None else dtype
                v = op_calls.values(spec["values"], tuple(spec["shape"]), d, rng)
                return keras.ops.convert_to_tensor(v, dtype=d)

            kwargs = dict(entry.kwargs)
            if entry.probe == "dtype_kwarg":
                kwargs["dtype"] = dtype
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    args, named = op_calls.build(entry.inputs, tensor)
                    started = time.perf_counter()
                    try:
                        op_calls.call(entry.name, args, named, kwargs)
                    finally:
                        total += time.perf_counter() - started
            except Exception:
                errors += 1
            calls += 1
    return {"backend": backend, "floor_s": round(total, 3), "calls": calls, "errors": errors}


def _floor_in_process(backend: str, dtype_names: list[str]) -> dict:
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "KERAS_BACKEND": backend,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, __file__, "--floor", backend, "--dtypes", ",".join(dtype_names)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _survey(backends: list[str], dtype_names: list[str], progress: bool) -> dict:
    import dtype_explorer as dx

    started = time.perf_counter()
    survey = dx.survey("ops", dtype_names, backends=backends, progress=progress, use_cache=False)
    wall = time.perf_counter() - started
    statuses: dict[str, int] = {}
    for result in survey.results:
        statuses[result.status] = statuses.get(result.status, 0) + 1
    return {"wall_s": round(wall, 2), "probes": len(survey.results), "statuses": statuses}


def measure(backends: list[str], dtype_names: list[str], progress: bool) -> dict:
    from dtype_explorer import catalog, pool

    floors = {b: _floor_in_process(b, dtype_names) for b in backends}
    pool.warm()
    report: dict = {"ops": len(catalog.ops()), "dtypes": dtype_names, "rows": []}
    one = "numpy" if "numpy" in backends else backends[0]
    single = _survey([one], dtype_names, progress)
    report["rows"].append(
        {
            "scope": one,
            **single,
            "floor_s": floors[one]["floor_s"],
            "ratio": round(single["wall_s"] / max(floors[one]["floor_s"], 1e-9), 1),
        }
    )
    if len(backends) > 1:
        every = _survey(backends, dtype_names, progress)
        slowest = max(f["floor_s"] for f in floors.values())
        report["rows"].append(
            {
                "scope": f"{len(backends)} in parallel",
                **every,
                "floor_s": slowest,
                "floor_sum_s": round(sum(f["floor_s"] for f in floors.values()), 3),
                "ratio": round(every["wall_s"] / max(slowest, 1e-9), 1),
            }
        )
    report["floors"] = floors
    report["load_average"] = os.getloadavg()[0]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--backends", default=None, help="default: every installed backend")
    parser.add_argument("--floor", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dtype_names = args.dtypes.split(",")
    if args.floor:
        print(json.dumps(floor(args.floor, dtype_names)))
        return
    cache_dir = tempfile.mkdtemp(prefix="dx-bench-cache-")
    os.environ["DTYPE_EXPLORER_CACHE_DIR"] = cache_dir
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from dtype_explorer import pool

    backends = args.backends.split(",") if args.backends else list(pool.usable(None))
    try:
        report = measure(backends, dtype_names, progress=not args.json)
    finally:
        pool.shutdown()
        shutil.rmtree(cache_dir, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['ops']} ops x {len(dtype_names)} dtypes; load average {report['load_average']}")
    print("| scope | probes | survey wall s | floor s | ratio | statuses |")
    print("|---|---:|---:|---:|---:|---|")
    for row in report["rows"]:
        print(
            f"| {row['scope']} | {row['probes']} | {row['wall_s']} | {row['floor_s']} | "
            f"{row['ratio']}x | {row['statuses']} |"
        )
    for backend, f in report["floors"].items():
        print(f"floor {backend}: {f['floor_s']} s for {f['calls']} calls ({f['errors']} raised)")


if __name__ == "__main__":
    main()
