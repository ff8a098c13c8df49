"""Losses and metrics on Keras 2 (``tf.keras.losses.*``, ``tf.keras.metrics.*``), on the user's
own ``y_true``/``y_pred`` or the Keras 3 probe's samples, with the same cast-path stages as
Keras 3's (``_probe_objective``): ``input``, ``converted`` (the TensorFlow tensor),
``autocast`` (what a loss class's ``call()`` received), ``variables`` (a metric's state after
construction, ``update_state`` and ``reset_state``) and ``output``; numerics against the same
target on the values in float64. Keras 2's loss classes take no ``dtype`` (they compute in the
dtype of ``y_pred``); its metrics do. No documented dtype is claimed (no ``result_type``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._numerics import measure
from dtype_explorer.keras_run._values import call_arguments
from dtype_explorer.keras_run.keras2._instance import Keras2Packed
from dtype_explorer.keras_run.keras2._values import arrays
from dtype_explorer.keras_run.probe import (
    Invalid,
    ProbeFields,
    broadcast,
    error_info,
    output_note,
    supplied,
)
from dtype_explorer.records import CastStep, ProbeSpec, VariableDtypes

LOSS_BASIS = (
    "Keras 2's Loss takes no dtype: LossFunctionWrapper casts y_true to y_pred's dtype and "
    "computes in it"
)


def run_keras2_objective(
    spec: ProbeSpec, tf: Any, tf_keras: Any, instance: Any = None
) -> ProbeFields:
    """A ``tf_keras`` loss or metric (class or function) on y_true/y_pred.

    Args:
        spec: a ``"losses.<Name>"`` or ``"metrics.<Name>"`` question (``values=`` the user's).
        tf: TensorFlow.
        tf_keras: Keras 2.
        instance: the user's ``tf_keras`` loss or metric instance (as it travelled: a
            ``Keras2Packed``, or the object itself): each call gets a fresh copy from its
            config, never the user's object; a metric instance gets no reference run (its
            dtype is its own).

    Returns:
        The answer's fields; what Keras 2 lacks raises ``InvalidSpecError`` saying so.
    """
    # 1. The target: tf_keras's loss or metric of that name.
    entry = catalog.entry(spec.target)
    if entry.skip:
        raise InvalidSpecError(f"{entry.name} cannot be probed standalone: {entry.skip}")
    target = getattr(getattr(tf_keras, entry.group), entry.short_name, None)
    if instance is not None:
        target = instance.copy if isinstance(instance, Keras2Packed) else _copier(instance)
    if target is None:
        raise InvalidSpecError(
            f"keras.{entry.group}.{entry.short_name} has no counterpart in Keras 2 "
            f"(tf_keras {tf_keras.__version__} has no {entry.group}.{entry.short_name})"
        )
    # 2. Inputs: the user's values as given, or the Keras 3 probe's samples, as tf tensors.
    values, steps = _inputs(spec, entry, tf)
    kwargs = {} if instance is not None else _kwargs({**entry.init_kwargs, **spec.kwargs}, tf_keras)
    extra = call_arguments(spec.call_kwargs)
    basis: list[str] = [
        "no documented dtype: Keras 2 has no keras.backend.result_type",
    ]
    # 3. The call: a function, a loss class (call() watched) or a metric (its state read).
    try:
        asked = None if spec.policy == "float32" or instance is not None else spec.policy
        outputs = _called(entry, target, kwargs, extra, values, steps, asked, basis, tf)
        error = None
    except Invalid:
        raise
    except Exception as exc:
        outputs, error = None, exc
    fields = _outcome(outputs, error, steps, tuple(basis), tf)
    # 4. Numerics: the same target on the values in float64.
    if fields["status"] == "ok":
        own_dtype = instance is not None and entry.kind == "metric"
        fields["numerics"] = measure(
            [outputs],
            [np.asarray(v) for v in values],
            steps,
            reference=None
            if own_dtype
            else lambda wide: [
                _called(entry, target, kwargs, extra, _wide(values, wide, tf), [], wide, [], tf)
            ],
            backend="tensorflow",
            flatten=arrays,
        )
    fields["supplied"] = supplied(spec, entry)
    return fields


def _inputs(spec: ProbeSpec, entry: Any, tf: Any) -> tuple[list[Any], list[CastStep]]:
    """The tensors y_true/y_pred and their ``input``/``converted`` steps."""
    if spec.user_values is not None:
        given = [v.as_given() for v in spec.user_values]
        own = [v.given_dtype or v.dtype for v in spec.user_values]
    else:
        input_dtypes = broadcast(spec.input_dtypes, entry.arity)
        shapes = spec.shapes or entry.shapes
        if len(shapes) != entry.arity:
            raise InvalidSpecError(
                f"{entry.name} takes {entry.arity} inputs; got {len(shapes)} shapes"
            )
        rng = np.random.default_rng(spec.seed)
        given = [
            catalog.objective_calls.values(leaf["values"], tuple(shape), d, rng)
            if spec.values == "default"
            else dtypes.sample(d, tuple(shape), preset=spec.values, seed=spec.seed + i)
            for i, (leaf, shape, d) in enumerate(zip(entry.inputs, shapes, input_dtypes))
        ]
        own = list(input_dtypes)
    tensors, steps = [], []
    for i, (value, dtype) in enumerate(zip(given, own)):
        param = entry.inputs[i]["param"] if i < len(entry.inputs) else f"input {i}"
        tensor = tf.convert_to_tensor(np.asarray(value))
        conv = tf.as_dtype(tensor.dtype).name
        what = "your value" if spec.user_values is not None else "the sample"
        steps.append(CastStep(stage="input", dtype=dtype, note=f"{param}: {what}", index=i))
        note = "tf tensor, dtype kept" if conv == dtype else f"{dtype} -> {conv}: converted"
        steps.append(
            CastStep(stage="converted", dtype=conv, index=i, changed=conv != dtype, note=note)
        )
        tensors.append(tensor)
    return tensors, steps


def _copier(instance: Any) -> Any:
    """``make()``: a fresh copy of a ``tf_keras`` loss or metric instance, from its config
    (kwargs, if given, are refused by the spec check)."""
    config = instance.get_config()
    return lambda **_: type(instance).from_config(config)


def _kwargs(kwargs: dict[str, Any], tf_keras: Any) -> dict[str, Any]:
    """Constructor kwargs with ``"keras.<path>"`` strings made the ``tf_keras`` objects."""
    built = {}
    for key, value in kwargs.items():
        if isinstance(value, str) and value.startswith("keras."):
            found: Any = tf_keras
            for part in value.split(".")[1:]:
                found = getattr(found, part, None)
            if found is None:
                raise InvalidSpecError(f"{key}={value!r} has no counterpart in Keras 2")
            value = found
        built[key] = value
    return built


def _called(entry, target, kwargs, extra, values, steps, dtype, basis, tf) -> Any:
    """The target called on ``values``; its stages appended to ``steps``, its rule to
    ``basis`` (a reference run passes empty ones); a metric class built with ``dtype=dtype``
    unless the kwargs hold one (``None``: its default)."""
    if entry.kind in ("loss-function", "metric-function"):
        basis.append(f"Keras 2 documents no dtype rule for {entry.name}")
        return target(*values, **{**entry.kwargs, **kwargs, **extra})
    if entry.kind == "loss":
        return _loss(target, kwargs, extra, values, steps, basis, tf)
    metric_kwargs = dict(kwargs)
    if "dtype" not in metric_kwargs and dtype is not None:
        metric_kwargs["dtype"] = dtype
    try:
        metric = target(**metric_kwargs)
    except Exception as error:
        raise Invalid(error, "construct") from error
    _metric_state(metric, "after construction", steps, tf)
    metric.update_state(*values, **extra)
    _metric_state(metric, "after update_state", steps, tf)
    result = metric.result()
    metric.reset_state()
    _metric_state(metric, "after reset_state", steps, tf)
    basis.append(
        f"{entry.name}(dtype=...) keeps its state and computes its result in its dtype "
        f"{tf.as_dtype(metric.dtype).name}"
    )
    return result


def _loss(target, kwargs, extra, values, steps, basis, tf) -> Any:
    try:
        loss = target(**kwargs)
    except Exception as error:
        raise Invalid(error, "construct") from error
    received: list[list[str]] = []
    original = loss.call

    def watched(*args: Any, **kw: Any) -> Any:  # a pass-through (_tool_error)
        received.append([tf.as_dtype(a.dtype).name for a in args if hasattr(a, "dtype")])
        return original(*args, **kw)

    loss.call = watched
    try:
        out = loss(*values, **extra)
    finally:
        del loss.call
    for i, (got, param) in enumerate(zip(received[0] if received else (), ("y_true", "y_pred"))):
        conv = next((s.dtype for s in steps if s.stage == "converted" and s.index == i), got)
        note = f"{param} as call() received it (Keras 2's Loss.__call__ converts, never casts)"
        steps.append(CastStep(stage="autocast", dtype=got, index=i, changed=got != conv, note=note))
    basis.append(LOSS_BASIS)
    return out


def _metric_state(metric: Any, when: str, steps: list[CastStep], tf: Any) -> None:
    for v in metric.variables:
        value = np.asarray(v.numpy())
        shown = value.tolist() if value.size <= 4 else f"shape {value.shape}"
        name = v.name.removesuffix(":0").rsplit("/", 1)[-1]
        steps.append(
            CastStep(
                stage="variables",
                dtype=tf.as_dtype(v.dtype).name,
                name=f"{name} {when}",
                note=f"value {shown}",
            )
        )


def _wide(values: list[Any], wide: str, tf: Any) -> list[Any]:
    """The values in ``wide`` (floats and integers; bool kept)."""
    return [tf.cast(v, wide) if v.dtype.is_floating or v.dtype.is_integer else v for v in values]


def _outcome(outputs, error, steps, basis, tf) -> ProbeFields:
    """The fields from the output (or the error)."""
    fields: ProbeFields = {"basis": basis, "execution": "eager call (Keras 2, tf_keras)"}
    fields["variables"] = {
        s.name.removesuffix(" after construction"): VariableDtypes(stored=s.dtype, autocast=False)
        for s in steps
        if s.stage == "variables" and s.name and s.name.endswith("after construction")
    }
    if error is not None:
        fields.update(
            status="error", verdict="error", error=error_info(error, "call"), cast_path=tuple(steps)
        )
        return fields
    flat = [t for t in tf.nest.flatten(outputs) if hasattr(t, "dtype")]
    out = tuple(tf.as_dtype(t.dtype).name for t in flat)
    steps = [
        *steps,
        *(
            CastStep(stage="output", dtype=d, index=i, note=output_note(d, None))
            for i, d in enumerate(out)
        ),
    ]
    fields.update(
        status="ok",
        output_dtype=out[0] if out else None,
        output_dtypes=out,
        cast_path=tuple(steps),
        verdict=rules.verdict(
            status="ok", documented=None, declared=None, observed=out[0] if out else None
        ),
    )
    return fields
