"""Engines: what creating one costs (time, disk) and the warm probe round trip on an engine's
worker against the installed Keras's worker, measured in the same run.

    python benchmarks/engines.py                      # keras==3.11.3 on numpy, a table
    python benchmarks/engines.py --engine keras==3.12.0 --backend jax --repeats 50 --json
    python benchmarks/engines.py --tf-keras           # also Keras 2: create, round trip

Engines are created in a fresh temporary directory (``$DTYPE_EXPLORER_ENGINES_DIR``), so the
creation is a real one (pip's own HTTP cache may be warm: say so when you record numbers).
Creation is split into its steps from the progress lines: resolve (``pip install --dry-run
--report``), install (``pip install --no-deps --target``) and check (import in a subprocess).
The round trip is ``pool.submit`` of ``Dense(4)`` on float32 (2, 3) without the cache, after
both workers are warm; default and engine alternate; medians of wall time. With
``--tf-keras`` the Keras 2 engine is measured too, against the installed Keras, on tensorflow.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time


def create(spec: str) -> dict:
    from dtype_explorer import engines

    marks: list[tuple[float, str]] = []
    started = time.perf_counter()
    engine = engines.create(spec, progress=lambda line: marks.append((time.perf_counter(), line)))
    total = time.perf_counter() - started
    steps = [(t, line) for t, line in marks if line.startswith("[engine]")]
    named = {}
    for (t0, line), (t1, _) in zip(steps, [*steps[1:], (started + total, "")]):
        word = line.split()[1]
        named[
            {"resolving": "resolve_s", "installing": "install_s", "checking": "check_s"}.get(
                word, word
            )
        ] = round(t1 - t0, 2)
    again = time.perf_counter()
    engines.create(spec, progress=False)
    return {
        "engine": engine.spec,
        "create_s": round(total, 2),
        **{k: v for k, v in named.items() if k.endswith("_s")},
        "reuse_ms": round((time.perf_counter() - again) * 1000, 2),
        "disk_mib": round(engine.disk_bytes / 2**20, 1),
        "packages": list(engine.packages),
    }


def round_trip(engine: str, backend: str, repeats: int) -> dict:
    from dtype_explorer import pool
    from dtype_explorer.records import ProbeSpec

    specs = {
        name: ProbeSpec(
            target="Dense", kwargs={"units": 4}, shapes=((2, 3),), backend=backend, engine=e
        )
        for name, e in (("default", None), ("engine", engine))
    }
    t0 = time.perf_counter()
    pool.warm([backend])
    default_start = time.perf_counter() - t0
    t0 = time.perf_counter()
    pool.warm([backend], engine=engine)
    engine_start = time.perf_counter() - t0
    times: dict[str, list[float]] = {"default": [], "engine": []}
    for _ in range(3):  # warm-up: first builds, first Dense
        for spec in specs.values():
            pool.submit(spec, use_cache=False).result()
    answers = {}
    for _ in range(repeats):
        for name, spec in specs.items():
            t = time.perf_counter()
            result = pool.submit(spec, use_cache=False).result()
            times[name].append(time.perf_counter() - t)
            assert result.status == "ok", result.error
            answers[name] = result.versions["keras"]
    default = statistics.median(times["default"]) * 1000
    on_engine = statistics.median(times["engine"]) * 1000
    pool.shutdown()
    return {
        "backend": backend,
        "keras": answers,
        "worker_start_s": {"default": round(default_start, 2), "engine": round(engine_start, 2)},
        "round_trip_ms": {"default": round(default, 2), "engine": round(on_engine, 2)},
        "ratio": round(on_engine / default, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="keras==3.11.3")
    parser.add_argument("--backend", default="numpy")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--tf-keras", action="store_true", help="also create tf_keras")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dx-bench-engines-") as root:
        os.environ["DTYPE_EXPLORER_ENGINES_DIR"] = root
        os.environ.setdefault("DTYPE_EXPLORER_CACHE_DIR", os.path.join(root, "cache"))
        created = [create(args.engine)]
        if args.tf_keras:
            created.append(create("tf_keras"))
        trips = [round_trip(args.engine, args.backend, args.repeats)]
        if args.tf_keras:  # Keras 2 against the installed Keras 3, both on tensorflow
            trips.append(round_trip("tf_keras", "tensorflow", args.repeats))
    out = {"load_average": round(os.getloadavg()[0], 1), "created": created, "round_trip": trips}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"load average {out['load_average']}")
    print("| engine | create | resolve | install | check | reuse | disk |")
    print("|---|---|---|---|---|---|---|")
    for c in created:
        print(
            f"| {c['engine']} | {c['create_s']} s | {c.get('resolve_s', '-')} s | "
            f"{c.get('install_s', '-')} s | {c.get('check_s', '-')} s | {c['reuse_ms']} ms | "
            f"{c['disk_mib']} MiB |"
        )
    for trip in trips:
        rt = trip["round_trip_ms"]
        print(
            f"warm round trip on {trip['backend']}: default (keras {trip['keras']['default']}) "
            f"{rt['default']} ms, engine (keras {trip['keras']['engine']}) {rt['engine']} ms, "
            f"ratio {trip['ratio']}; worker start {trip['worker_start_s']}"
        )


if __name__ == "__main__":
    main()
