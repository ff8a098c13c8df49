"""The floor under ``check_model``: the least an audit that reads each op of the forward pass
can cost, next to ``check_model`` itself, each against a bare call, in one run and a fresh
process per backend (issue 38's and issue 44's goal: an audit at most 3x a bare call).

    python benchmarks/audit_floor.py --backend jax                      # the 3-Dense model
    python benchmarks/audit_floor.py --backend jax --model resnet50 --repeats 3
    python benchmarks/audit_floor.py --backend tensorflow --model resnet50 --rows parts

The floor is ``trace_floor.Floor`` around every public function of ``keras.src.ops`` (what
Keras's layers call): per op, the op, its caller's line and the input and output dtypes
(``floor, dtypes``), and also whether its output holds an inf or NaN, read as the op ends
(``floor, values``: NumPy's max and min, a 16-bit float's bits as the trace reads them). For an
audit under a mixed policy, the floor is that traced pass of the mixed model plus one bare
pass of the float32 model, the per-layer reference (``floor, values + float32 reference``).
Nothing else of the audit is in it: no layer records, casts' losses, rules, graph, question or
fixes.

``floor, + what issue 38 measures`` adds to that floor, for an audit under a mixed policy, the
measurements issue 38 asks of every audit and nothing else, each by the product's own function:
what each cast step that changes a dtype lost (``keras_run.cast_loss`` on its input and output,
the floor's ``cast`` and ``convert_to_tensor`` steps: the inputs' autocasts, Keras's explicit
casts), each autocast variable read in its layer's compute dtype screened for overflow and
underflow (Keras's own read, counted on its bits: ``float_bits.half_counts``, as the audit screens
a read before measuring it), the mixed pass's leaf outputs kept, and the per-layer float32
reference: the float32 model itself run with its leaf outputs kept and each compared
(``keras_run.layer_damage``, no clone made). It is what an audit that keeps issue 38's findings
costs at the least, with no record, rule, graph or question.

``--rows parts`` times that floor's parts one by one against the bare call of the model built
under the policy: the mixed pass with every op's values read and its leaf outputs kept, the
same with the casts' losses measured, the variable reads screened, the float32 reference's
pass alone, and that pass with every comparison (``layer_damage``).

Rows, each the median of paired runs (``_harness.paired``) against its bare call:

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


class MeasuredCasts(trace_floor.Floor):
    """``Floor("now")`` that also measures, for each ``cast`` or ``convert_to_tensor`` step that
    changes a dtype, what it lost (``keras_run.cast_loss``), as the audit measures each such
    step (a cast called inside another step is not one, as in the floor)."""

    CASTS = ("cast", "convert_to_tensor")

    def __init__(self, targets: list[tuple[Any, tuple[str, ...]]]) -> None:
        super().__init__("now", targets, operators=False)

    def _wrapped(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        traced = super()._wrapped(fn, name)
        if name not in self.CASTS:
            return traced
        local = self.local

        def measured(*args: Any, **kwargs: Any) -> Any:
            top = local.steps is not None
            out = traced(*args, **kwargs)
            if top and args:
                _cast_measured(args[0], out)
            return out

        return measured


def _cast_measured(before: Any, after: Any) -> None:
    """What a cast step lost, measured where the audit measures it: a cast whose dtype change
    can lose values (``dtype_conversions``: a narrowing, int to float, float to int; not the
    float16 -> float32 a BatchNormalization makes); tensorflow and jax arrays, read by NumPy
    as they are."""
    import numpy as np
    from keras.src import backend

    from dtype_explorer import keras_run
    from dtype_explorer.keras_run.trace._records import dtype_conversions

    if not (hasattr(before, "dtype") and hasattr(after, "dtype")):
        return
    source = backend.standardize_dtype(before.dtype)
    target = backend.standardize_dtype(after.dtype)
    if source != target and dtype_conversions(source, target):
        keras_run.cast_loss(
            np.asarray(before), np.asarray(after), step="autocast", where="input 0",
            source=source, target=target,
        )  # fmt: skip


def _reads_screened(model: Any) -> None:
    """Each autocast float variable of each layer computing in another dtype, cast to that
    dtype (the cast Keras's autocast makes of it there, made here outside the scope) and
    screened for overflow and underflow by the audit's own screen (``_overflow_or_underflow``:
    more inf/NaN or zeros after than before), as the audit screens each variable read once per
    pass."""
    import numpy as np
    from keras.src import backend

    from dtype_explorer import dtypes
    from dtype_explorer.keras_run.trace._values import _overflow_or_underflow

    for layer in model._flatten_layers(include_self=False, recursive=True):
        compute = getattr(getattr(layer, "dtype_policy", None), "compute_dtype", None)
        for variable in layer._trainable_variables + layer._non_trainable_variables:
            stored = backend.standardize_dtype(variable.dtype)
            if not compute or compute == stored or not getattr(variable, "_autocast", True):
                continue
            if dtypes.family(stored) != "float":
                continue
            wide = np.asarray(variable.value)
            _overflow_or_underflow(wide, np.asarray(backend.cast(variable.value, compute)))


def measure_parts(repeats: int, clock_name: str, model_name: str) -> list[dict]:
    """Each part of ``floor, + what issue 38 measures``, alone, against the bare call of the
    model built under the policy."""
    from dtype_explorer import keras_run
    from dtype_explorer.keras_run.model._layer_damage import run_leaves

    targets = _targets()
    plain, mixed, x, policy = _models(model_name)
    values, measured = trace_floor.Floor("now", targets, operators=False), MeasuredCasts(targets)
    kept: dict[str, Any] = {}

    def keep() -> None:
        kept["outputs"] = run_leaves(mixed, x)[0]

    parts = {
        "mixed pass, every op's values read, leaf outputs kept": lambda: values.run(keep),
        "the same, the casts' losses measured": lambda: measured.run(keep),
        "variable reads screened": lambda: _reads_screened(mixed),
        "float32 reference's pass, leaf outputs kept": lambda: run_leaves(plain, x),
        "float32 reference's pass and every comparison": lambda: keras_run.layer_damage(
            mixed, x, outputs=kept["outputs"], original=plain
        ),
    }
    keep()
    bare, now = _synced(mixed, x), _harness.clock(clock_name)
    return [
        _harness.paired_row(
            f"{model_name}, built {policy}",
            part,
            _harness.paired(bare, work, repeats, now),
            "measured",
        )
        for part, work in parts.items()
    ]


def measure_here(repeats: int, clock_name: str, model_name: str = "dense") -> list[dict]:
    from dtype_explorer import check_model, keras_run
    from dtype_explorer.keras_run.model._layer_damage import run_leaves

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

    measured = MeasuredCasts(targets)

    def what_issue_38_measures() -> None:
        kept: list[dict] = []
        measured.run(lambda: kept.append(run_leaves(mixed, x)[0]))
        _reads_screened(mixed)
        keras_run.layer_damage(mixed, x, outputs=kept[0], original=plain)

    steps = {"float32": len(floors["now"].run(bare)), policy: len(traced_mixed())}
    cases = [
        ("float32", "floor, dtypes", bare, functools.partial(floors["none"].run, bare)),
        ("float32", "floor, values", bare, functools.partial(floors["now"].run, bare)),
        ("float32", "check_model", bare, lambda: check_model(plain, x)),
        (f"policy={policy}", "floor, values + float32 reference", bare, with_reference),
        (f"policy={policy}", "floor, + what issue 38 measures", bare, what_issue_38_measures),
        (f"policy={policy}", "check_model", bare, lambda: check_model(plain, x, policy=policy)),
        (f"built {policy}", "floor, values + float32 reference", bare_mixed, with_reference),
        (f"built {policy}", "floor, + what issue 38 measures", bare_mixed, what_issue_38_measures),
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
    which = ("--rows", {"default": "audits", "choices": ("audits", "parts")})
    args = _harness.command_line(
        __doc__.splitlines()[0], repeats=7, clock="wall", options=(model, which)
    )
    if args.here:
        measure = measure_parts if args.rows == "parts" else measure_here
        print(json.dumps(measure(args.repeats, args.clock, args.model)))
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
