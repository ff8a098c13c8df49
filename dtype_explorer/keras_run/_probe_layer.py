"""Probe a layer (a catalog layer or a user's): build it under the policy, call it eagerly on a
sample with wrappers on its ``call()`` (what it received, its variables as read) and the op
trace open, make the symbolic call for the declared dtype, and measure numerics against the
same weights in a wider dtype."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import _expect as expect
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._call_trace import variable_dtypes, wrapped_entry_points
from dtype_explorer.keras_run._compat import flatten_with_path
from dtype_explorer.keras_run._keras_state import preserved_keras_state
from dtype_explorer.keras_run._modes import ModeRun, check_mode, seeded
from dtype_explorer.keras_run._numerics import measure
from dtype_explorer.keras_run._observe import (
    Invalid,
    broadcast,
    conversion_note,
    converted_dtype,
    error_info,
    outcome,
    output_leaves,
    traced,
)
from dtype_explorer.keras_run._trace import untraced
from dtype_explorer.keras_run._training import global_seed_kept
from dtype_explorer.keras_run._values import call_arguments, leaf_name, leaf_paths, rebuild
from dtype_explorer.keras_run.catalog import (
    INDEX_HIGH,
    LayerEntry,
    OpEntry,
    build_kwargs,
    safe_deserialization,
)
from dtype_explorer.records import (
    CastStep,
    Expectation,
    ProbeSpec,
    VariableDtypes,
)
from dtype_explorer.timing import ms


def layer_entry(spec: ProbeSpec, target: Any) -> LayerEntry:
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


def layer_class(spec: ProbeSpec, target: Any) -> Callable[..., Any]:
    import keras

    if target is None:
        return getattr(keras.layers, catalog.entry(spec.target).name)
    if isinstance(target, keras.layers.Layer):
        config = {k: v for k, v in target.get_config().items() if k != "dtype"}
        return lambda **kwargs: type(target).from_config({**config, **kwargs})
    return target


def run_layer(
    spec: ProbeSpec,
    entry: LayerEntry,
    cls: Callable[..., Any],
    timings: dict[str, float],
    trace: bool,
) -> dict:

    shapes = spec.shapes or entry.shapes
    if len(shapes) == 1 < len(spec.input_dtypes) and spec.target.startswith("custom:"):
        shapes = shapes * len(spec.input_dtypes)  # call(self, x, y): the default shape each
    input_dtypes = broadcast(spec.input_dtypes, len(shapes))
    roles = entry.input_roles(len(shapes))
    if any(d in dtypes.PYTHON_SCALARS for d in input_dtypes):
        raise InvalidSpecError("Python scalars (python_int, ...) are inputs of ops, not of layers")
    mode = spec.mode
    # training=True in call_kwargs seeds random layers as the "training" mode does
    training = mode in ("training", "fit") or spec.call_kwargs.get("training") is True
    kwargs = seeded(
        cls, {**entry.kwargs, **spec.kwargs}, "training" if training else mode, spec.seed
    )
    # The leaves (arrays) and how they nest into the call's inputs: the user's own values with
    # their structure, or one sample per input.
    structure = spec.structure if spec.user_values is not None else None
    if spec.user_values is not None:
        samples = [_given_leaf(v.value(), v.dtype) for v in spec.user_values]
    else:
        samples = [_layer_sample(d, s, r, spec) for d, s, r in zip(input_dtypes, shapes, roles)]
    try:
        inputs_count = len(rebuild(structure, samples))
        paths = leaf_paths(structure, len(samples))
    except (ValueError, TypeError, KeyError) as error:
        raise InvalidSpecError(f"values: the spec's structure does not fit: {error}") from None
    names = [leaf_name(path, inputs_count) for path in paths]
    call_kwargs = call_arguments(spec.call_kwargs)

    def call(target: Any, leaves: list[Any], **kw: Any) -> Any:
        """The target called on the leaves, nested as given, with the call's kwargs."""
        return _call(target, entry, rebuild(structure, list(leaves)), **{**call_kwargs, **kw})

    def build() -> Any:
        try:
            with safe_deserialization():  # kwargs are data: a config never becomes code
                return cls(**build_kwargs(kwargs))
        except Exception as error:
            raise Invalid(error, "construct") from error

    t0 = time.perf_counter()
    layer = build()
    timings["construct_ms"] = ms(t0)
    if mode != "call":  # the built layer: a user's instance is rebuilt through a factory
        check_mode(mode, spec.target, layer, spec.backend)
    policy = layer.dtype_policy
    converts = bool(getattr(layer, "_convert_input_args", True))

    steps: list[CastStep] = []
    converted: list[str] = []
    given_note = "your value" if spec.user_values is not None else "the array given"
    for i, (given, sample) in enumerate(zip(input_dtypes, samples)):
        name = names[i]
        steps.append(CastStep(stage="input", dtype=given, note=given_note, index=i, name=name))
        conv = converted_dtype(sample) if converts else given
        converted.append(conv)
        note = conversion_note(given, conv, converts)
        steps.append(
            CastStep(
                stage="converted", dtype=conv, index=i, name=name, changed=conv != given, note=note
            )
        )

    run = ModeRun(mode, layer, call, shapes, input_dtypes, spec.backend)
    outputs, error = None, None
    t0 = time.perf_counter()
    try:
        run.prepare()  # the model's symbolic build, before the recorder sees any call
    except Exception as exc:  # the layer refused keras.Input: that mode's answer
        error = exc
    timings["model_ms"] = ms(t0)
    # compiled runs (predict, tf.data) trace call() as a graph: weights are left as drawn there
    recorder = _CallRecorder(
        layer,
        list_input=entry.input_style == "list",
        seed=spec.seed if mode not in ("predict", "dataset") else None,
    )
    t0 = time.perf_counter()
    with recorder.installed(), traced(trace and run.traced, numerics=run.values) as recorded:
        try:
            if error is None:
                with global_seed_kept() if training else contextlib.nullcontext():
                    outputs = run.forward(samples)
        except Exception as exc:
            error = exc
    timings["call_ms"] = ms(t0)
    model_steps = run.model_steps(converted)
    steps.extend(model_steps)
    converted = [step.dtype for step in model_steps] or converted
    autocast_rule = [
        rules.autocast(
            c, policy_dtype=layer.input_dtype, autocast=layer.autocast, converts=converts
        )
        for c in converted
    ]
    t0 = time.perf_counter()
    trace_steps = recorded.steps() if recorded is not None else ()
    timings["trace_ms"] = ms(t0)

    # Declared after the eager call: a built layer traces faster. Where both fail, a symbolic
    # call with the roles' default dtypes tells a dtype problem from a bad shape or kwarg.
    t0 = time.perf_counter()
    declared, declared_error = _declared_layer(
        layer if error is None else build(), call, shapes, input_dtypes
    )
    if error is not None and declared_error is not None:
        default_dtypes = tuple(
            {"index": "int32", "string": "string"}.get(r, "float32") for r in roles
        )
        if default_dtypes != input_dtypes and spec.user_values is None:
            _, declared_error = _declared_layer(build(), call, shapes, default_dtypes)
        if declared_error is not None:
            raise Invalid(declared_error, "shape or kwargs")
    timings["declared_ms"] = ms(t0)

    steps.extend(_received_steps(recorder, paths, names, converted, autocast_rule, steps))
    variables = recorder.variables
    steps.extend(variable_steps(variables))
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
    expectations = expect.for_layer(
        entry,
        compute_dtype=policy.compute_dtype,
        autocast_dtypes=tuple(d for d, _ in autocast_rule),
        documented=documented,
    )
    expected = expect.winner(expectations, kind="layer")
    observed = output_leaves(outputs)[0] if outputs is not None else ()
    wrapped = (
        expect.wrapped_op(trace_steps, observed[0])
        if spec.target.startswith("custom:") and observed
        else None
    )
    if wrapped is not None:  # a user's layer that is one op: judged by the op's expectation
        op_entry, op_inputs = wrapped
        op_documented = rules.for_op(op_entry, op_inputs)
        if op_documented.dtype is not None:
            expected = Expectation(
                source="result_type",
                dtype=op_documented.dtype,
                basis=f"its call is {op_entry.name}: {op_documented.basis[-1]}",
            )
            expectations = [e for e in expectations if e.source != "result_type"] + [expected]
    fields = outcome(
        outputs,
        error,
        steps,
        documented,
        declared,
        basis,
        expectations=expectations,
        expected=expected,
    )
    if outputs is not None and isinstance(outputs, dict):  # {"images": ..., "masks": ...}
        fields["cast_path"] = _named_outputs(fields["cast_path"], outputs)
    fields["variables"] = variables
    fields["trace"] = trace_steps
    fields["trace_dropped"] = recorded.dropped if recorded is not None else 0
    fields["trace_note"] = run.trace_note(len(trace_steps)) if recorded is not None else ""
    fields["execution"] = run.execution
    fields["compiled"] = run.compiled
    if outputs is not None and mode not in ("predict", "dataset"):
        t0 = time.perf_counter()
        fields["numerics"] = measure(
            outputs,
            samples,
            steps,
            reference=lambda dtype: _reference_outputs(
                build, layer, entry, call, samples, dtype, training=training
            ),
            comparable=_comparable(layer),
            integer_reference=entry.contract in ("compute", "self-managed")
            or entry.group == "merging",
        )
        timings["numerics_ms"] = ms(t0)
    if mode == "fit" and outputs is not None:
        t0 = time.perf_counter()
        try:
            fields["fit"] = run.fit_step(samples, outputs, _softmax_head(entry, kwargs))
        except Exception as exc:
            fields.update(status="error", verdict="error", error=error_info(exc, "fit"))
        timings["fit_ms"] = ms(t0)
    return fields


