"""``check_model`` as built (float32) and under a policy (``mixed_bfloat16``: the model is
cloned under it) against a bare call of the same model, alternating in one run.

    python benchmarks/audit_policy.py                        # jax, a table
    python benchmarks/audit_policy.py --backend torch --repeats 9 --json

The model is ``Dense(64, relu) -> Dense(64, relu) -> Dense(10, softmax)`` on a (32, 128)
float32 sample (functional). Wall time; min and median of the ratio to ``model(x)`` and, for the
policy (row ``mixed_bfloat16/own``), to a call of the same model built under that policy by
raw Keras (its autocasts are the forward pass the audit needs). Issue 44's goal: <= 3x.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import _harness as harness  # benchmarks/, beside this script

SHAPE = (32, 128)
POLICY = "mixed_bfloat16"


def measure_here(repeats: int) -> list[dict]:
    """The float32 and the policy audit's ratios to ``model(x)`` on this process's backend."""
    import keras
    import numpy as np

    from dtype_explorer import check_model

    x = np.random.default_rng(0).uniform(-3, 3, SHAPE).astype("float32")
    inputs = keras.Input(SHAPE[1:])
    h = keras.layers.Dense(64, activation="relu")(inputs)
    h = keras.layers.Dense(64, activation="relu")(h)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(h))
    twin = keras.models.clone_model(  # raw Keras: the same model built under the policy
        model,
        clone_function=lambda layer: type(layer).from_config(
            {**layer.get_config(), "dtype": POLICY}
        ),
    )
    twin.set_weights(model.get_weights())
    works = {
        "call": lambda: harness.computed(model(x)),
        "call under policy": lambda: harness.computed(twin(x)),
        "float32": lambda: check_model(model, x),
        POLICY: lambda: check_model(model, x, policy=POLICY),
    }
    for work in works.values():  # warm-up
        work()
    times: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(repeats):
        for name, work in works.items():
            t0 = time.perf_counter()
            work()
            times[name].append(time.perf_counter() - t0)
    rows = []
    for name, bare in (("float32", "call"), (POLICY, "call"), (POLICY, "call under policy")):
        ratios = [a / b for a, b in zip(times[name], times[bare])]
        rows.append(
            {
                "backend": keras.backend.backend(),
                "audit": name if bare == "call" else f"{name}/own",
                "call_ms": round(statistics.median(times[bare]) * 1000, 2),
                "audit_ms": round(statistics.median(times[name]) * 1000, 2),
                "ratio_median": round(statistics.median(ratios), 2),
                "ratio_min": round(min(ratios), 2),
            }
        )
    return rows


def in_backend(backend: str, repeats: int) -> list[dict]:
    """:func:`measure_here`'s rows, run in a fresh process on ``backend``."""
    return harness.in_backend(__file__, backend, "--repeats", str(repeats))


def main() -> None:
    args = harness.command_line(__doc__.splitlines()[0], repeats=7)
    if args.here:
        print(json.dumps(measure_here(args.repeats)))
        return
    load = os.getloadavg()[0]
    rows = in_backend(args.backend, args.repeats)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}; wall, {args.repeats} repeats")
    print("| backend | audit | call ms | audit ms | ratio min | median |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['audit']} | {r['call_ms']:.1f} | {r['audit_ms']:.1f} "
            f"| {r['ratio_min']:.2f}x | {r['ratio_median']:.2f}x |"
        )


if __name__ == "__main__":
    main()
