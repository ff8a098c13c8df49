"""Probe a loss or a metric: the cast path of ``y_true``/``y_pred`` into ``Loss.call``, the
loss's output; a metric's variables after construction, ``update_state`` and ``reset_state``,
and its ``result()``."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._fields import ProbeFields
from dtype_explorer.keras_run._numerics import max_abs_integer, precision_loss
from dtype_explorer.keras_run._observe import (
    Invalid,
    broadcast,
    error_info,
)
from dtype_explorer.keras_run._probe_op import op_described, op_leaf_dtypes, op_outcome, op_tensor
from dtype_explorer.records import (
    CastStep,
    Numerics,
    ProbeSpec,
    VariableDtypes,
)
from dtype_explorer.timing import ms


def run_objective(spec: ProbeSpec, entry: Any, timings: dict[str, float]) -> ProbeFields:
    """A loss or metric on y_true/y_pred (or a metric's values) as backend tensors of the asked
    dtypes. A loss class is built with ``dtype=policy`` and its ``call`` is watched (what it
    received after ``Loss.__call__``'s conversion); a metric class is built the same way, and
    its variables are read after construction, ``update_state``, and ``reset_state``; the output
    is the loss, the metric's ``result()``, or the function's return value."""

    if entry.skip:
        raise InvalidSpecError(f"{entry.name} cannot be probed standalone: {entry.skip}")
    input_dtypes = broadcast(spec.input_dtypes, entry.arity)
    if any(d in dtypes.PYTHON_SCALARS for d in input_dtypes):
        raise InvalidSpecError(f"{entry.name} takes arrays; Python scalars are inputs of ops")
    shapes = spec.shapes or entry.shapes
    if len(shapes) != entry.arity:
        raise InvalidSpecError(f"{entry.name} takes {entry.arity} inputs; got {len(shapes)} shapes")
    rng = np.random.default_rng(spec.seed)
    samples = [
        catalog.objective_calls.values(leaf["values"], tuple(shape), d, rng)
        if spec.values == "default"
        else dtypes.sample(d, tuple(shape), preset=spec.values, seed=spec.seed + i)
        for i, (leaf, shape, d) in enumerate(zip(entry.inputs, shapes, input_dtypes))
    ]
    tensors = [op_tensor(sample, d) for sample, d in zip(samples, input_dtypes)]
    steps: list[CastStep] = []
    for i, (leaf, given, tensor) in enumerate(zip(entry.inputs, input_dtypes, tensors)):
        param = leaf["param"]
        steps.append(CastStep(stage="input", dtype=given, note=f"{param}", index=i))
        conv = op_described(tensor)
        note = "backend tensor, dtype kept" if conv == given else f"{given} -> {conv}: converted"
        steps.append(
            CastStep(stage="converted", dtype=conv, index=i, changed=conv != given, note=note)
        )
    target = catalog.objective_calls.resolve(entry)
    kwargs = dict(spec.kwargs)
    if entry.kind in ("loss-function", "metric-function"):
        fields = _objective_function(entry, target, tensors, shapes, input_dtypes, kwargs, steps)
        return _with_precision_loss(fields, samples)
    try:
        built = catalog.objective_calls.build_kwargs({**entry.init_kwargs, **kwargs})
        instance = target(**built, dtype=spec.policy)
    except Exception as error:
        raise Invalid(error, "construct") from error
    if entry.kind == "loss":
        fields = _loss_class(entry, instance, tensors, shapes, input_dtypes, steps, timings)
    else:
        fields = _metric_class(entry, instance, tensors, steps, timings)
    return _with_precision_loss(fields, samples)


def _with_precision_loss(fields: ProbeFields, samples: list[Any]) -> ProbeFields:
    """Integer labels cast to a 16-bit float that rounds them (``precision-loss``): a finding
    of the answer's numerics (a loss runs no reference)."""
    peak = max_abs_integer(samples)
    lost = precision_loss(fields.get("cast_path", ()), peak)
    if lost is not None:
        fields["numerics"] = Numerics(
            max_abs_integer_input=peak,
            findings=(lost,),
            note="integer inputs checked against the 16-bit floats on their cast path",
        )
    return fields


def _objective_function(entry, fn, tensors, shapes, input_dtypes, kwargs, steps) -> ProbeFields:
    import keras

    kwargs = {**entry.kwargs, **kwargs}
    outputs, error = None, None
    try:
        outputs = fn(*tensors, **kwargs)
    except Exception as exc:
        error = exc
    try:
        symbolic = [keras.KerasTensor(s, dtype=d) for s, d in zip(shapes, input_dtypes)]
        declared = op_leaf_dtypes(fn(*symbolic, **kwargs))
    except Exception:
        declared = ()
    documented = rules.Documented(None, (f"Keras documents no dtype rule for {entry.name}",))
    return op_outcome(outputs, error, steps, documented, declared)


def _loss_class(entry, loss, tensors, shapes, input_dtypes, steps, timings) -> ProbeFields:
    import keras

    received: list[tuple[str, ...]] = []
    original = loss.call

    def watched(*args: Any, **kw: Any) -> Any:
        received.append(op_leaf_dtypes(list(args)))
        out = original(*args, **kw)
        received.append(op_leaf_dtypes(out))
        return out

    loss.call = watched
    t0 = time.perf_counter()
    outputs, error = None, None
    try:
        outputs = loss(*tensors)
    except Exception as exc:
        error = exc
    timings["call_ms"] = ms(t0)
    watched_calls = list(received)
    try:
        symbolic = [keras.KerasTensor(s, dtype=d) for s, d in zip(shapes, input_dtypes)]
        declared = op_leaf_dtypes(loss(*symbolic))
    except Exception:
        declared = ()
    loss.call = original
    dtype = loss.dtype
    if watched_calls:
        for i, (got, param) in enumerate(zip(watched_calls[0], ("y_true", "y_pred"))):
            conv = steps[2 * i + 1].dtype
            note = (
                f"{param} as call() received it: Loss.__call__ converts it to the loss dtype "
                f"{dtype}"
            )
            steps.append(
                CastStep(stage="autocast", dtype=got, index=i, changed=got != conv, note=note)
            )
    if len(watched_calls) > 1 and watched_calls[1]:
        steps.append(
            CastStep(
                stage="variables",
                dtype=watched_calls[1][0],
                name="unreduced loss",
                note="what call() returned, before the reduction casts it to the loss dtype",
            )
        )
    documented = rules.Documented(
        dtype,
        (
            f"Loss.__call__ converts y_true and y_pred with convert_to_tensor(x, dtype={dtype!r}) "
            "(the loss dtype: its policy's compute dtype) and returns the reduced loss in it",
        ),
    )
    return op_outcome(outputs, error, steps, documented, declared)


def _metric_class(entry, metric, tensors, steps, timings) -> ProbeFields:
    import keras

    def variables(when: str) -> None:
        for v in metric.variables:
            value = np.asarray(keras.ops.convert_to_numpy(v.value))
            shown = value.tolist() if value.size <= 4 else f"shape {value.shape}"
            steps.append(
                CastStep(
                    stage="variables",
                    dtype=keras.backend.standardize_dtype(v.dtype),
                    name=f"{v.name} {when}",
                    note=f"value {shown}",
                )
            )

    stored = {
        v.name: VariableDtypes(stored=keras.backend.standardize_dtype(v.dtype), autocast=False)
        for v in metric.variables
    }
    variables("after construction")
    t0 = time.perf_counter()
    outputs, error, where = None, None, "update_state"
    try:
        metric.update_state(*tensors)
        variables("after update_state")
        where = "result"
        outputs = metric.result()
        where = "reset_state"
        metric.reset_state()
        variables("after reset_state")
    except Exception as exc:
        error = exc
    timings["call_ms"] = ms(t0)
    documented = rules.Documented(
        metric.dtype,
        (
            f"{entry.name}(dtype=...) keeps its state and computes its result in its dtype "
            f"{metric.dtype} (the policy's compute dtype)",
        ),
    )
    if error is not None and outputs is not None:  # result() worked; reset_state failed
        fields = op_outcome(outputs, None, steps, documented, ())
        fields.update(status="error", verdict="error", error=error_info(error, where))
    else:
        fields = op_outcome(outputs, error, steps, documented, ())
        if error is not None:
            fields["error"] = error_info(error, where)
    fields["variables"] = stored
    return fields
