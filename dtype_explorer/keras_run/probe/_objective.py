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
from dtype_explorer.keras_run._arrays import numpy_values, unread_values
from dtype_explorer.keras_run._numerics import max_abs_integer, measure, precision_loss
from dtype_explorer.keras_run._values import call_arguments
from dtype_explorer.keras_run.probe._called import objective_called
from dtype_explorer.keras_run.probe._fields import ProbeFields
from dtype_explorer.keras_run.probe._observe import (
    Invalid,
    broadcast,
    error_info,
)
from dtype_explorer.keras_run.probe._op import op_described, op_leaf_dtypes, op_outcome, op_tensor
from dtype_explorer.keras_run.probe._stages import timed
from dtype_explorer.records import (
    CastStep,
    InputValue,
    Numerics,
    ProbeSpec,
    VariableDtypes,
)
from dtype_explorer.timing import ms


def run_objective(
    spec: ProbeSpec, entry: Any, timings: dict[str, float], *, instance: Any = None
) -> ProbeFields:
    """A loss or metric on y_true/y_pred: the user's own values as given, or the tool's
    samples as backend tensors of the asked dtypes. A loss class's ``call`` is watched (what it
    received after ``Loss.__call__``'s conversion); a metric class's variables are read after
    construction, ``update_state`` and ``reset_state``; the output is the loss, the metric's
    ``result()``, or the function's return value. A class is built with its own default dtype
    unless a policy is asked (``dtype=`` in kwargs, ``None`` included, is passed as given);
    ``call_kwargs`` (``sample_weight``) go to the call or ``update_state``. ``instance``: the
    user's loss or metric (a copy, ``_instance``), used as it is instead of a build; a loss's
    reference run is its config rebuilt in the wider dtype, a metric's state is its own (no
    reference: inf/NaN only)."""
    if entry.skip:
        raise InvalidSpecError(f"{entry.name} cannot be probed standalone: {entry.skip}")
    # 1. Inputs: the user's values as given, or samples of the asked dtypes as tensors.
    input_dtypes, shapes, values, steps = _objective_inputs(spec, entry, instance)
    target = catalog.objective_calls.resolve(entry)
    kwargs = dict(spec.kwargs)
    extra = call_arguments(spec.call_kwargs)
    if entry.kind in ("loss-function", "metric-function"):
        fields = _objective_function(
            entry, target, values, shapes, input_dtypes, {**kwargs, **extra}, steps
        )
        every = {**entry.kwargs, **kwargs, **extra}  # the function's keywords, as it got them
        fields["called"] = objective_called(spec, entry, values, {}, every)
        return _with_precision_loss(fields, values)
    # 2. Build: with dtype=<policy> only where a policy is asked; the user's instance as it is.
    given = instance is not None
    built: dict[str, Any] = {}
    try:
        if instance is None:
            built = catalog.objective_calls.build_kwargs({**entry.init_kwargs, **kwargs})
            if "dtype" not in built and spec.policy != DEFAULT_POLICY:
                built["dtype"] = spec.policy
            instance = target(**built)
    except Exception as error:
        raise Invalid(error, "construct") from error
    # 3. The call, its answer, and 4. numerics against the same class in a wider dtype.
    if entry.kind == "loss":
        fields, outputs = _loss_class(
            entry, instance, values, shapes, input_dtypes, steps, timings, extra
        )
    else:
        fields, outputs = _metric_class(entry, instance, values, steps, timings, extra)
    if fields.get("status") == "ok":
        with timed(timings, "numerics_ms"):
            fields["numerics"] = _objective_numerics(
                entry, _again(instance) if given else target, built, values, steps, outputs, extra
            )
    note = "your instance, as it is" if given else _built_note(built)
    fields["basis"] = (*fields.get("basis", ()), note)
    mine = instance if given else None  # the user's, not the one built here
    fields["called"] = objective_called(spec, entry, values, built, extra, instance=mine)
    return _with_precision_loss(fields, values)


def _with_precision_loss(fields: ProbeFields, values: list[Any]) -> ProbeFields:
    """Integer labels cast to a 16-bit float that rounds them (``precision-loss``), added to
    the answer's numerics."""
    try:
        arrays = [numpy_values(v) for v in values]
    except Exception:
        return fields
    peak = max_abs_integer(arrays)
    lost = precision_loss(fields.get("cast_path", ()), peak)
    numerics = fields.get("numerics")
    if lost is None or (numerics and any(f.kind == lost.kind for f in numerics.findings)):
        return fields  # none, or measure() found it already: one finding, not two
    numerics = numerics or Numerics(
        note="integer inputs checked against the 16-bit floats on their cast path"
    )
    fields["numerics"] = numerics.model_copy(
        update={"max_abs_integer_input": peak, "findings": (*numerics.findings, lost)}
    )
    return fields


#: The policy a spec has when none is asked: the objective is then built with no ``dtype=``.
DEFAULT_POLICY = "float32"


def _built_note(built: dict[str, Any]) -> str:
    if "dtype" in built:
        return f"built with dtype={built['dtype']!r}"
    return "built with its own default dtype (no policy asked, no dtype= given)"


