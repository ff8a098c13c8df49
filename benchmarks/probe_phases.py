"""Where a warm ``dx.probe`` goes, phase by phase, beside a bare construct-and-call of the same
layer (issue 44 item 2): the cells of ``probe_wait.py``, each taken apart.

    python benchmarks/probe_phases.py --backends numpy,jax --layers Embedding,Dense,Conv1D
    python benchmarks/probe_phases.py --backends numpy --repeats 30 --json

Each backend runs in its own process (Keras imported there for the bare call). Per cell, the
medians of ``--repeats`` alternating runs (wall, milliseconds):

* ``bare``: ``cls(**kwargs)(*samples)`` in this process, its output read
  (``_harness.computed``).
* ``probe``: ``dx.probe(..., backend=<this one>, use_cache=False)`` + ``str(result)``, as the
  user waits (``probe_wait.py``'s measure).
* ``keras``: the worker's own run of the probe (``result.timings["total_ms"]``: construct,
  traced call, symbolic call, reference run, expectations, op trace), and in it
  ``construct + call + declared + numerics``, the stages that run Keras.
* ``trace``: what the op trace adds to that run: ``keras_run.run_probe`` in this process with
  the trace on and off (its wrappers resident, as in a worker), CPU time.
* ``floor``: a round trip to the same warm worker that runs nothing (``pool.warm``: it
  describes itself): pebble's hand-over both ways.
* ``answer``: the worker's JSON of the answer and the front's validated read of it.
* ``text``: ``str(result)``.
* ``rest``: ``probe`` less all of the above: the front's checks of the question (spec, cache
  key's settings, backends) and the worker's own bookkeeping around the run (settings put
  back, warnings, memory check), plus scheduling.
* ``cpu``: CPU time per probe of this process (``probe + text``: all its threads) and of the
  worker (its main thread, ``/proc/<pid>/schedstat``, Linux), beside the bare call's: what a
  loaded machine's wall figures hide (on an idle one the wall is at least their sum).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import _harness as harness  # benchmarks/, beside this script
from probe_wait import LAYERS

KERAS_STAGES = ("construct_ms", "call_ms", "declared_ms", "numerics_ms")


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def measure_layer(name: str, repeats: int) -> dict:
    """One cell, taken apart (wall ms, medians; ``trace`` in CPU ms)."""
    import keras
    import numpy as np

    import dtype_explorer as dx
    from dtype_explorer import pool
    from dtype_explorer.records import ProbeResult

    kwargs, shapes, dtype = LAYERS[name]
    backend = keras.backend.backend()
    rng = np.random.default_rng(0)
    samples = [
        (rng.integers(0, 50, s) if dtype == "int32" else rng.uniform(-3, 3, s)).astype(dtype)
        for s in shapes
    ]
    cls = getattr(keras.layers, name)

    def probe() -> ProbeResult:
        return dx.probe(
            name, dtype, backend=backend, kwargs=kwargs, shape=list(shapes), use_cache=False
        )

    names = ("bare", "probe", "floor", "write", "read", "text", "keras", "stages")
    times: dict[str, list[float]] = {k: [] for k in (*names, "bare_cpu", "front_cpu", "worker_cpu")}
    result = probe()
    cls(**kwargs)(*samples), str(result)  # warm-up
    worker = pool.warm([backend])[backend]["pid"]
    for _ in range(repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        harness.computed(cls(**kwargs)(*samples))
        t1 = time.perf_counter()
        c1, w1 = time.process_time(), _thread_cpu(worker)
        result = probe()
        text = str(result)
        t2 = time.perf_counter()
        c2, w2 = time.process_time(), _thread_cpu(worker)
        times["bare_cpu"].append((c1 - c0) * 1000)
        times["front_cpu"].append((c2 - c1) * 1000)
        times["worker_cpu"].append((w2 - w1) * 1000)
        pool.warm([backend])
        t3 = time.perf_counter()
        sent = result.to_json(exclude_computed_fields=True)
        t4 = time.perf_counter()
        ProbeResult.from_json(sent)
        t5 = time.perf_counter()
        str(result)
        t6 = time.perf_counter()
        del text
        for key, (a, b) in {
            "bare": (t0, t1),
            "probe": (t1, t2),
            "floor": (t2, t3),
            "write": (t3, t4),
            "read": (t4, t5),
            "text": (t5, t6),
        }.items():
            times[key].append((b - a) * 1000)
        times["keras"].append(result.timings["total_ms"])
        times["stages"].append(sum(result.timings.get(k, 0.0) for k in KERAS_STAGES))
    row = {k: _median(v) for k, v in times.items()}
    row.update(_trace_cost(result.spec, repeats))
    answer = row["write"] + row["read"]
    row["rest"] = round(row["probe"] - row["keras"] - row["floor"] - answer - row["text"], 3)
    return {"backend": backend, "layer": name, "steps": len(result.trace), **row}


def _thread_cpu(pid: int) -> float:
    """Seconds worker ``pid``'s main thread has run (``schedstat``: nanoseconds; 0 where the
    system does not say)."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as stat:
            return int(stat.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def _trace_cost(spec: object, repeats: int) -> dict[str, float]:
    """The probe run in this process with the op trace on and off, its wrappers resident (as
    in a worker), alternating; CPU ms. Run after the bare calls: the wrappers stay."""
    from dtype_explorer import keras_run

    keras_run.keep_trace_installed()
    on, off = [], []
    for _ in range(repeats + 2):
        t0 = time.process_time()
        keras_run.run_probe(spec)
        t1 = time.process_time()
        keras_run.run_probe(spec, trace=False)
        t2 = time.process_time()
        on.append((t1 - t0) * 1000)
        off.append((t2 - t1) * 1000)
    return {"run_traced_cpu": _median(on[2:]), "run_untraced_cpu": _median(off[2:])}


def measure_here(repeats: int, layers: str = "") -> list[dict]:
    """Every layer of :data:`LAYERS` (or those named, comma-separated) on this backend; the
    in-process runs come last (they leave the op trace's wrappers in place)."""
    names = layers.split(",") if layers else list(LAYERS)
    return [measure_layer(name, repeats) for name in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="numpy,jax")
    parser.add_argument("--layers", default="")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.here:
        print(json.dumps(measure_here(args.repeats, args.layers)))
        return
    rows = []
    for backend in args.backends.split(","):
        rows += harness.in_backend(
            __file__, backend, "--repeats", str(args.repeats), "--layers", args.layers
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        "| backend | layer | steps | bare | probe + text | worker's run (Keras stages) "
        "| trace (CPU, in process) | floor | answer write + read | text | rest | probe / bare "
        "| worker's run / bare | CPU: bare, front + worker (ratio) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        trace = r["run_traced_cpu"] - r["run_untraced_cpu"]
        print(
            f"| {r['backend']} | {r['layer']} | {r['steps']} | {r['bare']:.2f} "
            f"| {r['probe']:.2f} | {r['keras']:.2f} ({r['stages']:.2f}) | {trace:.2f} "
            f"| {r['floor']:.2f} | {r['write']:.2f} + {r['read']:.2f} | {r['text']:.2f} "
            f"| {r['rest']:.2f} | {r['probe'] / r['bare']:.2f}x | {r['keras'] / r['bare']:.2f}x "
            f"| {r['bare_cpu']:.2f}, {r['front_cpu']:.2f} + {r['worker_cpu']:.2f} "
            f"({(r['front_cpu'] + r['worker_cpu']) / r['bare_cpu']:.2f}x) |"
        )


if __name__ == "__main__":
    main()
