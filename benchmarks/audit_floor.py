"""The floor under ``check_model``: the least an audit that reads each op of the forward pass
can cost, next to ``check_model`` itself, each against a bare call, in one run and a fresh
process per backend (issue 38's and issue 44's goal: an audit at most 3x a bare call).

    python benchmarks/audit_floor.py --backend jax                      # the 3-Dense model
    python benchmarks/audit_floor.py --backend jax --model resnet50 --repeats 3

The floor is ``trace_floor.Floor`` around every public function of ``keras.src.ops`` (what
Keras's layers call): per op, the op, its caller's line and the input and output dtypes
(``floor, dtypes``), and also whether its output holds an inf or NaN, read as the op ends
(``floor, values``: NumPy's max and min, a 16-bit float's bits as the trace reads them). For an
audit under a mixed policy, the floor is that traced pass of the mixed model plus one bare
pass of the float32 model, the per-layer reference (``floor, values + float32 reference``).
Nothing else of the audit is in it: no layer records, casts' losses, rules, graph, question or
fixes. Rows, each the median of paired runs (``_harness.paired``) against its bare call:

* ``float32``: the float32 model; its floors and ``check_model(model, x)``;
* ``policy=P``: the float32 model audited under ``P`` (the clone's pass and the reference)
  against the float32 model's call;
* ``built P``: the model built under ``P`` (weights copied) against its own call.

Models: ``dense`` (``audit_policy.py``'s 3-Dense model, (32, 128), ``mixed_bfloat16``) and
``resnet50`` (``keras.applications.ResNet50(weights=None)``, 2x96x96x3, ``mixed_float16``, as
``audit_phases.py``).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness
import trace_floor


def _models(name: str) -> tuple[Any, Any, Any, str]:
    """(float32 model, the same built under the policy with its weights, sample, policy)."""
    import keras
    import numpy as np

    if name == "dense":
        x = np.random.default_rng(0).uniform(-3, 3, (32, 128)).astype("float32")

        def build(policy: str | None) -> Any:
            inputs = keras.Input((128,))
            h = keras.layers.Dense(64, activation="relu", dtype=policy)(inputs)
            h = keras.layers.Dense(64, activation="relu", dtype=policy)(h)
            return keras.Model(
                inputs, keras.layers.Dense(10, activation="softmax", dtype=policy)(h)
            )

        plain, policy = build(None), "mixed_bfloat16"
        mixed = build(policy)
    else:
        x = np.random.default_rng(0).uniform(0, 1, (2, 96, 96, 3)).astype("float32")
        plain, policy = (
            keras.applications.ResNet50(weights=None, input_shape=(96, 96, 3)),
            "mixed_float16",
        )
        keras.config.set_dtype_policy(policy)
        try:
            mixed = keras.applications.ResNet50(weights=None, input_shape=(96, 96, 3))
        finally:
            keras.config.set_dtype_policy("float32")
    mixed.set_weights(plain.get_weights())
    return plain, mixed, x, policy


def _synced(model: Any, x: Any) -> Callable:
    """``model(x)`` with its output read (jax dispatches asynchronously)."""
    import numpy as np

    def call() -> None:
        np.asarray(model(x))

    return call


def measure_here(repeats: int, clock_name: str, model_name: str = "dense") -> list[dict]:
    from keras.src import ops as keras_ops

    from dtype_explorer import check_model

    names = tuple(
        name
        for name, fn in vars(keras_ops).items()
        if not name.startswith("_") and inspect.isfunction(fn)
    )

    def floor(values: str) -> Callable:
        return trace_floor.Floor(values, keras_ops, names, operators=False).run

    plain, mixed, x, policy = _models(model_name)
    bare, bare_mixed = _synced(plain, x), _synced(mixed, x)

    def with_reference(model: Any) -> Callable:
        def run() -> None:
            floor("now")(_synced(model, x))
            bare()

        return run

    cases = [
        ("float32", "floor, dtypes", bare, functools.partial(floor("none"), bare)),
        ("float32", "floor, values", bare, functools.partial(floor("now"), bare)),
        ("float32", "check_model", bare, lambda: check_model(plain, x)),
        (f"policy={policy}", "floor, values + float32 reference", bare, with_reference(mixed)),
        (f"policy={policy}", "check_model", bare, lambda: check_model(plain, x, policy=policy)),
        (f"built {policy}", "floor, values + float32 reference", bare_mixed, with_reference(mixed)),
        (f"built {policy}", "check_model", bare_mixed, lambda: check_model(mixed, x)),
    ]
    now = _harness.clock(clock_name)
    return [
        _harness.paired_row(
            f"{model_name}, {audit}", what, _harness.paired(base, work, repeats, now), "measured"
        )
        for audit, what, base, work in cases
    ]


def main() -> None:
    model = ("--model", {"default": "dense", "choices": ("dense", "resnet50")})
    args = _harness.command_line(__doc__.splitlines()[0], repeats=7, clock="wall", options=(model,))
    if args.here:
        print(json.dumps(measure_here(args.repeats, args.clock, args.model)))
        return
    load = os.getloadavg()[0]
    rows = _harness.in_backend(__file__, args.backend, *_harness.forwarded(args))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{args.backend}; load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    _harness.print_table(rows, "measured", args.clock, args.repeats)


if __name__ == "__main__":
    main()