def _softmax_head(entry: LayerEntry, kwargs: dict[str, Any]) -> bool:
    return entry.name == "Softmax" or kwargs.get("activation") == "softmax"


def _call(layer: Any, entry: LayerEntry, inputs: list[Any], **call_kwargs: Any) -> Any:
    if entry.input_style == "list":
        return layer(list(inputs), **call_kwargs)
    if entry.input_style == "positional":
        return layer(*inputs, **call_kwargs)
    return layer(inputs[0], **call_kwargs)


def _reference_outputs(
    build: Callable[[], Any],
    layer: Any,
    entry: LayerEntry,
    call: Callable[..., Any],
    samples: list,
    dtype: str,
    *,
    training: bool = False,
) -> Any:
    """The same layer, with the same weights, run in ``dtype`` on the same sample; under the
    training modes with ``training=True`` and its seed state as built (the same draws as the
    probed call, which was the layer's first)."""
    import keras

    with preserved_keras_state():
        keras.config.set_dtype_policy(dtype)
        reference = build()
    roles = entry.input_roles(len(samples))

    def widen(leaf: Any, role: str) -> Any:
        if not isinstance(leaf, np.ndarray):
            return leaf  # a Python number, a string list: as given
        kind = dtypes.describe(leaf)
        if dtypes.is_float(kind) or (dtypes.is_integer(kind) and role != "index"):
            return leaf.astype(dtype)
        return leaf

    inputs = [
        keras.tree.map_structure(lambda leaf, role=role: widen(leaf, role), s)
        for s, role in zip(samples, roles)
    ]
    symbolic = keras.tree.map_structure(
        lambda x: (
            keras.KerasTensor(np.shape(x), dtype=dtypes.describe(x))
            if isinstance(x, np.ndarray)
            else x
        ),
        inputs,
    )
    try:  # built symbolically: no computation (no draw) before the weights are set
        call(reference, symbolic)
    except Exception:
        call(reference, inputs, **({"training": False} if training else {}))
    seeds = [
        (v, keras.ops.convert_to_numpy(v.value))
        for v in reference.variables
        if training and "seed_generator" in variable_name(reference, v)
    ]
    reference.set_weights(
        [
            w.astype(dtype) if keras.backend.is_float_dtype(str(w.dtype)) else w
            for w in layer.get_weights()
        ]
    )
    for variable, value in seeds:
        variable.assign(value)
    return call(reference, inputs, training=True) if training else call(reference, inputs)


