"""``dx.trace`` of issue 37's 100-step loop as a user waits on average: the mean of many calls
in a row (where the medians of ``trace_code.py`` leave out the cycle collector's full passes,
which come due every few dozen traces), beside the loop's own mean, and how many full passes
ran meanwhile.

    python benchmarks/trace_mean.py --backend jax --repeats 90
    PYTHONPATH=<another checkout> python benchmarks/trace_mean.py --backend jax   # before/after

A fresh process per backend; five traced warm-ups, then ``repeats`` untraced loops timed
whole, then ``repeats`` traces timed whole (wall time).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness
import trace_code


def measure_here(repeats: int) -> dict:
    import keras

    import dtype_explorer as dx

    loop = trace_code.cases()["100-step ops loop"]
    for _ in range(5):
        dx.trace(loop)
    t0 = time.perf_counter()
    for _ in range(repeats):
        loop()
    bare = (time.perf_counter() - t0) / repeats
    passes = gc.get_stats()[2]["collections"]
    t0 = time.perf_counter()
    for _ in range(repeats):
        dx.trace(loop)
    traced = (time.perf_counter() - t0) / repeats
    return {
        "backend": keras.backend.backend(),
        "bare_ms": bare * 1e3,
        "trace_ms": traced * 1e3,
        "ratio": traced / bare,
        "full_collections": gc.get_stats()[2]["collections"] - passes,
        "objects": len(gc.get_objects()),
    }


def main() -> None:
    args = _harness.command_line(__doc__.splitlines()[0], repeats=90)
    if args.here:
        print(json.dumps(measure_here(args.repeats)))
        return
    load = os.getloadavg()[0]
    row = _harness.in_backend(__file__, args.backend, *_harness.forwarded(args))
    if args.json:
        print(json.dumps(row))
        return
    print(
        f"{row['backend']}: load {load:.1f}; the loop {row['bare_ms']:.1f} ms, dx.trace "
        f"{row['trace_ms']:.1f} ms ({row['ratio']:.2f}x), means of {args.repeats}; "
        f"full collections meanwhile {row['full_collections']} ({row['objects']} objects)"
    )


if __name__ == "__main__":
    main()
