"""``dx.probe`` as the user waits (the answer asked of a warm worker, the op trace on, no
cache) against a bare construct-and-call of the same layer in the user's own process, on each
backend, alternating in one run: issue 44's 20 cells.

    python benchmarks/probe_wait.py                          # 5 backends x 5 layers, a table
    python benchmarks/probe_wait.py --backends numpy --repeats 9 --json

Each backend runs in its own process (Keras fixes its backend at import): it imports Keras
(the user's session), makes the backend's worker answer once (the warm-up: the worker started,
its caches filled), then alternates a bare ``cls(**kwargs)(*samples)``, its output read as NumPy
(``_harness.computed``: computed, as the probe computes it), with ``dx.probe(...,
backend=<this one>, use_cache=False)`` and, beside it, the answer's text (``str(result)``:
what a script prints). Wall time (the user waits for the worker too); min and median.
``--in-process``: ``dx.probe(...)`` with no ``backend``, its default: the probe runs in the
user's own process, on the backend Keras imported (no worker, no cache).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import _harness as harness  # benchmarks/, beside this script

#: Issue 44's layers: (kwargs, input shapes, input dtype).
LAYERS = {
    "Dense": ({"units": 16}, ((8, 32),), "float32"),
    "Conv1D": ({"filters": 8, "kernel_size": 3}, ((4, 16, 3),), "float32"),
    "LSTM": ({"units": 8}, ((4, 10, 8),), "float32"),
    "MultiHeadAttention": ({"num_heads": 2, "key_dim": 4}, ((2, 6, 8), (2, 6, 8)), "float32"),
    "Embedding": ({"input_dim": 50, "output_dim": 8}, ((4, 10),), "int32"),
}
BACKENDS = ("jax", "tensorflow", "torch", "numpy", "openvino")


def measure_layer(name: str, repeats: int, in_process: bool = False) -> dict:
    """Bare construct-and-call vs ``dx.probe`` (+ its text) of one layer, alternating; the
    probe asked of this backend's worker, or (``in_process``) run in this process."""
    import keras
    import numpy as np

    import dtype_explorer as dx

    kwargs, shapes, dtype = LAYERS[name]
    backend = keras.backend.backend()
    rng = np.random.default_rng(0)
    samples = [
        rng.integers(0, 50, s).astype(dtype) if dtype == "int32" else rng.uniform(-3, 3, s)
        for s in shapes
    ]
    samples = [s.astype(dtype) for s in samples]
    cls = getattr(keras.layers, name)

    def probe() -> object:
        where = None if in_process else backend  # None: dx.probe's default, this process
        result = dx.probe(
            name, dtype, backend=where, kwargs=kwargs, shape=list(shapes), use_cache=False
        )
        assert result.status == "ok" and result.trace, result
        return result

    def bare() -> None:
        harness.computed(cls(**kwargs)(*samples))

    times: dict[str, list[float]] = {"bare": [], "probe": [], "text": []}
    bare(), str(probe())  # warm-up
    for _ in range(repeats):
        t0 = time.perf_counter()
        bare()
        t1 = time.perf_counter()
        result = probe()
        t2 = time.perf_counter()
        str(result)
        t3 = time.perf_counter()
        times["bare"].append(t1 - t0)
        times["probe"].append(t2 - t1)
        times["text"].append(t3 - t2)
    ratios = [(p + t) / b for b, p, t in zip(times["bare"], times["probe"], times["text"])]
    return {
        "backend": backend,
        "layer": name,
        "steps": len(result.trace),
        **{f"{k}_ms": round(statistics.median(v) * 1000, 2) for k, v in times.items()},
        "ratio_median": round(statistics.median(ratios), 2),
        "ratio_min": round(min(ratios), 2),
    }


def measure_here(
    repeats: int, clock: str = "wall", layers: str = "", in_process: bool = False
) -> list[dict]:
    """Every layer of :data:`LAYERS` (or those named, comma-separated) on this backend."""
    names = layers.split(",") if layers else LAYERS
    return [measure_layer(name, repeats, in_process) for name in names]


def measure(backends: str, repeats: int, layers: str = "", in_process: bool = False) -> list[dict]:
    """The rows of every backend named (comma-separated), each backend in its own process."""
    rows: list[dict] = []
    flag = ["--in-process"] if in_process else []
    for backend in backends.split(","):
        rows.extend(
            harness.in_backend(
                __file__, backend, "--repeats", str(repeats), "--layers", layers, *flag
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--layers", default="")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--in-process", action="store_true", help="dx.probe's default: here")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.here:
        print(
            json.dumps(measure_here(args.repeats, layers=args.layers, in_process=args.in_process))
        )
        return
    load = os.getloadavg()[0]
    rows = measure(args.backends, args.repeats, args.layers, args.in_process)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}; wall, {args.repeats} repeats")
    print("| backend | layer | steps | bare ms | probe ms | text ms | ratio min | median |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['layer']} | {r['steps']} | {r['bare_ms']:.1f} "
            f"| {r['probe_ms']:.1f} | {r['text_ms']:.1f} | {r['ratio_min']:.2f}x "
            f"| {r['ratio_median']:.2f}x |"
        )


if __name__ == "__main__":
    main()
