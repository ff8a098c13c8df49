"""A worker's answer on its way to the front, for each layer of ``probe_wait.py`` (issue 44
item 2): the ``ProbeResult`` as the worker sends it and the front reads it back, pickled between
as the pool's pipe does. The way every answer went before (its fields: ``to_dict`` there,
``from_dict`` here) against the way it goes now (its compact JSON without the computed
facts: ``runtime._worker.answer_of`` there, ``read_answer`` here), alternating in one process,
CPU time (the machine is shared: wall time would measure the others), min and median; and
the floor of the front's read, the same JSON only parsed (``pydantic_core.from_json``).

    python benchmarks/answer_round_trip.py                           # 4 backends, a table
    python benchmarks/answer_round_trip.py --backends numpy --repeats 50 --json
    python benchmarks/answer_round_trip.py --root /work/main   # another checkout's code

``--root`` measures another checkout's ``dtype_explorer`` (one from before issue 44 has no
``answer_of``: only its ``fields`` way is measured, as every answer went there).

Each backend runs in its own process: the probe is run once in that process (as a worker runs
it, op trace on), then both ways are timed on its record. On this checkout the ``fields`` way
runs on today's records (only those with computed facts carry the validator that drops them);
``--root`` with a checkout from before gives that way as it was.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import statistics
import time

import _harness as harness  # benchmarks/, beside this script
import probe_wait
import pydantic_core

BACKENDS = ("jax", "tensorflow", "torch", "numpy")


def measure_layer(name: str, repeats: int) -> dict:
    """Both ways of one layer's answer, alternating; CPU milliseconds per answer."""
    import keras

    from dtype_explorer import keras_run
    from dtype_explorer.records import ProbeResult
    from dtype_explorer.runtime import _worker

    kwargs, shapes, dtype = probe_wait.LAYERS[name]
    backend = keras.backend.backend()
    spec = keras_run.make_spec(name, dtype, None, backend, kwargs=kwargs, shape=list(shapes))
    result = keras_run.run_probe(spec)
    assert result.status == "ok" and result.trace, result

    def fields() -> tuple[float, float]:
        t0 = time.process_time()
        sent = pickle.dumps(result.to_dict())  # computed facts included, dropped when read
        t1 = time.process_time()
        back = ProbeResult.from_dict(pickle.loads(sent))
        t2 = time.process_time()
        assert back == result
        return t1 - t0, t2 - t1

    def compact() -> tuple[float, float]:
        if not hasattr(_worker, "answer_of"):  # a checkout from before (--root)
            return math.nan, math.nan
        t0 = time.process_time()
        sent = pickle.dumps(_worker.answer_of(result))
        t1 = time.process_time()
        back = _worker.read_answer(pickle.loads(sent))
        t2 = time.process_time()
        assert back == result
        return t1 - t0, t2 - t1

    times: dict[str, list[tuple[float, float]]] = {"fields": [], "json": []}
    fields(), compact()  # warm-up: each model's validator and serializer built
    for _ in range(repeats):
        times["fields"].append(fields())
        times["json"].append(compact())
    totals = {k: [a + b for a, b in v] for k, v in times.items()}
    parse = []  # the floor of the front's read: the JSON parsed, no record validated
    if hasattr(_worker, "answer_of"):
        text = result.to_json(exclude_computed_fields=True)
        for _ in range(repeats):
            t0 = time.process_time()
            pydantic_core.from_json(text)
            parse.append(time.process_time() - t0)
    ms = {
        f"{way}_{part}_ms": round(statistics.median(t[i] for t in v) * 1000, 3)
        for way, v in times.items()
        for i, part in enumerate(("send", "read"))
    }
    return {
        "backend": backend,
        "layer": name,
        "steps": len(result.trace),
        "json_kb": round(len(result.to_json(exclude_computed_fields=True)) / 1024, 1),
        **ms,
        "fields_ms": round(statistics.median(totals["fields"]) * 1000, 3),
        "json_ms": round(statistics.median(totals["json"]) * 1000, 3),
        "json_min_ms": round(min(totals["json"]) * 1000, 3),
        "parse_ms": round(statistics.median(parse) * 1000, 3) if parse else math.nan,
        "fields_min_ms": round(min(totals["fields"]) * 1000, 3),
    }


def measure(backends: str, repeats: int, root: str = "") -> list[dict]:
    """The rows of every backend named, each in its own process (``root``: that checkout's
    ``dtype_explorer``)."""
    if root:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    rows: list[dict] = []
    for backend in backends.split(","):
        rows.extend(harness.in_backend(__file__, backend, "--repeats", str(repeats)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--root", default="", help="another checkout's code")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.here:
        print(json.dumps([measure_layer(name, args.repeats) for name in probe_wait.LAYERS]))
        return
    load = os.getloadavg()[0]
    rows = measure(args.backends, args.repeats, args.root)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}; CPU ms per answer, median")
    print(
        "| backend | layer | steps | JSON kB | fields: send + read | JSON: send + read "
        "| JSON parse alone | ratio |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['layer']} | {r['steps']} | {r['json_kb']} "
            f"| {r['fields_send_ms']:.2f} + {r['fields_read_ms']:.2f} "
            f"| {r['json_send_ms']:.2f} + {r['json_read_ms']:.2f} | {r['parse_ms']:.2f} "
            f"| {r['fields_ms'] / max(r['json_ms'], 1e-6):.1f}x |"
        )


if __name__ == "__main__":
    main()