def _objective_inputs(
    spec: ProbeSpec, entry: Any, instance: Any = None
) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...], list[Any], list[CastStep]]:
    """The inputs stage: their dtypes (as Keras converts them), shapes, values and steps."""
    if spec.user_values is not None:
        if any(v.dtype in dtypes.PYTHON_SCALARS for v in spec.user_values):
            raise InvalidSpecError(f"values: {entry.name} takes arrays or lists, not numbers")
        values = [v.as_given() for v in spec.user_values]
        steps = [s for i, v in enumerate(spec.user_values) for s in _given_steps(i, v, entry)]
        return tuple(v.dtype for v in spec.user_values), spec.shapes or (), values, steps
    input_dtypes = broadcast(spec.input_dtypes, entry.arity)
    if any(d in dtypes.PYTHON_SCALARS for d in input_dtypes):
        raise InvalidSpecError(f"{entry.name} takes arrays; Python scalars are inputs of ops")
    shapes = spec.shapes or entry.shapes
    if len(shapes) != entry.arity:
        raise InvalidSpecError(f"{entry.name} takes {entry.arity} inputs; got {len(shapes)} shapes")
    rng = np.random.default_rng(spec.seed)
    samples = [
        catalog.objective_calls.values(_fitting(leaf["values"], instance), tuple(shape), d, rng)
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
    return input_dtypes, tuple(tuple(s) for s in shapes), tensors, steps


def _fitting(values: str, instance: Any) -> str:
    """A sample's value spec fitted to the user's instance: class ids below its own
    ``num_classes`` (the catalog's ``classes:3`` for ``MeanIoU(num_classes=2)`` would not fit)."""
    classes = getattr(instance, "num_classes", None)
    if isinstance(classes, int) and values.startswith("classes:"):
        return f"classes:{classes}"
    return values


def _given_steps(i: int, value: InputValue, entry: Any) -> list[CastStep]:
    """A user's y_true/y_pred: as given, as asked (``input_dtype`` converted it first), and
    passed as given (the loss or metric converts it itself: the ``autocast`` steps)."""
    param = entry.inputs[i]["param"] if i < len(entry.inputs) else f"input {i}"
    own = value.given_dtype or value.dtype
    what = "a Python list" if value.kind == "list" else "an array"
    steps = [CastStep(stage="input", dtype=own, note=f"{param}: your value, {what}", index=i)]
    if value.given_dtype is not None:
        note = f"{own} -> {value.dtype}: converted as input_dtype asks, before Keras sees it"
        steps.append(CastStep(stage="asked", dtype=value.dtype, index=i, changed=True, note=note))
    note = f"passed as given: {entry.name} converts it itself"
    steps.append(CastStep(stage="converted", dtype=value.dtype, index=i, note=note))
    return steps


def _converted_of(steps: list[CastStep], i: int) -> str:
    return next(s.dtype for s in steps if s.stage == "converted" and s.index == i)


def _again(instance: Any) -> Any:
    """``make(dtype=...)``: the user's loss rebuilt from its config in another dtype (the
    reference run); ``None`` for a metric instance, whose state is its own (inf/NaN counted,
    no reference)."""
    if not hasattr(instance, "update_state"):
        config = instance.get_config()
        return lambda **kw: type(instance).from_config({**config, **kw})
    return None


def _objective_numerics(
    entry: Any,
    target: Any,
    built: dict[str, Any],
    values: list[Any],
    steps: list[CastStep],
    outputs: Any,
    extra: dict[str, Any],
) -> Numerics:
    """inf/NaN from finite input, and the value against the same class built in the widest
    float on the same values in it (what layers get: ``_numerics.measure``); ``target=None``
    (a metric instance): inf/NaN only."""
    arrays = [numpy_values(v) for v in values]

    def reference(wide: str) -> Any:
        widened = [
            a.astype(wide) if dtypes.family(dtypes.describe(a)) in ("int", "uint", "float") else a
            for a in arrays
        ]
        again = target(**{**built, "dtype": wide})
        if entry.kind == "loss":
            return [again(*widened, **extra)]
        again.update_state(*widened, **extra)
        return [again.result()]

    try:
        return measure([outputs], arrays, steps, reference=None if target is None else reference)
    except Exception as error:
        return Numerics(note=unread_values(error))


def _objective_function(entry, fn, tensors, shapes, input_dtypes, kwargs, steps) -> ProbeFields:
    """A loss or metric function called on the inputs with its kwargs."""
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


def _loss_class(
    entry, loss, tensors, shapes, input_dtypes, steps, timings, extra
) -> tuple[ProbeFields, Any]:
    """A loss instance called on the inputs (with ``extra``: ``sample_weight``), its
    ``call`` watched; the fields and the outputs."""
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
        outputs = loss(*tensors, **extra)
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
            conv = _converted_of(steps, i)
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
    return op_outcome(outputs, error, steps, documented, declared), outputs


def _metric_class(entry, metric, tensors, steps, timings, extra) -> tuple[ProbeFields, Any]:
    """A metric instance: its variables after construction, ``update_state`` (with
    ``extra``: ``sample_weight``) and ``reset_state``, its ``result()``; the fields and the
    result."""
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
        metric.update_state(*tensors, **extra)
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
    return fields, outputs