def _declared_layer(
    layer: Any, call: Callable[..., Any], shapes, input_dtypes
) -> tuple[tuple[str, ...], Exception | None]:
    import keras

    try:
        symbolic = [keras.KerasTensor(shape, dtype=d) for shape, d in zip(shapes, input_dtypes)]
        out = call(layer, symbolic)
    except Exception as error:
        return (), error
    return tuple(keras.backend.standardize_dtype(t.dtype) for t in keras.tree.flatten(out)), None


class _CallRecorder:
    """What the outermost ``call`` (or ``quantized_call``) of a layer received: its inputs'
    dtypes and, read there inside the layer's autocast scope, every variable's dtypes."""

    def __init__(self, layer: Any, *, list_input: bool = False, seed: int | None = 0):
        self.layer = layer
        self.list_input = list_input
        self.seed = seed
        self.received: list[str] | None = None
        #: Each tensor ``call`` received: where (``("arg", 0, "images")``, ``("kw", "mask")``),
        #: the name of that argument, and its dtype.
        self.received_at: list[tuple[tuple[Any, ...], str, str]] = []
        self.variables: dict[str, VariableDtypes] = {}
        self._depth = 0

    def installed(self) -> contextlib.AbstractContextManager[None]:
        return wrapped_entry_points(self.layer, self._wrap)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0 and self.received is None:
                self._record(args, kwargs, original)
            self._depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._depth -= 1

        return recorded

    def _record(self, args: tuple, kwargs: dict, original: Callable[..., Any]) -> None:
        """Inputs by dtype and where ``call`` got them; variables by their path inside the
        layer (``query/kernel``)."""

        try:
            params = list(inspect.signature(original).parameters)
        except (TypeError, ValueError):
            params = []
        found = [
            (("arg", j, *path), params[j] if j < len(params) else f"arg{j}", leaf)
            for j, arg in enumerate(args)
            for path, leaf in flatten_with_path(arg)
        ] + [
            (("kw", key, *path), "/".join([key, *map(str, path)]), leaf)
            for key, value in kwargs.items()
            for path, leaf in flatten_with_path(value)
        ]
        self.received_at = [
            (where, name, dtypes.describe(t))
            for where, name, t in found
            if hasattr(t, "dtype") and hasattr(t, "shape")
        ]
        self.received = [dtype for _, _, dtype in self.received_at]
        if self.seed is not None:
            with untraced():
                same_weights(self.layer, self.seed)
        self.variables = {
            variable_name(self.layer, v): variable_dtypes(v) for v in self.layer.variables
        }


