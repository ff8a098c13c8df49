"""The first audit and the first probe of a user's instance in a fresh process, as a user meets
them, on each backend: wall time, the process's resident memory added, and whether TensorFlow
was imported on the way, against the model's own first call in the same process.

    python benchmarks/first_use.py                     # jax, torch, numpy: 3 processes each
    python benchmarks/first_use.py --backends jax --repeats 5 --json

Each process imports Keras and ``dtype_explorer``, builds benchmarks/audit_policy.py's 3-Dense
model (functional, (32, 128) float32 sample), calls it once (``bare``: its first call, output
read as NumPy), then times the first ``check_model(model, x)`` and, after it, the first
``dx.probe(keras.layers.Dense(16), "float32", shape=[8, 32])`` of an instance (in the process:
the instance written to a ``.keras`` archive and loaded back). Memory is ``VmRSS`` read from
``/proc/self/status`` around each. Keras's ``serialize_keras_object`` asks whether TensorFlow is
available of every object it writes, which imports it where it is installed: a first config
or archive written on another backend imported all of TensorFlow
(``keras_run._lazy_tensorflow``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import _harness as harness  # benchmarks/, beside this script


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure_here() -> dict:
    """One fresh process's first call, first audit and first instance probe."""
    import keras
    import numpy as np

    import dtype_explorer as dx

    x = np.random.default_rng(0).uniform(-3, 3, (32, 128)).astype("float32")
    inputs = keras.Input((128,))
    h = keras.layers.Dense(64, activation="relu")(inputs)
    h = keras.layers.Dense(64, activation="relu")(h)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(h))
    t0 = time.perf_counter()
    harness.computed(model(x))
    bare = time.perf_counter() - t0
    row = {"backend": keras.backend.backend(), "bare_ms": round(bare * 1000, 1)}
    works = {
        "audit": lambda: str(dx.check_model(model, x)),
        "instance_probe": lambda: str(
            dx.probe(keras.layers.Dense(16), "float32", shape=[8, 32], use_cache=False)
        ),
    }
    for name, work in works.items():
        rss, t0 = _rss_mb(), time.perf_counter()
        work()
        took = time.perf_counter() - t0
        row[f"{name}_ms"] = round(took * 1000, 1)
        row[f"{name}_rss_mb"] = round(_rss_mb() - rss, 1)
        row[f"{name}_ratio"] = round(took / bare, 2)
        row[f"{name}_tensorflow"] = "tensorflow" in sys.modules
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["jax", "torch", "numpy"])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per backend")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.here:
        print(json.dumps(measure_here()))
        return
    rows = []
    for backend in args.backends:
        runs = [harness.in_backend(__file__, backend) for _ in range(args.repeats)]
        row = {"backend": backend, "runs": len(runs)}
        for key in runs[0]:
            values = [r[key] for r in runs]
            if isinstance(values[0], bool):
                row[key] = f"{sum(values)}/{len(values)}"
            elif isinstance(values[0], (int, float)):
                row[key] = statistics.median(values)
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"load average {os.getloadavg()[0]:.1f}; median of {args.repeats} fresh processes")
    print(
        "| backend | first call ms | first audit ms (x call) | +MB | TensorFlow imported "
        "| first instance probe ms | +MB | TensorFlow imported |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['bare_ms']} | {r['audit_ms']} ({r['audit_ratio']}x) "
            f"| {r['audit_rss_mb']} | {r['audit_tensorflow']} | {r['instance_probe_ms']} "
            f"| {r['instance_probe_rss_mb']} | {r['instance_probe_tensorflow']} |"
        )


if __name__ == "__main__":
    main()
