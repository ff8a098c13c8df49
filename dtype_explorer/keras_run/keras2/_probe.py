"""Probe a layer, loss or metric with Keras 2 (``tf_keras``, what ``tf.keras`` was before
Keras 3), in a worker of the Keras 2 engine (``TF_USE_LEGACY_KERAS=1``, tensorflow only).

The same cast-path stages as Keras 3 where Keras 2 has them: ``input`` (the array given, or
the user's own value: ``values=``), ``autocast`` (what the layer's ``call()`` received: Keras 2
casts floating inputs to the compute dtype in ``Layer.__call__``), ``variables`` (stored in the
variable dtype; under a mixed policy an ``AutoCastVariable`` read in the compute dtype inside
``call()``) and ``output``. The same records as Keras 3 for the rest: ``numerics`` (wraparound,
reference error, inf/NaN against the same layer in float64, ``_keras2_values``), losses and
metrics (``_keras2_objective``), the modes ``model``/``predict``/``fit`` (``_keras2_modes``: one
step with Keras 2's ``LossScaleOptimizer`` under a mixed policy) and ``supplied``.

What tf_keras documents decides the verdict: its policy rule, quoted from its own docstrings
(``_documented``: a layer casts its floating-point inputs, in its first argument, to its
compute dtype, and computes and outputs in it), with the layer's ``compute_dtype`` read from
the built tf_keras layer; where that rule does not reach (an int input, ``autocast=False``)
the answer stays ``undocumented``. What Keras 2 lacks is said once in ``basis``: no
``converted`` stage of its own (``__call__`` converts NumPy inputs and casts floating ones in
one step) and no ``keras.backend.result_type`` (no ``result_type`` expectation); a layer or op
without a Keras 2 counterpart is said to have none. The op trace is TensorFlow's ops
(``_keras2_trace``: op callbacks), in the eager modes ``call`` and ``model``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from typing import Any

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import _expect as expect
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._instance_kind import keras2_layer_class
from dtype_explorer.keras_run.catalog import LayerEntry, OpEntry
from dtype_explorer.keras_run.keras2._documented import documented
from dtype_explorer.keras_run.keras2._instance import Keras2Copies, Keras2Packed, is_keras2_instance
from dtype_explorer.keras_run.keras2._modes import NO_GRADIENT_VALUES, Keras2Run
from dtype_explorer.keras_run.keras2._objective import run_keras2_objective
from dtype_explorer.keras_run.keras2._op_trace import TRACE_NOTE, Keras2Trace
from dtype_explorer.keras_run.keras2._values import is_variable, keras2_numerics
from dtype_explorer.keras_run.probe import (
    Called,
    Invalid,
    LayerInputs,
    ProbeFields,
    construct,
    error_info,
    input_count,
    layer_caller,
    layer_inputs,
    output_note,
    recorded_call,
    supplied,
    timed,
    variable_steps,
)
from dtype_explorer.records import CastStep, Expectation, ProbeResult, ProbeSpec, VariableDtypes
from dtype_explorer.timing import ms

#: Why a stage of the Keras 3 cast path has no Keras 2 counterpart (kept in ``basis``).
NO_CONVERTED_STAGE = (
    "converted: no such stage in Keras 2 (Layer.__call__ converts NumPy inputs and casts "
    "floating ones to the compute dtype in one step)"
)
MODEL_AUTOCAST = (
    "Keras 2's Model.__call__ is Layer.__call__: it casts floating inputs to the compute dtype "
    "(Layer._maybe_cast_inputs; autocast=False in the constructor keeps them as given)"
)
NO_RESULT_TYPE = (
    "no result_type expectation: Keras 2 has no keras.backend.result_type; what it documents "
    "is its policy rule (a layer casts its floating-point inputs to its compute dtype)"
)

NOT_A_POLICY = (
    "{!r} is the layer's own dtype (Layer(dtype=...)), not a mixed-precision policy: the "
    "global policy stays 'float32' (set_global_policy takes floating-point policies only)"
)


def run_keras2(spec: ProbeSpec, versions: dict[str, str], target: Any = None) -> ProbeResult:
    """Probe ``spec`` with Keras 2 in this process (``tf_keras`` imported, on tensorflow).

    Args:
        spec: the question; its target must be a ``keras.layers`` name that ``tf_keras.layers``
            has, or ``"custom:<Name>"`` with ``target``; its mode ``"call"``.
        versions: what the result carries (the engine's Keras 2 version among them).
        target: a ``tf_keras`` Layer or Model subclass (the user's tf.keras class).

    Returns:
        The answer, an ``invalid`` one naming what Keras 2 lacks.
    """
    started = time.perf_counter()
    timings: dict[str, float] = {}
    base = {"spec": spec, "backend": "tensorflow", "versions": versions, "timings": timings}
    fields: ProbeFields
    try:
        fields = _run(spec, timings, target)
    except Invalid as invalid:
        fields = {"status": "invalid", "error": error_info(invalid.error, invalid.where)}
    except (InvalidSpecError, ValueError, TypeError) as error:
        fields = {"status": "invalid", "error": error_info(error, "spec")}
    timings["total_ms"] = ms(started)
    fields.setdefault("verdict", "error")
    return ProbeResult(**base, **fields)


def _run(spec: ProbeSpec, timings: dict[str, float], target: Any) -> ProbeFields:
    """The Keras 2 probe's stages: the ``tf_keras`` layer and policy asked for, the inputs
    (the user's values or the Keras 3 probe's samples), the layer built and called in the
    spec's mode under that policy with its ``call()`` recorded, ``compute_output_signature``
    for the declared dtype, the numerics against a float64 reference, then the fit step."""
    import tensorflow as tf
    import tf_keras

    if spec.target.startswith(("losses.", "metrics.")):
        if spec.mode != "call":
            raise InvalidSpecError(f"{spec.target}: Keras 2's losses and metrics run in 'call'")
        with timed(timings, "call_ms"):
            return run_keras2_objective(spec, tf, tf_keras, instance=target)
    # 1. The target: tf_keras's layer of that name, its kwargs, and the Keras 2 policy.
    entry, cls, kwargs, policy = _target(spec, tf_keras, target)
    # 2. Inputs: the user's values, or the samples the Keras 3 probe makes.
    inputs = _cell_states(layer_inputs(spec, entry), entry, tf)
    with _floatx(tf_keras, spec.floatx):  # the global policy, as the Keras 3 probe sets it
        tf_keras.mixed_precision.set_global_policy(_global(policy, tf_keras))
        # 3. Build the layer under that policy.
        with timed(timings, "construct_ms"):
            layer = construct(lambda: cls(**kwargs))
        run = Keras2Run(spec.mode, layer, entry, inputs, tf_keras, spec.call_kwargs)
        # 4. The recorded call, in the spec's mode: what call() received, the variables.
        recorder, trace = _Recorder(layer, tf), Keras2Trace()
        with timed(timings, "call_ms"):
            called = recorded_call(run.call, trace=False, around=_around(recorder, trace, spec))
        # 5. Declare: Keras 2's compute_output_signature.
        with timed(timings, "declared_ms"):
            declared = _declared(cls, kwargs, entry, inputs.shapes, inputs.dtypes, tf)
        # 6. The cast path, what tf_keras documents (its policy rule) and the answer.
        steps = _steps(inputs, recorder)
        said = documented(layer, entry, inputs, tf, tf_keras)
        fields = _answer(called, steps, declared, policy, recorder, said, tf)
        fields["execution"] = run.execution
        if trace.steps:
            fields.update(
                trace=tuple(trace.steps), trace_dropped=trace.dropped, trace_note=TRACE_NOTE
            )
        # 7. Numerics against the same layer in float64 (not of predict), then the fit step.
        if called.outputs is not None and spec.mode != "predict":
            with timed(timings, "numerics_ms"):
                fields["numerics"] = keras2_numerics(
                    getattr(cls, "widened", lambda: cls(**kwargs)),
                    layer,
                    entry,
                    layer_caller(entry, inputs, spec.call_kwargs),
                    inputs,
                    steps,
                    called.outputs,
                )
        if spec.mode == "fit" and called.outputs is not None:
            with timed(timings, "fit_ms"):
                _fit(fields, run, called.outputs, tf)
    if isinstance(layer, tf_keras.Model):
        fields["basis"] = (*fields["basis"], MODEL_AUTOCAST)
    if getattr(cls, "note", ""):
        fields["basis"] = (*fields["basis"], cls.note)
    if _global(policy, tf_keras) is not policy:
        fields["basis"] = (*fields["basis"], NOT_A_POLICY.format(policy.name))
    fields["supplied"] = supplied(spec, entry)
    return fields


@contextlib.contextmanager
def _around(recorder: _Recorder, trace: Keras2Trace, spec: ProbeSpec) -> Iterator[None]:
    """The call's recorders: what ``call()`` received, and the TF op trace (eager modes only:
    ``predict`` and ``fit`` run in a ``tf.function``)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(recorder.installed())
        if spec.mode in ("call", "model"):
            stack.enter_context(trace.installed())
        yield


def _fit(fields: ProbeFields, run: Keras2Run, outputs: Any, tf: Any) -> None:
    """``mode="fit"``: one real Keras 2 training step; its failure is the answer's error."""
    try:
        fields["fit"] = run.fit_step(outputs, tf)
    except Exception as exc:
        fields.update(status="error", verdict="error", error=error_info(exc, "fit"))
        return
    fields["basis"] = (*fields["basis"], NO_GRADIENT_VALUES)


def _target(
    spec: ProbeSpec, tf_keras: Any, target: Any
) -> tuple[LayerEntry, Any, dict[str, Any], Any]:
    """The catalog entry, ``tf_keras``'s layer class (or the user's), its kwargs and the
    Keras 2 policy; what Keras 2 has no counterpart for raises ``InvalidSpecError`` saying so."""
    if spec.target.startswith("custom:"):
        entry = _custom(spec, target)
        if is_keras2_instance(target) or isinstance(target, Keras2Packed):
            return entry, Keras2Copies(target, spec.policy), {}, _policy(spec, tf_keras)
        return entry, target, dict(spec.kwargs), _policy(spec, tf_keras)
    if spec.target.startswith("ops."):
        raise InvalidSpecError(
            f"{spec.target} has no counterpart in Keras 2: keras.ops is Keras 3's (Keras 2 "
            "code calls tf.* ops directly)"
        )
    entry = catalog.entry(spec.target)
    if isinstance(entry, OpEntry):
        raise InvalidSpecError(f"{spec.target!r} is an op, not a layer")
    cls = getattr(tf_keras.layers, entry.name, None)
    if cls is None:
        raise InvalidSpecError(
            f"keras.layers.{entry.name} has no counterpart in Keras 2 "
            f"(tf_keras {tf_keras.__version__} has no layers.{entry.name})"
        )
    if entry.skip:
        raise InvalidSpecError(f"{entry.name} cannot be probed standalone: {entry.skip}")
    kwargs = {**entry.kwargs, **spec.kwargs}
    nested = [k for k, v in kwargs.items() if isinstance(v, dict)]
    if nested:
        raise InvalidSpecError(
            f"{entry.name}'s {nested} are Keras 3 layer configs; they are not translated to Keras 2"
        )
    return entry, cls, kwargs, _policy(spec, tf_keras)


def _custom(spec: ProbeSpec, target: Any) -> LayerEntry:
    """The entry of the user's tf.keras class or instance; anything else is refused, saying
    what runs."""
    if isinstance(target, Keras2Packed):
        return catalog.custom_entry(
            spec.target, getattr(target.cls, "call", None), input_count(spec)
        )
    if keras2_layer_class(target) is None and not is_keras2_instance(target):
        raise InvalidSpecError(
            f"{spec.target}: the Keras 2 engine probes a tf.keras (tf_keras) Layer or Model "
            "subclass, defined in the Keras 2 kernel (dx.engines.kernel('tf_keras')) or a "
            "script run with `dtype-explorer run --engine tf_keras`; a Keras 3 class runs with "
            f"engine=None. Received: {type(target).__name__} {target!r}"
        )
    return catalog.custom_entry(spec.target, getattr(target, "call", None), input_count(spec))


def _policy(spec: ProbeSpec, tf_keras: Any) -> Any:
    try:
        return tf_keras.mixed_precision.Policy(spec.policy)
    except (ValueError, TypeError) as error:
        raise InvalidSpecError(
            f"policy {spec.policy!r} does not exist in Keras 2 "
            f"(tf.keras.mixed_precision.Policy: {error})"
        ) from None


def _cell_states(inputs: LayerInputs, entry: LayerEntry, tf: Any) -> LayerInputs:
    """The inputs, with an RNN cell's sampled state as a ``tf.Tensor``: tf_keras's cells take
    a tensor or a list of them (a NumPy state is read as a nest of rows: "'tuple' object has
    no attribute 'rank'"). The user's own values are passed as given."""
    if inputs.user or entry.group != "rnn-cells":
        return inputs
    leaves = [leaf if i == 0 else tf.constant(leaf) for i, leaf in enumerate(inputs.leaves)]
    return dataclasses.replace(inputs, leaves=leaves)


def _global(policy: Any, tf_keras: Any) -> Any:
    """The global policy the probe sets: ``policy``, or ``float32`` where ``policy`` is an
    instance's own non-floating dtype (an adapted ``TextVectorization``'s ``"string"``,
    ``IntegerLookup``'s ``"int64"``), which ``set_global_policy`` refuses."""
    import tensorflow as tf

    compute = policy.compute_dtype
    if compute is not None and tf.as_dtype(compute).is_floating:
        return policy
    return tf_keras.mixed_precision.Policy("float32")


def _steps(inputs: LayerInputs, recorder: _Recorder) -> list[CastStep]:
    """The ``input``, ``autocast`` and ``variables`` steps (Keras 2 has no ``converted``)."""
    input_dtypes = inputs.dtypes
    given = "your value" if inputs.user else "the array given"
    steps = [
        CastStep(stage="input", dtype=d, note=given, index=i, name=inputs.names[i])
        for i, d in enumerate(input_dtypes)
    ]
    for i, (given, got) in enumerate(zip(input_dtypes, recorder.received or ())):
        note = (
            "received by call() as given"
            if got == given
            else f"{given} -> {got}: cast by Keras 2's Layer.__call__ (autocast)"
        )
        steps.append(
            CastStep(stage="autocast", dtype=got, note=note, index=i, changed=got != given)
        )
    steps.extend(
        variable_steps(
            recorder.variables,
            lambda var: "" if var.autocast else "; not an AutoCastVariable (never cast)",
        )
    )
    return steps


def _answer(
    called: Called,
    steps: list[CastStep],
    declared: tuple[str, ...],
    policy: Any,
    recorder: _Recorder,
    said: tuple[rules.Documented, list[Expectation]],
    tf: Any,
) -> ProbeFields:
    """The fields from the call's outputs (or its error): ``output`` steps, and the verdicts
    against what tf_keras documents (``said``: :func:`._documented.documented`)."""
    rule, expectations = said
    basis = (
        f"Keras 2 policy {policy.name!r}: compute {policy.compute_dtype}, "
        f"variables {policy.variable_dtype}",
        NO_CONVERTED_STAGE,
        NO_RESULT_TYPE,
        *rule.basis,
    )
    fields: ProbeFields = {
        "declared_dtype": declared[0] if declared else None,
        "documented_dtype": rule.dtype,
        "expectations": tuple(expectations),
        "expected_by": expectations[0].source if expectations else None,
        "basis": basis,
        "variables": recorder.variables,
        "execution": "eager call (Keras 2, tf_keras)",
    }
    if called.error is not None:
        fields.update(
            status="error", error=error_info(called.error, "call"), cast_path=tuple(steps)
        )
        return fields
    flat = [t for t in tf.nest.flatten(called.outputs) if hasattr(t, "dtype")]
    out_dtypes = tuple(tf.as_dtype(t.dtype).name for t in flat)
    for i, dtype in enumerate(out_dtypes):
        steps.append(CastStep(stage="output", dtype=dtype, index=i, note=output_note(dtype, None)))
    observed = out_dtypes[0] if out_dtypes else None
    device = str(getattr(flat[0], "device", "")) if flat else ""
    each, worst = expect.verdicts(rule.dtype, declared, out_dtypes)
    fields.update(
        status="ok",
        output_dtype=observed,
        output_dtypes=out_dtypes,
        cast_path=tuple(steps),
        device=device.rsplit("device:", 1)[-1].lower() if device else "cpu:0",
        verdict=worst,
        output_verdicts=each,
    )
    return fields


@contextlib.contextmanager
def _floatx(tf_keras: Any, floatx: str | None) -> Iterator[None]:
    """``floatx`` for the probe; Keras 2's floatx and global policy put back after it."""
    before = tf_keras.backend.floatx()
    policy = tf_keras.mixed_precision.global_policy()
    try:
        if floatx:
            tf_keras.backend.set_floatx(floatx)
        yield
    finally:
        tf_keras.backend.set_floatx(before)
        tf_keras.mixed_precision.set_global_policy(policy)


def _declared(cls, kwargs, entry, shapes, input_dtypes, tf) -> tuple[str, ...]:
    """What Keras 2 says symbolically: ``compute_output_signature`` of a fresh layer (under
    the global policy the probe set)."""
    try:
        layer = cls(**kwargs)
        specs = [tf.TensorSpec(shape, dtype=d) for shape, d in zip(shapes, input_dtypes)]
        arg = specs if entry.input_style == "list" else specs[0]
        if entry.input_style == "positional" and len(specs) > 1:
            return ()
        out = layer.compute_output_signature(arg)
    except Exception:
        return ()
    return tuple(tf.as_dtype(t.dtype).name for t in tf.nest.flatten(out) if hasattr(t, "dtype"))


class _Recorder:
    """What the layer's outermost ``call()`` received, and its variables as read there."""

    def __init__(self, layer: Any, tf: Any) -> None:
        self.layer, self.tf = layer, tf
        self.received: list[str] | None = None
        self.variables: dict[str, VariableDtypes] = {}

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        original = self.layer.call

        def recorded(*args: Any, **kwargs: Any) -> Any:  # a pass-through (_tool_error)
            if self.received is None:
                self._record(args, kwargs)
            return original(*args, **kwargs)

        self.layer.call = recorded
        try:
            yield
        finally:
            with contextlib.suppress(AttributeError):
                del self.layer.call

    def _record(self, args: tuple, kwargs: dict) -> None:
        tf = self.tf
        self.received = [
            tf.as_dtype(t.dtype).name
            for t in tf.nest.flatten((args, kwargs))
            if hasattr(t, "dtype") and hasattr(t, "shape")
        ]
        prefix = f"{self.layer.name}/"
        for v in filter(is_variable, self.layer.weights):
            autocast = hasattr(v, "true_dtype")  # tf_keras's AutoCastVariable
            stored = tf.as_dtype(v.true_dtype if autocast else v.dtype).name
            name = v.name.removeprefix(prefix).removesuffix(":0")
            self.variables[name] = VariableDtypes(
                stored=stored, read=tf.as_dtype(v.dtype).name, autocast=autocast
            )