def _received_steps(
    recorder: _CallRecorder,
    paths: list[tuple[Any, ...]],
    names: list[str | None],
    converted: list[str],
    autocast_rule: list[tuple[str, str]],
    steps: list[CastStep],
) -> list[CastStep]:
    """The ``autocast`` steps: each tensor ``call()`` received, matched to the input leaf it
    came from by where it sits (argument, then keys); a tensor that matches none (a mask
    Keras passed) is shown by its argument's name, and a leaf ``call()`` never received says
    so on its ``converted`` step."""
    offset = ("arg", 0) if recorder.list_input else ("arg",)
    leaf_at = {(*offset, *path): i for i, path in enumerate(paths)}
    found: list[CastStep] = []
    seen: set[int] = set()
    for where, name, got in recorder.received_at:
        i = leaf_at.get(where)
        if i is None or i in seen:
            note = f"received by call() as {name!r}, not one of the inputs given"
            found.append(CastStep(stage="autocast", dtype=got, note=note, name=name))
            continue
        seen.add(i)
        expected, why = autocast_rule[i]
        conv = converted[i]
        note = why if got == expected else f"{conv} -> {got}: received by call()"
        found.append(
            CastStep(
                stage="autocast", dtype=got, note=note, index=i, name=names[i], changed=got != conv
            )
        )
    if recorder.received is not None:
        for k, step in enumerate(steps):
            if step.stage == "converted" and step.index is not None and step.index not in seen:
                note = f"{step.note}; call() did not receive it as a tensor"
                steps[k] = step.model_copy(update={"note": note})
    return found


