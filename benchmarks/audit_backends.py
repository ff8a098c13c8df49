"""``check_model(model, x, backends="all")`` on a warm pool against a bare call of the same
model, per backend re-probed: a BERT-base-sized keras-hub backbone (random weights, nothing
downloaded), its integer inputs re-probed on every usable backend.

    python benchmarks/audit_backends.py                  # tensorflow front, a table
    python benchmarks/audit_backends.py --repeats 5 --json

In a fresh process on ``--backend`` with a fresh cache directory: the pool is started by one
unmeasured audit of a small backbone with ``backends="all"``. Then, per repeat, a new
BERT-base (``BertBackbone``: 12 layers, hidden 768, heads 12, intermediate 3072, a vocabulary
and a number of segments one larger each repeat, so no re-probe is answered from the cache)
on a (1, 64) sample:

* ``call``: ``model(x)``, the median of three;
* ``audit``: ``check_model(model, x)``, on this backend only;
* ``all, live``: ``check_model(model, x, backends="all")`` whose re-probes are not cached;
* ``all, cached``: the same again, its re-probes answered from the cache.

Ratios are wall time over ``call``; ``per backend`` divides ``all, live`` by the number of
backends it re-probed on (every usable one, this one included), ``marginal per backend``
divides what the re-probes added (``all, live`` less ``audit``) by it. The re-probes are of the
layers that take the integer inputs: the token and segment embeddings (``num_segments`` is
one larger each repeat too). The workers' resident memory
(their PSS where readable, else RSS) is read before the first BERT-base and after the last.
Issue 44's goal: ``backends="all"`` on a warm pool <= 3x per backend.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

import _harness as harness  # benchmarks/, beside this script

BASE = {"num_layers": 12, "num_heads": 12, "hidden_dim": 768, "intermediate_dim": 3072}
VOCABULARY = 30522
LENGTH = 64


def _backbone(vocabulary: int, segments: int = 2, **sizes: int):
    import keras_hub

    return keras_hub.models.BertBackbone(
        vocabulary_size=vocabulary,
        num_segments=segments,
        max_sequence_length=512,
        **{**BASE, **sizes},
    )


def _sample(vocabulary: int, seed: int) -> dict:
    import numpy as np

    ids = np.random.default_rng(seed).integers(0, vocabulary, (1, LENGTH)).astype("int32")
    ones = np.ones((1, LENGTH), "int32")
    return {"token_ids": ids, "segment_ids": 0 * ones, "padding_mask": ones}


def _workers_mb() -> float:
    """The pool's workers' memory in MB (PSS where Linux gives it, else RSS)."""
    import psutil

    total = 0
    for child in psutil.Process().children(recursive=True):
        try:
            info = child.memory_full_info()
            total += getattr(info, "pss", info.rss)
        except psutil.Error:
            continue
    return total / 2**20


def _seconds(work) -> float:
    t0 = time.perf_counter()
    work()
    return time.perf_counter() - t0


def measure_here(repeats: int) -> dict:
    """The ratios of one run in this process (its cache directory made fresh first)."""
    os.environ["DTYPE_EXPLORER_CACHE_DIR"] = tempfile.mkdtemp(prefix="dx-bench-backends-")
    import keras

    import dtype_explorer as dx

    names = dx.pool.usable("all")
    small = _backbone(1000, num_layers=2, num_heads=2, hidden_dim=64, intermediate_dim=128)
    dx.check_model(small, _sample(1000, 0), backends="all")  # the pool started, warm
    before = _workers_mb()
    rows = []
    for repeat in range(repeats):
        vocabulary = VOCABULARY + repeat  # other layer configs: nothing re-probed is cached
        model, x = _backbone(vocabulary, segments=3 + repeat), _sample(vocabulary, repeat)
        model(x)
        read = lambda: harness.computed(model(x))  # noqa: B023, E731
        call = statistics.median(_seconds(read) for _ in range(3))
        audit = _seconds(lambda: dx.check_model(model, x))  # noqa: B023
        live = _seconds(lambda: dx.check_model(model, x, backends="all"))  # noqa: B023
        cached = _seconds(lambda: dx.check_model(model, x, backends="all"))  # noqa: B023
        rows.append({"call": call, "audit": audit, "live": live, "cached": cached})
    after = _workers_mb()

    def ratios(name: str, per: int = 1) -> list[float]:
        return [r[name] / r["call"] / per for r in rows]

    return {
        "front": keras.backend.backend(),
        "backends": names,
        "call_ms": statistics.median(r["call"] * 1e3 for r in rows),
        "live_ms": statistics.median(r["live"] * 1e3 for r in rows),
        "audit": ratios("audit"),
        "all_live": ratios("live"),
        "all_cached": ratios("cached"),
        "per_backend": ratios("live", len(names)),
        "marginal_per_backend": [(r["live"] - r["audit"]) / r["call"] / len(names) for r in rows],
        "workers_mb": [round(before), round(after)],
    }


def in_backend(backend: str, repeats: int) -> dict:
    """:func:`measure_here`'s figures, run in a fresh process on ``backend``."""
    return harness.in_backend(__file__, backend, "--repeats", str(repeats))


def main() -> None:
    args = harness.command_line(__doc__.splitlines()[0], backend="tensorflow", repeats=3)
    if args.here:
        print(json.dumps(measure_here(args.repeats)))
        return
    load = os.getloadavg()[0]
    found = in_backend(args.backend, args.repeats)
    if args.json:
        print(json.dumps(found, indent=2))
        return
    print(
        f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}; wall, {args.repeats} repeats; "
        f"front {found['front']}, re-probed on {', '.join(found['backends'])}; "
        f"call {found['call_ms']:.0f} ms, all live {found['live_ms']:.0f} ms (medians); "
        f"workers {found['workers_mb'][0]} -> {found['workers_mb'][1]} MB"
    )
    print("| audit / call | min | median |\n|---|---:|---:|")
    for name in ("audit", "all_live", "all_cached", "per_backend", "marginal_per_backend"):
        values = found[name]
        print(f"| {name} | {min(values):.2f}x | {statistics.median(values):.2f}x |")


if __name__ == "__main__":
    main()
