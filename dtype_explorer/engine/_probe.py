"""Run one probe in this process, on the backend Keras imported.

A probe builds the target under the requested policy, calls it eagerly on a sample, and
observes every dtype on the way by running Keras: ``keras.ops.convert_to_tensor`` for the
``converted`` stage, a wrapper around the layer's own ``call`` for what it *received* and the
variables it *read*, and the returned tensors for ``output``. The symbolic call gives the
declared dtype; ``rules`` gives the documented one.

>>> from dtype_explorer.records import ProbeSpec
>>> import keras
>>> r = run(ProbeSpec(target="Dense", input_dtypes=("float64",), kwargs={"units": 2},
...                   backend=keras.backend.backend()))
>>> r.output_dtype
'float32'
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.engine import _rules as rules
from dtype_explorer.engine import catalog
from dtype_explorer.engine._call_trace import variable_dtypes, wrapped_entry_points
from dtype_explorer.engine._keras_state import preserved_keras_state
from dtype_explorer.engine._numerics import measure
from dtype_explorer.engine._trace import op_trace
from dtype_explorer.engine.catalog import (
    INDEX_HIGH,
    LayerEntry,
    OpEntry,
    build_kwargs,
    safe_deserialization,
)
from dtype_explorer.errors import InvalidSpecError, keras_message
from dtype_explorer.records import (
    CastStep,
    ErrorInfo,
    Numerics,
    ProbeResult,
    ProbeSpec,
    VariableDtypes,
)
from dtype_explorer.versions import versions

_MAX_MESSAGE = 2000


class _Invalid(Exception):
    """The spec cannot make a valid call (Keras's own message is kept)."""

    def __init__(self, error: BaseException, where: str):
        super().__init__(str(error))
        self.error = error
        self.where = where


def run(spec: ProbeSpec, *, target: Any = None, trace: bool = True) -> ProbeResult:
    """Probe ``spec`` here. Keras errors become results; the global Keras state is restored.

    ``target`` is the user layer (a ``Layer`` subclass or instance) behind a
    ``"custom:<Name>"`` spec. ``trace=False`` leaves the op trace out (benchmarks compare).
    """
    import keras

    backend = keras.backend.backend()
    if spec.backend != backend:
        raise InvalidSpecError(
            f"this process runs Keras on {backend!r}, not {spec.backend!r}; "
            "probe other backends through dtype_explorer.pool"
        )
    started = time.perf_counter()
    timings: dict[str, float] = {}
    base = {"spec": spec, "backend": backend, "versions": versions(backend), "timings": timings}
    try:
        with preserved_keras_state():
            if spec.floatx:
                keras.config.set_floatx(spec.floatx)
            keras.config.set_dtype_policy(spec.policy)
            if spec.target.startswith("ops."):
                fields = _run_op(spec, catalog.entry(spec.target), timings, trace)
            elif spec.target.startswith(("losses.", "metrics.")):
                fields = _run_objective(spec, catalog.entry(spec.target), timings)
            else:
                fields = _run_layer(
                    spec, _layer_entry(spec, target), _layer_class(spec, target), timings, trace
                )
    except _Invalid as invalid:
        fields = {
            "status": "invalid",
            "error": _error_info(invalid.error, invalid.where),
            "verdict": "error",
        }
    except (InvalidSpecError, ValueError, TypeError) as error:
        fields = {"status": "invalid", "error": _error_info(error, "spec"), "verdict": "error"}
    timings["total_ms"] = _ms(started)
    return ProbeResult(**base, **fields)


# ------------------------------------------------------------------------------ layers


def _layer_entry(spec: ProbeSpec, target: Any) -> LayerEntry:
    if not spec.target.startswith("custom:"):
        found = catalog.entry(spec.target)
        if isinstance(found, OpEntry):
            raise InvalidSpecError(f"{spec.target!r} is an op, not a layer")
        if found.skip:
            raise InvalidSpecError(f"{found.name} cannot be probed standalone: {found.skip}")
        return found
    if target is None:
        raise InvalidSpecError(f"{spec.target!r} needs the layer itself (target=...)")
    return catalog.custom_entry(spec.target)


def _layer_class(spec: ProbeSpec, target: Any) -> Callable[..., Any]:
    import keras

    if target is None:
        return getattr(keras.layers, catalog.entry(spec.target).name)
    if isinstance(target, keras.layers.Layer):
        config = {k: v for k, v in target.get_config().items() if k != "dtype"}
        return lambda **kwargs: type(target).from_config({**config, **kwargs})
    return target


def _run_layer(
    spec: ProbeSpec,
    entry: LayerEntry,
    cls: Callable[..., Any],
    timings: dict[str, float],
    trace: bool,
) -> dict:

    shapes = spec.shapes or entry.shapes
    input_dtypes = _broadcast(spec.input_dtypes, len(shapes))
    roles = entry.input_roles(len(shapes))
    if any(d in dtypes.PYTHON_SCALARS for d in input_dtypes):
        raise InvalidSpecError("Python scalars (python_int, ...) are inputs of ops, not of layers")
    kwargs = {**entry.kwargs, **spec.kwargs}
    samples = [_layer_sample(d, s, r, spec) for d, s, r in zip(input_dtypes, shapes, roles)]

    def build() -> Any:
        try:
            with safe_deserialization():  # kwargs are data: a config never becomes code
                return cls(**build_kwargs(kwargs))
        except Exception as error:
            raise _Invalid(error, "construct") from error

    t0 = time.perf_counter()
    layer = build()
    timings["construct_ms"] = _ms(t0)
    policy = layer.dtype_policy
    converts = bool(getattr(layer, "_convert_input_args", True))

    steps: list[CastStep] = []
    converted: list[str] = []
    for i, (given, sample) in enumerate(zip(input_dtypes, samples)):
        steps.append(CastStep(stage="input", dtype=given, note="the array given", index=i))
        conv = _converted_dtype(sample) if converts else given
        converted.append(conv)
        note = _conversion_note(given, conv, converts)
        steps.append(
            CastStep(stage="converted", dtype=conv, index=i, changed=conv != given, note=note)
        )
    autocast_rule = [
        rules.autocast(
            c, policy_dtype=layer.input_dtype, autocast=layer.autocast, converts=converts
        )
        for c in converted
    ]

    recorder = _CallRecorder(layer)
    t0 = time.perf_counter()
    outputs, error = None, None
    with recorder.installed(), _traced(trace) as recorded:
        try:
            outputs = _call(layer, entry, samples)
        except Exception as exc:
            error = exc
    timings["call_ms"] = _ms(t0)
    t0 = time.perf_counter()
    trace_steps = recorded.steps() if recorded is not None else ()
    timings["trace_ms"] = _ms(t0)

    # Declared after the eager call: a built layer traces faster. Where both fail, a symbolic
    # call with the roles' default dtypes tells a dtype problem from a bad shape or kwarg.
    t0 = time.perf_counter()
    declared, declared_error = _declared_layer(
        layer if error is None else build(), entry, shapes, input_dtypes
    )
    if error is not None and declared_error is not None:
        default_dtypes = tuple(
            {"index": "int32", "string": "string"}.get(r, "float32") for r in roles
        )
        if default_dtypes != input_dtypes:
            _, declared_error = _declared_layer(build(), entry, shapes, default_dtypes)
        if declared_error is not None:
            raise _Invalid(declared_error, "shape or kwargs")
    timings["declared_ms"] = _ms(t0)

    for i, (conv, got) in enumerate(zip(converted, recorder.received or ())):
        expected, why = autocast_rule[i]
        note = why if got == expected else f"{conv} -> {got}: received by call()"
        steps.append(CastStep(stage="autocast", dtype=got, note=note, index=i, changed=got != conv))
    variables = recorder.variables
    for name, var in variables.items():
        steps.append(
            CastStep(
                stage="variables",
                dtype=var.read or var.stored,
                name=name,
                changed=var.read is not None and var.read != var.stored,
                note=_variable_note(var),
            )
        )
    documented = rules.for_layer(
        entry,
        compute_dtype=policy.compute_dtype,
        autocast_dtypes=tuple(d for d, _ in autocast_rule),
    )
    basis = (
        _policy_basis(policy),
        *dict.fromkeys(why for _, why in autocast_rule),
        *documented.basis,
    )
    fields = _outcome(outputs, error, steps, documented, declared, basis)
    fields["variables"] = variables
    fields["trace"] = trace_steps
    fields["trace_dropped"] = recorded.dropped if recorded is not None else 0
    if outputs is not None:
        t0 = time.perf_counter()
        fields["numerics"] = measure(
            outputs,
            samples,
            steps,
            reference=lambda dtype: _reference_outputs(build, layer, entry, samples, dtype),
        )
        timings["numerics_ms"] = _ms(t0)
    return fields


def _call(layer: Any, entry: LayerEntry, inputs: list[Any]) -> Any:
    if entry.input_style == "list":
        return layer(list(inputs))
    if entry.input_style == "positional":
        return layer(*inputs)
    return layer(inputs[0])


def _reference_outputs(
    build: Callable[[], Any], layer: Any, entry: LayerEntry, samples: list, dtype: str
) -> Any:
    """The same layer, with the same weights, run in ``dtype`` on the same sample."""
    import keras

    with preserved_keras_state():
        keras.config.set_dtype_policy(dtype)
        reference = build()
    inputs = [s.astype(dtype) if dtypes.is_float(dtypes.describe(s)) else s for s in samples]
    _call(reference, entry, inputs)
    reference.set_weights(
        [
            w.astype(dtype) if keras.backend.is_float_dtype(str(w.dtype)) else w
            for w in layer.get_weights()
        ]
    )
    return _call(reference, entry, inputs)


def _declared_layer(
    layer: Any, entry: LayerEntry, shapes, input_dtypes
) -> tuple[tuple[str, ...], Exception | None]:
    import keras

    try:
        symbolic = [keras.KerasTensor(shape, dtype=d) for shape, d in zip(shapes, input_dtypes)]
        out = _call(layer, entry, symbolic)
    except Exception as error:
        return (), error
    return tuple(keras.backend.standardize_dtype(t.dtype) for t in keras.tree.flatten(out)), None


# --------------------------------------------------------------------------------- ops


def _run_op(spec: ProbeSpec, entry: OpEntry, timings: dict[str, float], trace: bool) -> dict:
    """Probe one op the way a user calls it: every probed input converted to a backend tensor
    of its dtype first (the ``converted`` step), weak Python scalars passed as Python numbers,
    fixed inputs (indices, shapes, axes) as the catalog gives them."""
    import keras

    if entry.skip:
        raise InvalidSpecError(f"{entry.name} cannot be probed standalone: {entry.skip}")
    kwargs = dict(entry.kwargs) | dict(spec.kwargs)
    input_dtypes = _op_input_dtypes(spec, entry, kwargs)
    shapes = _op_shapes(spec, entry)
    rng = np.random.default_rng(spec.seed)
    samples: dict[int, Any] = {}
    tensors: dict[int, Any] = {}
    steps: list[CastStep] = []

    def sample(leaf: dict, i: int | None) -> Any:
        if i is None:  # a fixed input: int32 indices, a bool mask, float32 image transforms
            return catalog.op_calls.values(leaf["values"], tuple(leaf["shape"]), leaf["dtype"], rng)
        given, shape = input_dtypes[i], shapes[i]
        if given in dtypes.PYTHON_SCALARS:
            if spec.values == "default":
                return catalog.op_calls.python_scalar(leaf["values"], given)
            return dtypes.sample(given, shape, preset=spec.values, seed=spec.seed + i)
        if spec.values == "default":
            return catalog.op_calls.values(leaf["values"], shape, given, rng)
        return dtypes.sample(given, shape, preset=spec.values, seed=spec.seed + i)

    def eager(leaf: dict, i: int | None) -> Any:
        value = sample(leaf, i)
        if i is not None:
            samples[i] = value
        if isinstance(value, (bool, int, float)):
            return value
        tensor = _op_tensor(value, input_dtypes[i] if i is not None else leaf["dtype"])
        if i is not None:
            tensors[i] = tensor
        return tensor

    def symbolic(leaf: dict, i: int | None) -> Any:
        given = leaf["dtype"] if i is None else input_dtypes[i]
        if given in dtypes.PYTHON_SCALARS:
            return samples[i]
        return keras.KerasTensor(tuple(leaf["shape"]) if i is None else shapes[i], dtype=given)

    try:
        args, named = catalog.op_calls.build(
            _with_shapes(entry.inputs, shapes), lambda leaf, i: eager(leaf, i)
        )
    except Exception as error:
        raise _Invalid(error, "inputs") from error
    for i, given in enumerate(input_dtypes):
        steps.append(CastStep(stage="input", dtype=given, note=_given_note(given), index=i))
        if given in dtypes.PYTHON_SCALARS:
            note = "weak Python scalar: it takes the other operand's type where it can"
            steps.append(CastStep(stage="converted", dtype=given, index=i, note=note))
            continue
        conv = _op_described(tensors.get(i, samples.get(i)))
        note = (
            "backend tensor, dtype kept"
            if conv == given
            else f"{given} -> {conv}: keras.ops.convert_to_tensor(x, dtype={given!r})"
        )
        steps.append(
            CastStep(stage="converted", dtype=conv, index=i, changed=conv != given, note=note)
        )

    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sym_args, sym_named = catalog.op_calls.build(
                _with_shapes(entry.inputs, shapes), symbolic
            )
            declared = _op_leaf_dtypes(
                catalog.op_calls.call(entry.name, sym_args, sym_named, kwargs)
            )
    except Exception:  # the symbolic call fails where eager may not (weak scalars, callables)
        declared = ()
    timings["declared_ms"] = _ms(t0)

    t0 = time.perf_counter()
    outputs, error = None, None
    with _traced(trace) as recorded:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outputs = catalog.op_calls.call(entry.name, args, named, kwargs)
        except Exception as exc:
            error = exc
    timings["call_ms"] = _ms(t0)
    documented = rules.for_op(entry, input_dtypes, kwargs=kwargs)
    fields = _op_outcome(outputs, error, steps, documented, declared)
    fields["trace"] = recorded.steps() if recorded is not None else ()
    fields["trace_dropped"] = recorded.dropped if recorded is not None else 0
    arrays = [v for v in samples.values() if isinstance(v, np.ndarray)]
    if outputs is not None:
        fields["numerics"] = _op_numerics(outputs, arrays, steps)
    return fields


def _op_numerics(outputs: Any, arrays: list[np.ndarray], steps: list[CastStep]) -> Numerics:
    """inf/NaN from finite input; a value that cannot be read back (TensorFlow's 0-d bfloat16
    tensors have no NumPy view) is said, not raised: the dtypes are the answer."""
    try:
        return measure(_op_tensors(outputs), arrays, steps, reference=None)
    except Exception as error:
        return Numerics(note=f"values not readable as NumPy: {type(error).__name__}")


def _op_input_dtypes(spec: ProbeSpec, entry: OpEntry, kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The probed inputs' dtypes; a creation op's probed dtype goes to ``dtype=`` instead."""
    if entry.probe == "inputs":
        return _broadcast(spec.input_dtypes, _op_arity(spec, entry))
    for name in spec.input_dtypes:
        dtypes.validate(name)
    if entry.probe == "dtype_kwarg" and "dtype" not in spec.kwargs:
        given = spec.input_dtypes[0] if spec.input_dtypes else "float32"
        if given in dtypes.PYTHON_SCALARS:
            raise InvalidSpecError(
                f"{entry.name} takes its dtype as dtype=, and {given} is not a dtype; "
                "pass kwargs={'dtype': None} for its default"
            )
        kwargs["dtype"] = given
    return ()


def _op_arity(spec: ProbeSpec, entry: OpEntry) -> int:
    """How many probed inputs this call has: an op taking a list of tensors takes as many as
    the spec gives shapes for (``ops.concatenate`` of three tensors), every other op its own."""
    if entry.input_style == "list" and spec.shapes is not None and len(spec.shapes) > 1:
        return len(spec.shapes)
    return entry.arity


def _op_shapes(spec: ProbeSpec, entry: OpEntry) -> tuple[tuple[int, ...], ...]:
    arity = _op_arity(spec, entry)
    if spec.shapes is None:
        return entry.shapes
    if len(spec.shapes) == arity:
        return spec.shapes
    if len(spec.shapes) == 1:
        return spec.shapes * arity
    raise InvalidSpecError(
        f"{entry.name} takes {arity} probed input(s); got {len(spec.shapes)} shapes"
    )


def _with_shapes(inputs: tuple[dict, ...], shapes: tuple[tuple[int, ...], ...]) -> tuple:
    """The op's inputs with the probed tensors' shapes replaced by ``shapes``; a list of
    tensors grows (its last item repeated) to take the shapes beyond the catalog's count."""
    counter = iter(shapes)
    extra = [len(shapes) - _probed_count(inputs)]

    def one(leaf: dict) -> dict:
        if leaf["kind"] in ("list", "tuple", "varargs"):
            items = list(leaf["items"])
            if leaf["kind"] == "list" and items and extra[0] > 0:
                items += [items[-1]] * extra[0]
                extra[0] = 0
            return {**leaf, "items": [one(item) for item in items]}
        if leaf["kind"] == "tensor" and leaf["dtype"] == "probe":
            return {**leaf, "shape": list(next(counter))}
        return leaf

    return tuple(one(leaf) for leaf in inputs)


def _probed_count(inputs: tuple[dict, ...] | list[dict]) -> int:
    return sum(
        _probed_count(leaf["items"])
        if leaf["kind"] in ("list", "tuple", "varargs")
        else int(leaf["kind"] == "tensor" and leaf["dtype"] == "probe")
        for leaf in inputs
    )


def _op_tensor(value: Any, dtype: str) -> Any:
    """``value`` as the backend tensor a user would pass: ``convert_to_tensor(x, dtype)``.

    A NumPy array handed to an op is converted by the op itself, and on JAX under
    ``floatx="bfloat16"`` that conversion makes every array float32; an explicit dtype keeps
    what the user asked for (or shows the backend cannot: JAX makes float64 float32)."""
    import keras

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return keras.ops.convert_to_tensor(value, dtype=dtype)
    except Exception:  # no tensor of this dtype on this backend: the op gets the array
        return value


def _given_note(given: str) -> str:
    return "a Python number" if given in dtypes.PYTHON_SCALARS else "the sample given"


def _op_described(value: Any) -> str:
    """A leaf's dtype; ``python_int`` (``python_bool``, ...) for a Python value."""
    import keras

    if isinstance(value, (bool, int, float, complex, str)):
        return f"python_{type(value).__name__}"
    if hasattr(value, "dtype"):
        try:
            return keras.backend.standardize_dtype(value.dtype)
        except Exception:
            return str(value.dtype)
    return f"python_{type(value).__name__}"


def _op_leaves(outputs: Any) -> list[Any]:
    import keras

    if isinstance(outputs, (str, bytes)):
        return [outputs]
    return [leaf for leaf in keras.tree.flatten(outputs) if leaf is not None]


def _op_leaf_dtypes(outputs: Any) -> tuple[str, ...]:
    return tuple(_op_described(leaf) for leaf in _op_leaves(outputs))


def _op_tensors(outputs: Any) -> list[Any]:
    return [leaf for leaf in _op_leaves(outputs) if hasattr(leaf, "dtype")]


def _op_outcome(
    outputs: Any, error: Any, steps: list[CastStep], documented: rules.Documented, declared
) -> dict:
    """As ``_outcome``, with Python values (``ops.size``, ``ops.shape``) named as
    ``python_int``, ``python_bool``, ... instead of being dropped."""
    fields: dict[str, Any] = {
        "documented_dtype": documented.dtype,
        "declared_dtype": declared[0] if declared else None,
        "result_type_args": documented.result_type_args,
        "basis": tuple(documented.basis),
    }
    if error is not None:
        fields.update(
            status="error",
            error=_error_info(error, "call"),
            verdict="error",
            cast_path=tuple(steps),
        )
        return fields
    out_dtypes = _op_leaf_dtypes(outputs)
    for i, dtype in enumerate(out_dtypes):
        note = _output_note(dtype, documented.dtype)
        if dtype.startswith("python_"):
            note = f"a Python {dtype.removeprefix('python_')}, not a tensor; {note}"
        steps.append(CastStep(stage="output", dtype=dtype, index=i, note=note))
    observed = out_dtypes[0] if out_dtypes else None
    tensors = _op_tensors(outputs)
    fields.update(
        status="ok",
        output_dtype=observed,
        output_dtypes=out_dtypes,
        device=_device(tensors[0]) if tensors else "cpu",
        cast_path=tuple(steps),
        verdict=rules.verdict(
            status="ok",
            documented=documented.dtype,
            declared=fields["declared_dtype"],
            observed=observed,
        ),
    )
    return fields


# ---------------------------------------------------------------------- losses, metrics


def _run_objective(spec: ProbeSpec, entry: Any, timings: dict[str, float]) -> dict:
    """A loss or metric on y_true/y_pred (or a metric's values) as backend tensors of the asked
    dtypes. A loss class is built with ``dtype=policy`` and its ``call`` is watched (what it
    received after ``Loss.__call__``'s conversion); a metric class is built the same way, and
    its variables are read after construction, ``update_state``, and ``reset_state``; the output
    is the loss, the metric's ``result()``, or the function's return value."""

    if entry.skip:
        raise InvalidSpecError(f"{entry.name} cannot be probed standalone: {entry.skip}")
    input_dtypes = _broadcast(spec.input_dtypes, entry.arity)
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
    tensors = [_op_tensor(sample, d) for sample, d in zip(samples, input_dtypes)]
    steps: list[CastStep] = []
    for i, (leaf, given, tensor) in enumerate(zip(entry.inputs, input_dtypes, tensors)):
        param = leaf["param"]
        steps.append(CastStep(stage="input", dtype=given, note=f"{param}", index=i))
        conv = _op_described(tensor)
        note = "backend tensor, dtype kept" if conv == given else f"{given} -> {conv}: converted"
        steps.append(
            CastStep(stage="converted", dtype=conv, index=i, changed=conv != given, note=note)
        )
    target = catalog.objective_calls.resolve(entry)
    kwargs = dict(spec.kwargs)
    if entry.kind in ("loss-function", "metric-function"):
        return _objective_function(entry, target, tensors, shapes, input_dtypes, kwargs, steps)
    try:
        built = catalog.objective_calls.build_kwargs({**entry.init_kwargs, **kwargs})
        instance = target(**built, dtype=spec.policy)
    except Exception as error:
        raise _Invalid(error, "construct") from error
    if entry.kind == "loss":
        return _loss_class(entry, instance, tensors, shapes, input_dtypes, steps, timings)
    return _metric_class(entry, instance, tensors, steps, timings)


def _objective_function(entry, fn, tensors, shapes, input_dtypes, kwargs, steps) -> dict:
    import keras

    kwargs = {**entry.kwargs, **kwargs}
    outputs, error = None, None
    try:
        outputs = fn(*tensors, **kwargs)
    except Exception as exc:
        error = exc
    try:
        symbolic = [keras.KerasTensor(s, dtype=d) for s, d in zip(shapes, input_dtypes)]
        declared = _op_leaf_dtypes(fn(*symbolic, **kwargs))
    except Exception:
        declared = ()
    documented = rules.Documented(None, (f"Keras documents no dtype rule for {entry.name}",))
    return _op_outcome(outputs, error, steps, documented, declared)


def _loss_class(entry, loss, tensors, shapes, input_dtypes, steps, timings) -> dict:
    import keras

    received: list[tuple[str, ...]] = []
    original = loss.call

    def watched(*args: Any, **kw: Any) -> Any:
        received.append(_op_leaf_dtypes(list(args)))
        out = original(*args, **kw)
        received.append(_op_leaf_dtypes(out))
        return out

    loss.call = watched
    t0 = time.perf_counter()
    outputs, error = None, None
    try:
        outputs = loss(*tensors)
    except Exception as exc:
        error = exc
    timings["call_ms"] = _ms(t0)
    watched_calls = list(received)
    try:
        symbolic = [keras.KerasTensor(s, dtype=d) for s, d in zip(shapes, input_dtypes)]
        declared = _op_leaf_dtypes(loss(*symbolic))
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
    return _op_outcome(outputs, error, steps, documented, declared)


def _metric_class(entry, metric, tensors, steps, timings) -> dict:
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
    timings["call_ms"] = _ms(t0)
    documented = rules.Documented(
        metric.dtype,
        (
            f"{entry.name}(dtype=...) keeps its state and computes its result in its dtype "
            f"{metric.dtype} (the policy's compute dtype)",
        ),
    )
    if error is not None and outputs is not None:  # result() worked; reset_state failed
        fields = _op_outcome(outputs, None, steps, documented, ())
        fields.update(status="error", verdict="error", error=_error_info(error, where))
    else:
        fields = _op_outcome(outputs, error, steps, documented, ())
        if error is not None:
            fields["error"] = _error_info(error, where)
    fields["variables"] = stored
    return fields


# ------------------------------------------------------------------------------ shared


def _traced(trace: bool) -> contextlib.AbstractContextManager[Any]:
    return op_trace() if trace else contextlib.nullcontext()


def _outcome(
    outputs, error, steps, documented: rules.Documented, declared: tuple[str, ...], basis
) -> dict:
    import keras

    fields: dict[str, Any] = {
        "documented_dtype": documented.dtype,
        "declared_dtype": declared[0] if declared else None,
        "result_type_args": documented.result_type_args,
        "basis": tuple(basis),
    }
    if error is not None:
        fields.update(
            status="error",
            error=_error_info(error, "call"),
            verdict="error",
            cast_path=tuple(steps),
        )
        return fields
    flat = [t for t in keras.tree.flatten(outputs) if hasattr(t, "dtype")]
    out_dtypes = tuple(keras.backend.standardize_dtype(t.dtype) for t in flat)
    for i, dtype in enumerate(out_dtypes):
        steps.append(
            CastStep(
                stage="output", dtype=dtype, index=i, note=_output_note(dtype, documented.dtype)
            )
        )
    observed = out_dtypes[0] if out_dtypes else None
    fields.update(
        status="ok",
        output_dtype=observed,
        output_dtypes=out_dtypes,
        device=_device(flat[0]) if flat else "cpu",
        cast_path=tuple(steps),
        verdict=rules.verdict(
            status="ok",
            documented=documented.dtype,
            declared=fields["declared_dtype"],
            observed=observed,
        ),
    )
    return fields


class _CallRecorder:
    """What the outermost ``call`` (or ``quantized_call``) of a layer received: its inputs'
    dtypes and, read there inside the layer's autocast scope, every variable's dtypes."""

    def __init__(self, layer: Any):
        self.layer = layer
        self.received: list[str] | None = None
        self.variables: dict[str, VariableDtypes] = {}
        self._depth = 0

    def installed(self) -> contextlib.AbstractContextManager[None]:
        return wrapped_entry_points(self.layer, self._wrap)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0 and self.received is None:
                self._record(args, kwargs)
            self._depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._depth -= 1

        return recorded

    def _record(self, args: tuple, kwargs: dict) -> None:
        """Inputs by dtype; variables by their path inside the layer (``query/kernel``)."""
        import keras

        tensors = [
            t
            for t in keras.tree.flatten((args, kwargs))
            if hasattr(t, "dtype") and hasattr(t, "shape")
        ]
        self.received = [dtypes.describe(t) for t in tensors]
        prefix = f"{self.layer.path}/"
        self.variables = {
            v.path.removeprefix(prefix): variable_dtypes(v) for v in self.layer.variables
        }


def _layer_sample(dtype: str, shape, role: str, spec: ProbeSpec) -> Any:
    if role == "index" and dtype != "string":
        rng = np.random.default_rng(spec.seed)
        return rng.integers(0, INDEX_HIGH, size=shape).astype(dtypes.numpy_dtype(dtype))
    if dtype == "string":  # strings travel as Python lists, as Keras's own tests pass them
        return dtypes.sample(dtype, shape, preset=spec.values, seed=spec.seed).tolist()
    return dtypes.sample(dtype, shape, preset=spec.values, seed=spec.seed)


def _converted_dtype(sample: Any) -> str:
    import keras

    try:
        return dtypes.describe(keras.ops.convert_to_tensor(sample))
    except Exception as error:
        return f"unconvertible ({type(error).__name__})"


def _conversion_note(given: str, conv: str, converts: bool) -> str:
    if not converts:
        return "not converted: this layer takes its inputs as given"
    if conv == given:
        return "backend tensor, dtype kept"
    return f"{given} -> {conv}: the backend's tensor conversion"


def _variable_note(var: VariableDtypes) -> str:
    if var.read is None:
        return f"stored {var.stored}"
    if var.read == var.stored:
        return f"stored and read as {var.stored}"
    return f"stored {var.stored}, read as {var.read} inside call()"


def _output_note(dtype: str, documented: str | None) -> str:
    if documented is None:
        return "no documented rule"
    return "as documented" if dtype == documented else f"documented {documented}"


def _policy_basis(policy: Any) -> str:
    return (
        f"policy {policy.name!r}: compute {policy.compute_dtype}, variables {policy.variable_dtype}"
    )


def _broadcast(input_dtypes: tuple[str, ...], arity: int) -> tuple[str, ...]:
    for name in input_dtypes:
        dtypes.validate(name)
    if len(input_dtypes) == arity:
        return tuple(input_dtypes)
    if len(input_dtypes) == 1:
        return tuple(input_dtypes) * arity
    raise InvalidSpecError(
        f"this target takes {arity} input(s); got {len(input_dtypes)} input dtypes {input_dtypes}"
    )


def _device(tensor: Any) -> str:
    if hasattr(tensor, "devices"):  # jax
        device = next(iter(tensor.devices()))
        return f"{device.platform}:{device.id}"
    device = getattr(tensor, "device", None)
    if device is None:
        return "cpu"
    text = str(device)
    if text.startswith("/job"):  # tensorflow: /job:localhost/replica:0/task:0/device:CPU:0
        return text.rsplit("device:", 1)[-1].lower()
    return text


def _error_info(error: BaseException, where: str) -> ErrorInfo:
    message = keras_message(str(error), limit=_MAX_MESSAGE)
    return ErrorInfo(type=type(error).__name__, message=message, where=where)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