def _named_outputs(cast_path: tuple[CastStep, ...], outputs: dict) -> tuple[CastStep, ...]:
    """The output steps of a dict of outputs named by their keys (``images``)."""

    names = [
        "/".join(map(str, path)) for path, leaf in flatten_with_path(outputs) if leaf is not None
    ]
    return tuple(
        step.model_copy(update={"name": names[step.index]})
        if step.stage == "output" and step.index is not None and step.index < len(names)
        else step
        for step in cast_path
    )


def _given_leaf(value: Any, dtype: str) -> Any:
    """A user's leaf as the layer gets it: strings as a Python list, as Keras's own tests
    pass them; arrays as NumPy arrays."""
    return value.tolist() if dtype == "string" else value


def same_weights(layer: Any, seed: int) -> None:
    """Give the trainable float weights each backend drew with its own RNG the same values on
    every backend, before ``call()`` computes, so that backends can be compared on numbers:
    uniform in -0.5..0.5 from ``seed`` and the variable's place among the layer's trainable
    variables (not its path, which holds a per-process name counter). Constant weights (zero
    biases, unit scales) and non-trainable state (moving statistics, lookup tables) are kept."""
    import keras
    from keras.src.backend.common.variables import AutocastScope

    # Called from inside call(), where the layer's autocast scope reads a mixed policy's float32
    # variables as float16: out of it, the stored values are read and written (on torch an
    # assignment inside the scope does not reach the variable).
    with AutocastScope(None):
        for place, variable in enumerate(layer.trainable_variables):
            dtype = dtypes.describe(variable)
            if dtypes.family(dtype) != "float":
                continue
            drawn = np.asarray(keras.ops.convert_to_numpy(variable))
            if drawn.size < 2 or np.all(drawn == drawn.flat[0]):
                continue
            rng = np.random.default_rng([seed, place])
            value = rng.uniform(-0.5, 0.5, drawn.shape).astype(dtypes.numpy_dtype(dtype))
            variable.assign(value)


def _comparable(layer: Any) -> tuple[bool, str]:
    """Whether this layer's numbers can be compared across backends: not when it draws random
    numbers in the call (each backend's own generator)."""
    if any("seed_generator" in variable_name(layer, v) for v in layer.variables):
        return False, "a random layer: each backend draws its own numbers"
    return True, ""


def _layer_sample(dtype: str, shape, role: str, spec: ProbeSpec) -> Any:
    if role == "index" and dtype != "string":
        rng = np.random.default_rng(spec.seed)
        return rng.integers(0, INDEX_HIGH, size=shape).astype(dtypes.numpy_dtype(dtype))
    if dtype == "string":  # strings travel as Python lists, as Keras's own tests pass them
        return dtypes.sample(dtype, shape, preset=spec.values, seed=spec.seed).tolist()
    return dtypes.sample(dtype, shape, preset=spec.values, seed=spec.seed)


def variable_name(layer: Any, variable: Any) -> str:
    """A variable's path inside its layer (``query/kernel``); its name before Keras 3.4 (an
    engine's release), which had no ``path``."""
    path = getattr(variable, "path", None)
    if path is None:
        return variable.name
    return path.removeprefix(f"{getattr(layer, 'path', layer.name)}/")


def variable_steps(
    variables: dict[str, VariableDtypes], more: Callable[[VariableDtypes], str] = lambda _: ""
) -> list[CastStep]:
    """The ``variables`` stage: each variable as stored and as ``call()`` read it (``more``
    adds to a variable's note: Keras 2 says which are not AutoCastVariables)."""
    return [
        CastStep(
            stage="variables",
            dtype=var.read or var.stored,
            name=name,
            changed=var.read is not None and var.read != var.stored,
            note=_variable_note(var) + more(var),
        )
        for name, var in variables.items()
    ]


def _variable_note(var: VariableDtypes) -> str:
    if var.read is None:
        return f"stored {var.stored}"
    if var.read == var.stored:
        return f"stored and read as {var.stored}"
    return f"stored {var.stored}, read as {var.read} inside call()"


def _policy_basis(policy: Any) -> str:
    return (
        f"policy {policy.name!r}: compute {policy.compute_dtype}, variables {policy.variable_dtype}"
    )
