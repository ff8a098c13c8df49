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
    """``model(x)`` with its output read (jax dispatches asynchronously), through the
    backend's own ``convert_to_numpy`` (not a step of the floor; torch's bfloat16 widened)."""
    from keras.src import backend

    def call() -> None:
        backend.convert_to_numpy(model(x))

    return call


def _targets() -> list[tuple[Any, tuple[str, ...]]]:
    """What Keras's layers call: every public function of ``keras.src.ops``, of the backend's
    ``nn`` and ``numpy`` (activations and some layers call those directly), and the backend's
    ``cast`` and ``convert_to_tensor`` (the autocasts of inputs and variables)."""
    from keras.src import backend
    from keras.src import ops as keras_ops

    def functions(space: Any) -> tuple[str, ...]:
        return tuple(
            name
            for name, fn in vars(space).items()
            if not name.startswith("_") and inspect.isfunction(fn)
        )

    spaces = [(space, functions(space)) for space in (keras_ops, backend.nn, backend.numpy)]
    return [*spaces, (backend, ("cast", "convert_to_tensor"))]


def measure_here(repeats: int, clock_name: str, model_name: str = "dense") -> list[dict]:
    from dtype_explorer import check_model

    targets = _targets()
    floors = {
        values: trace_floor.Floor(values, targets, operators=False) for values in ("none", "now")
    }

    plain, mixed, x, policy = _models(model_name)
    bare, bare_mixed = _synced(plain, x), _synced(mixed, x)

    traced_mixed = functools.partial(floors["now"].run, bare_mixed)

    def with_reference() -> None:
        traced_mixed()
        bare()

    steps = {"float32": len(floors["now"].run(bare)), policy: len(traced_mixed())}
    cases = [
        ("float32", "floor, dtypes", bare, functools.partial(floors["none"].run, bare)),
        ("float32", "floor, values", bare, functools.partial(floors["now"].run, bare)),
        ("float32", "check_model", bare, lambda: check_model(plain, x)),
        (f"policy={policy}", "floor, values + float32 reference", bare, with_reference),
        (f"policy={policy}", "check_model", bare, lambda: check_model(plain, x, policy=policy)),
        (f"built {policy}", "floor, values + float32 reference", bare_mixed, with_reference),
        (f"built {policy}", "check_model", bare_mixed, lambda: check_model(mixed, x)),
    ]
    now = _harness.clock(clock_name)
    return [
        _harness.paired_row(
            f"{model_name} ({steps[policy if 'float32' not in audit else 'float32']} steps), "
            f"{audit}",
            what,
            _harness.paired(base, work, repeats, now),
            "measured",
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
