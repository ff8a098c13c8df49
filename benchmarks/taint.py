"""What quarantining a tainted worker costs (issue 31): the two ways of keeping a worker that ran
user code from answering a built-in probe with a patched Keras, measured against the probe.

    .venv/bin/python benchmarks/taint.py [--backends numpy,jax] [--repeat 50] [--engine SPEC]

- check: ``keras_run.restore_keras(snapshot)`` when nothing changed (what a tainted worker runs
  before each built-in probe: every Keras module dict, class dict and function code, the
  custom-object registry, compared by identity), against a bare ``Dense`` probe
  (``run_probe``) in the same process; medians, interleaved. Also the snapshot (taken once,
  when the worker first runs user code);
- restart: the other way, replacing the worker: ``pool.shutdown()`` then ``pool.warm()`` of that
  backend, the seconds until a fresh worker answers;
- user call: a ``pool.call`` of a one-line function of the user's (this script's) on a warm
  user-code worker, as the user waits: it runs there, then the worker puts back what it
  changed in Keras (``_worker.call``), so that the next probe there starts from the baseline;
- site hash (``--engine``, default ``keras==3.11.3``, created when missing): hashing an engine's
  installed files, which every worker of that engine does at its start.

The cache lives in a temporary directory, so the user's cache is untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DTYPE_EXPLORER_CACHE_DIR", tempfile.mkdtemp(prefix="dx-bench-taint-"))

from benchmarks._harness import in_backend, medians


def here(repeats: int) -> dict:
    """In this process (Keras on ``$KERAS_BACKEND``): the check and a bare Dense probe, ms."""
    from dtype_explorer.keras_run import keras_snapshot, make_spec, restore_keras, run_probe

    spec = make_spec("Dense", "float32", None, None, kwargs={"units": 4})
    run_probe(spec)  # Keras's lazy imports happen before the snapshot, as in a worker
    started = time.perf_counter()
    snapshot = keras_snapshot()
    snapshot_ms = (time.perf_counter() - started) * 1000
    found = medians(
        {"probe": lambda: run_probe(spec), "check": lambda: restore_keras(snapshot)},
        repeats,
        time.perf_counter,
    )
    return {
        "backend": os.environ["KERAS_BACKEND"],
        "probe_ms": found["probe"],
        "check_ms": found["check"],
        "snapshot_ms": snapshot_ms,
        "modules": len(snapshot.modules),
        "classes": len(snapshot.classes),
    }


def restart_seconds(backend: str) -> float:
    """Seconds from stopping ``backend``'s workers to a fresh one answering (``pool.warm``)."""
    from dtype_explorer import pool

    pool.warm([backend])
    pool.shutdown()
    started = time.perf_counter()
    pool.warm([backend])
    seconds = time.perf_counter() - started
    pool.shutdown()
    return seconds


def _plus_one(x: int) -> int:
    return x + 1


def user_call_ms(backend: str, repeats: int) -> float:
    """Median ms of ``pool.call(backend, _plus_one, i)`` (user code) on a warm worker."""
    from dtype_explorer import pool

    pool.call(backend, _plus_one, 0, timeout=300).result()
    times = []
    for i in range(repeats):
        started = time.perf_counter()
        pool.call(backend, _plus_one, i, timeout=300).result()
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)[len(times) // 2]


def site_hash(spec: str) -> dict:
    """Seconds to hash engine ``spec``'s installed files (median of 5), and their count."""
    from dtype_explorer import engines

    engine = engines.get(spec) or engines.create(spec, progress=False)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        files = engines.verify_site(engine)
        times.append(time.perf_counter() - started)
    return {"engine": engine.spec, "seconds": sorted(times)[2], "files": files}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backends", default="numpy,jax,torch,tensorflow")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--engine", default="keras==3.11.3")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.here:
        print(json.dumps(here(args.repeat)))
        return
    rows = []
    for backend in args.backends.split(","):
        row = in_backend(__file__, backend, "--repeat", str(args.repeat))
        row["user_call_ms"] = user_call_ms(backend, args.repeat)
        row["restart_s"] = restart_seconds(backend)
        rows.append(row)
    hashed = site_hash(args.engine) if args.engine else None
    if args.json:
        print(json.dumps({"rows": rows, "site_hash": hashed}))
        return
    print(f"load average {os.getloadavg()[0]:.1f}; wall time, median of {args.repeat}")
    print(
        "| backend | Dense probe ms | check ms | check / probe | snapshot ms | user call ms "
        "| restart s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['probe_ms']:.2f} | {r['check_ms']:.2f} "
            f"| {r['check_ms'] / r['probe_ms']:.2f}x | {r['snapshot_ms']:.1f} "
            f"| {r['user_call_ms']:.2f} | {r['restart_s']:.1f} |"
        )
    if hashed:
        print(
            f"site hash of {hashed['engine']}: {hashed['seconds'] * 1000:.0f} ms "
            f"({hashed['files']} files)"
        )


if __name__ == "__main__":
    main()
