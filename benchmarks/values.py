"""The cost of the user's own values (``values=``) against the same bare work, in the same run.

    python benchmarks/values.py                      # numpy backend, a table
    python benchmarks/values.py --repeats 5 --json

For arrays of 1k, 64k and 1M float32 elements:

* *check*: ``make_spec(values=[x])`` (checked, encoded as base64 data) against NumPy's own
  serialisation of the same array (``np.save`` into memory), the bare way to make it travel;
* *json*: the spec to JSON and back (what crosses the pipe to a worker, what the cache
  stores), against ``np.save`` + ``np.load`` of the array;
* *key*: ``spec.cache_key()`` (the values hashed) against ``hashlib.sha256`` of the bytes;
* *probe*: ``run_probe`` of ``ops.abs`` on the user's array against bare
  ``keras.ops.abs(convert_to_tensor(x))`` (no op trace: ``benchmarks/probe.py`` measures it).

For a user's *instance* (issue 22: it travels as a ``.keras`` archive, never its config
alone), per instance (a built Dense, a Conv2D, an int8-quantized Dense, an adapted
TextVectorization):

* *send*: ``pool.target_payload(instance)`` (the archive written in memory, pickled) against
  the old payload, ``cloudpickle.dumps((type(instance), instance.get_config()))``;
* *load*: ``Packed.load()`` (the archive read back under safe mode, what a worker and the
  in-process copy do) against ``type(instance).from_config(config)``;
* and the bytes of each.

Medians of process time (``--clock cpu``, the default) or wall time.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import statistics
import time

SIZES = (1 << 10, 1 << 16, 1 << 20)


def measure(repeats: int, clock: str) -> list[dict]:
    import keras
    import numpy as np

    from dtype_explorer.keras_run import make_spec, run_probe
    from dtype_explorer.records import ProbeSpec

    now = time.process_time if clock == "cpu" else time.perf_counter
    backend = keras.backend.backend()

    def timed(work) -> float:
        work()  # warm-up
        runs = []
        for _ in range(repeats):
            start = now()
            work()
            runs.append((now() - start) * 1000)
        return statistics.median(runs)

    def saved(x: np.ndarray) -> bytes:
        buffer = io.BytesIO()
        np.save(buffer, x)
        return buffer.getvalue()

    rows = []
    for size in SIZES:
        x = np.random.default_rng(0).standard_normal(size).astype("float32")
        spec = make_spec("ops.abs", values=[x], backend=backend)
        text = spec.to_json()
        cases = _cases(keras, np, x, spec, backend, saved, make_spec, run_probe, ProbeSpec)
        for case, (bare, ours) in cases.items():
            bare_ms, ours_ms = timed(bare), timed(ours)
            rows.append(
                {
                    "backend": backend,
                    "elements": size,
                    "case": case,
                    "bare_ms": round(bare_ms, 3),
                    "ours_ms": round(ours_ms, 3),
                    "ratio": round(ours_ms / bare_ms, 2) if bare_ms else None,
                    "json_mb": round(len(text) / 1e6, 2),
                }
            )
    return rows + measure_instances(timed, backend)


def _instances(keras, np) -> dict:
    dense = keras.layers.Dense(16)
    dense.build((None, 32))
    conv = keras.layers.Conv2D(8, 3)
    conv.build((None, 16, 16, 3))
    quantized = keras.layers.Dense(256, dtype="bfloat16")
    quantized.build((None, 256))
    quantized.quantize("int8")
    text = keras.layers.TextVectorization()
    text.adapt([f"word{i} word{i + 1} word{i * 7 % 97}" for i in range(200)])
    return {"Dense": dense, "Conv2D": conv, "Dense int8": quantized, "TextVectorization": text}


def measure_instances(timed, backend: str) -> list[dict]:
    """The cost of sending and loading an instance as a ``.keras`` archive, against its config."""
    import cloudpickle
    import keras
    import numpy as np

    from dtype_explorer.keras_run import pack
    from dtype_explorer.runtime import pool

    rows = []
    for name, instance in _instances(keras, np).items():
        config = instance.get_config()
        packed = pack(instance)
        old = cloudpickle.dumps((type(instance), config))
        new = pool.target_payload(instance)
        cases = {
            "send": (
                lambda i=instance, c=config: cloudpickle.dumps((type(i), c)),
                lambda i=instance: pool.target_payload(i),
            ),
            "load": (lambda i=instance, c=config: type(i).from_config(c), packed.load),
        }
        for case, (bare, ours) in cases.items():
            bare_ms, ours_ms = timed(bare), timed(ours)
            rows.append(
                {
                    "backend": backend,
                    "elements": name,
                    "case": f"instance {case}",
                    "bare_ms": round(bare_ms, 3),
                    "ours_ms": round(ours_ms, 3),
                    "ratio": round(ours_ms / bare_ms, 2) if bare_ms else None,
                    "json_mb": f"{len(new) / 1e3:.1f} kB vs {len(old) / 1e3:.1f} kB",
                }
            )
    return rows


def _cases(keras, np, x, spec, backend, saved, make_spec, run_probe, probe_spec) -> dict:
    """Each case: (the bare work, dtype-explorer's), for one array ``x``."""
    return {
        "check": (lambda: saved(x), lambda: make_spec("ops.abs", values=[x], backend=backend)),
        "json": (
            lambda: np.load(io.BytesIO(saved(x))),
            lambda: probe_spec.from_json(spec.to_json()),
        ),
        "key": (lambda: hashlib.sha256(x.tobytes()).hexdigest(), spec.cache_key),
        "probe": (
            lambda: keras.ops.abs(keras.ops.convert_to_tensor(x)),
            lambda: run_probe(spec, trace=False),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure(args.repeats, args.clock)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        "| backend | elements | case | bare ms | ours ms | ratio | spec JSON MB (instance: bytes) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['elements']} | {r['case']} | {r['bare_ms']} | "
            f"{r['ours_ms']} | {r['ratio']}x | {r['json_mb']} |"
        )


if __name__ == "__main__":
    main()
