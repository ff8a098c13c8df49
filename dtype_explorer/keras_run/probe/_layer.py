"""Probe a layer (a catalog layer or a user's): build it under the policy, call it eagerly on a
sample with wrappers on its ``call()`` (what it received, its variables as read) and the op
trace open, make the symbolic call for the declared dtype, and measure numerics against the
same weights in a wider dtype."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from dtype_explorer.keras_run import _expect as expect
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run._compat import flatten_with_path
from dtype_explorer.keras_run._keras_state import global_seed_kept, preserved_keras_state
from dtype_explorer.keras_run._mode_rules import check_mode
from dtype_explorer.keras_run._numerics import recorded_draws
from dtype_explorer.keras_run.catalog import (
    LayerEntry,
    build_kwargs,
    safe_deserialization,
)
from dtype_explorer.keras_run.probe._called import layer_called
from dtype_explorer.keras_run.probe._fields import ProbeFields
from dtype_explorer.keras_run.probe._layer_reference import layer_numerics
from dtype_explorer.keras_run.probe._layer_target import InstanceMaker
from dtype_explorer.keras_run.probe._modes import ModeRun, seeded
from dtype_explorer.keras_run.probe._observe import (
    Invalid,
    backend_refusal,
    conversion_note,
    converted_dtype,
    error_info,
    output_leaves,
    output_note,
)
from dtype_explorer.keras_run.probe._quantize_layer import LayerQuantizer, quantization_of
from dtype_explorer.keras_run.probe._stages import (
    Called,
    Judged,
    LayerInputs,
    construct,
    declare,
    layer_caller,
    layer_inputs,
    recorded_call,
    timed,
    variable_steps,
)
from dtype_explorer.keras_run.trace import CallRecorder
from dtype_explorer.records import (
    CastStep,
    ErrorInfo,
    Expectation,
    ProbeSpec,
    TraceStep,
)


def run_layer(
    spec: ProbeSpec,
    entry: LayerEntry,
    cls: Callable[..., Any],
    timings: dict[str, float],
    trace: bool,
) -> ProbeFields:
    """Probe a layer: build it from ``cls`` under the policy, call it eagerly on the inputs
    (in the spec's mode) with its ``call()`` recorded and the op trace open, make the
    symbolic call for the declared dtype, and measure numerics against a wider reference.

    Args:
        spec: the question (its policy and floatx already set by ``_probe.run``).
        entry: the layer's catalog entry (a user's layer's: ``catalog.custom_entry``).
        cls: makes the layer from keyword arguments (a class, or a user instance's factory).
        timings: filled with each stage's milliseconds.
        trace: whether to open the op trace.

    Returns:
        The result's fields; a spec that cannot make a call raises ``Invalid``.
    """
    # 1. Inputs: the leaves the call gets and how they nest; the call, with its arguments.
    inputs = layer_inputs(spec, entry)
    mode = spec.mode
    # training=True in call_kwargs seeds random layers as the "training" mode does
    training = mode in ("training", "fit") or spec.call_kwargs.get("training") is True
    kwargs = seeded(
        cls, {**entry.kwargs, **spec.kwargs}, "training" if training else mode, spec.seed
    )
    call = layer_caller(entry, inputs, spec.call_kwargs)
    # 2. Build the layer under the policy.
    build = functools.partial(construct, functools.partial(_built, cls, kwargs))
    quantizer = LayerQuantizer(spec.quantize) if spec.quantize else None
    if quantizer is not None:  # built, then quantized as Model.quantize does it
        build = _quantizing(build, quantizer, call, inputs)
    with timed(timings, "construct_ms"), _recorded(spec, entry, cls, kwargs, inputs) as called_with:
        layer = build()
    if mode != "call":  # the built layer: a user's instance is rebuilt through a factory
        check_mode(mode, spec.target, layer, spec.backend)
    converts = bool(getattr(layer, "_convert_input_args", True))
    steps, converted = _input_steps(inputs, converts, layer.input_dtype)
    # 3. The recorded call, in the spec's mode.
    run = ModeRun(
        mode, layer, call, inputs.shapes, inputs.dtypes, spec.backend, inputs.nested, inputs.paths
    )
    # the user's instance keeps its own weights; anything built gets the same on every backend
    as_is = isinstance(cls, InstanceMaker) and not cls.rebuild
    seed = spec.seed if mode not in ("predict", "dataset") and not as_is else None
    draws: list[str] = []  # the dtype of each random draw: the reference replays them
    recorder, called = _recorded_layer_call(
        run, layer, entry, inputs, seed, training, trace, timings, draws
    )
    model_steps = run.model_steps(converted)
    steps.extend(model_steps)
    converted = [step.dtype for step in model_steps] or converted
    autocast_rule = _autocast_rule(layer, converted, converts)
    with timed(timings, "trace_ms"):
        trace_steps = called.steps()
    # 4. Declare: after the eager call (a built layer traces faster).
    with timed(timings, "declared_ms"):
        declared, refused = _declare_layer(layer, build, call, inputs, failed=called.error)
    steps.extend(_received_steps(recorder, inputs, converted, autocast_rule, steps))
    steps.extend(variable_steps(recorder.variables))
    # 5. Expectations, and the answer's fields from the outputs.
    fields = _answer_fields(
        spec,
        entry,
        layer,
        run,
        called,
        recorder,
        inputs,
        steps,
        declared,
        refused,
        autocast_rule,
        trace_steps,
    )
    fields.update(quantization=quantization_of(layer, quantizer, trace_steps), called=called_with)
    # 6. Numerics (not of a compiled run: its weights are left as drawn; nor of a layer the
    # probe quantized: its reference would be quantized too), then the fit step.
    if called.outputs is not None and mode not in ("predict", "dataset") and not quantizer:
        with timed(timings, "numerics_ms"):
            # the reference is built under the wider policy: a ``dtype`` the user gave in
            # kwargs would build it as narrow as the probed layer (and overflow with it)
            wide = {k: v for k, v in kwargs.items() if k != "dtype"}
            fields["numerics"] = layer_numerics(
                functools.partial(construct, functools.partial(_built, cls, wide)),
                layer,
                entry,
                call,
                inputs,
                steps,
                called.outputs,
                training,
                getattr(cls, "widened", None),
                draws,
            )
    if mode == "fit" and called.outputs is not None:
        with timed(timings, "fit_ms"):
            _fit_stage(fields, run, inputs, called.outputs, _softmax_head(entry, kwargs))
    return fields


def _answer_fields(
    spec: ProbeSpec,
    entry: LayerEntry,
    layer: Any,
    run: ModeRun,
    called: Called,
    recorder: CallRecorder,
    inputs: LayerInputs,
    steps: list[CastStep],
    declared: tuple[str, ...],
    refused: str | None,
    autocast_rule: list[tuple[str, str]],
    trace_steps: tuple[TraceStep, ...],
) -> ProbeFields:
    """Stage 5 of ``run_layer``: the expectations, judged against the outputs, and the answer's
    fields (its cast path, verdicts, error, variables and op trace)."""
    computes_with = (
        None
        if getattr(layer, "autocast", True)
        else tuple(v.read or v.stored for v in recorder.variables.values())
    )
    judged = _judged(
        entry,
        _LayerDtypes(layer.dtype_policy, str(layer.compute_dtype)),
        autocast_rule,
        spec,
        trace_steps,
        called.outputs,
        computes_with,
    )
    fields = judged.outcome(called.outputs, called.error, steps, declared)
    if refused is not None and called.error is not None:
        fields["error"] = _refusal_info(called.error, refused, built=layer.built)
    limit = run.tf_data_limit(fields.get("error"))
    if limit is not None:  # tf.data off tensorflow: a limit of the mode, not Keras's answer
        fields["error"] = limit
    if isinstance(called.outputs, dict):  # {"images": ..., "masks": ...}
        fields["cast_path"] = _named_outputs(fields["cast_path"], called.outputs)
        _judge_named_outputs(fields, layer, inputs, declared)
    fields.update(
        variables=recorder.variables,
        trace=trace_steps,
        trace_dropped=called.dropped,
        trace_note=run.trace_note(len(trace_steps)) if called.recorded is not None else "",
        execution=run.execution,
        compiled=run.compiled,
    )
    return fields


def _quantizing(
    build: Callable[[], Any],
    quantizer: LayerQuantizer,
    call: Callable[..., Any],
    inputs: LayerInputs,
) -> Callable[[], Any]:
    """``build`` followed by the symbolic call that builds the layer on the probe's inputs,
    then ``layer.quantize`` (:class:`LayerQuantizer`)."""

    def symbolic_build(layer: Any) -> None:
        _, error = _declared_layer(layer, call, inputs)
        if error is not None and not layer.built:
            raise Invalid(error, "build")

    return lambda: quantizer.quantized(build(), symbolic_build)


@contextlib.contextmanager
def _recorded(
    spec: ProbeSpec, entry: LayerEntry, cls: Any, kwargs: dict[str, Any], inputs: LayerInputs
) -> Iterator[Any]:
    """The call the probe makes, recorded for "copy as code" (``_called.layer_called``); a
    constructor Keras refuses (``Invalid`` at ``"construct"``) keeps it, so that the code
    writes the constructor that raises."""
    called = layer_called(spec, entry, cls, kwargs, inputs)
    try:
        yield called
    except Invalid as invalid:
        invalid.called = called if invalid.where == "construct" else None
        raise


def _built(cls: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    with safe_deserialization():  # kwargs are data: a config never becomes code
        return cls(**build_kwargs(kwargs))


def _autocast_rule(layer: Any, converted: list[str], converts: bool) -> list[tuple[str, str]]:
    """What the policy says each converted input becomes inside ``call()``, and why."""
    return [
        rules.autocast(
            c, policy_dtype=layer.input_dtype, autocast=layer.autocast, converts=converts
        )
        for c in converted
    ]


def _input_steps(
    inputs: LayerInputs, converts: bool, input_dtype: str
) -> tuple[list[CastStep], list[str]]:
    """The ``input`` and ``converted`` steps of each leaf, and the converted dtypes."""
    steps: list[CastStep] = []
    converted: list[str] = []
    given_note = "your value" if inputs.user else "the array given"
    for i, (given, sample) in enumerate(zip(inputs.dtypes, inputs.leaves)):
        name = inputs.names[i]
        steps.append(CastStep(stage="input", dtype=given, note=given_note, index=i, name=name))
        conv = converted_dtype(sample, input_dtype) if converts else given
        converted.append(conv)
        note = conversion_note(given, conv, converts)
        steps.append(
            CastStep(
                stage="converted", dtype=conv, index=i, name=name, changed=conv != given, note=note
            )
        )
    return steps, converted


def _recorded_layer_call(
    run: ModeRun,
    layer: Any,
    entry: LayerEntry,
    inputs: LayerInputs,
    seed: int | None,
    training: bool,
    trace: bool,
    timings: dict[str, float],
    draws: list[str],
) -> tuple[CallRecorder, Called]:
    """The mode's symbolic model built (before the recorder sees any call; a layer that
    refuses ``keras.Input`` gives that mode's answer), then the forward pass recorded; the
    trainable weights drawn from ``seed`` (``None``: kept as they are)."""
    error = None
    with timed(timings, "model_ms"):
        try:
            run.prepare()
        except Exception as exc:
            error = exc
    # compiled runs (predict, tf.data) trace call() as a graph: weights are left as drawn there
    recorder = CallRecorder(layer, list_input=entry.input_style == "list", seed=seed)

    def forward() -> Any:
        with global_seed_kept() if training else contextlib.nullcontext():
            return run.forward(inputs.leaves)

    with timed(timings, "call_ms"):
        called = recorded_call(
            forward,
            trace=trace and run.traced,
            numerics=run.values,
            around=_recorders(recorder, draws),
            error=error,
        )
    return recorder, called


@contextlib.contextmanager
def _recorders(recorder: CallRecorder, draws: list[str]) -> Iterator[None]:
    """The call's recorder and the random draws' (outside the op trace, which wraps them)."""
    with recorder.installed(), recorded_draws(draws):
        yield


def _declare_layer(
    layer: Any,
    build: Callable[[], Any],
    call: Callable[..., Any],
    inputs: LayerInputs,
    *,
    failed: Exception | None,
) -> tuple[tuple[str, ...], str | None]:
    """The declared dtypes: the symbolic call of the probed layer (a fresh one where the
    eager call failed), and the backend op that refused the dtype, if one did. Where both
    calls fail, a symbolic call with the roles' default dtypes tells a dtype problem from a bad
    shape or kwarg: the latter is the spec's (``Invalid``), unless the eager error was raised
    by the backend and the same layer works under float32 (:func:`_dtype_limit`)."""
    declared, error = _declared_layer(layer if failed is None else build(), call, inputs)
    if failed is not None and error is not None:
        default_dtypes = _default_dtypes(inputs)
        if default_dtypes != inputs.dtypes and not inputs.user:
            _, error = _declared_layer(build(), call, inputs, default_dtypes)
        if error is not None:
            refused = _dtype_limit(build, call, inputs, failed)
            if refused is None:
                raise Invalid(error, "shape or kwargs")
            return declared, refused
    return declared, None


def _default_dtypes(inputs: LayerInputs) -> tuple[str, ...]:
    return tuple({"index": "int32", "string": "string"}.get(r, "float32") for r in inputs.roles)


def _dtype_limit(
    build: Callable[[], Any], call: Callable[..., Any], inputs: LayerInputs, error: Exception
) -> str | None:
    """The backend op that refused this dtype: ``error`` raised inside the backend
    (``_observe.backend_refusal``), and the same layer, same kwargs and shapes, built and
    called symbolically under float32 with the roles' default dtypes works (so the spec's
    arguments are fine: the dtype is what the backend cannot do). ``None`` otherwise."""
    import keras

    refused = backend_refusal(error)
    if refused is None:
        return None
    with preserved_keras_state():
        keras.config.set_dtype_policy("float32")
        try:
            _, again = _declared_layer(build(), call, inputs, _default_dtypes(inputs))
        except Exception as exc:
            again = exc
    return refused if again is None else None


def _refusal_info(error: Exception, refused: str, *, built: bool) -> ErrorInfo:
    """The eager error as a backend's dtype limit: where (``build``: the layer did not get
    built), and the op that refused."""
    info = error_info(error, "call" if built else "build")
    message = (
        f"the backend cannot do this dtype: {refused} refused it (the same layer works under "
        f"float32). {info.message}"
    )
    return info.model_copy(update={"message": message})


def _declared_layer(
    layer: Any, call: Callable[..., Any], inputs: LayerInputs, input_dtypes=None
) -> tuple[tuple[str, ...], Exception | None]:
    """The layer's symbolic call on ``KerasTensor``\\ s of the inputs' shapes and dtypes."""
    import keras

    def symbolic() -> Any:
        tensors = zip(inputs.shapes, input_dtypes or inputs.dtypes)
        return call(layer, [keras.KerasTensor(shape, dtype=d) for shape, d in tensors])

    return declare(
        symbolic,
        lambda out: tuple(
            keras.backend.standardize_dtype(t.dtype) for t in keras.tree.flatten(out)
        ),
    )


def _judged(
    entry: LayerEntry,
    dtypes: _LayerDtypes,
    autocast_rule: list[tuple[str, str]],
    spec: ProbeSpec,
    trace_steps: tuple[TraceStep, ...],
    outputs: Any,
    computes_with: tuple[str, ...] | None = None,
) -> Judged:
    """The expectations stage of a layer: its policy rule and ``result_type``; a user's
    layer whose call is one op is judged by that op's expectation; a layer with
    ``autocast=False`` by what it computes with (``computes_with``: its variables as read).
    The compute dtype is the built layer's own, as Keras sets it (``IntegerLookup``'s is its
    vocabulary dtype whatever the policy), not the policy's."""
    autocast_dtypes = tuple(d for d, _ in autocast_rule)
    documented = rules.for_layer(
        entry,
        compute_dtype=dtypes.compute,
        autocast_dtypes=autocast_dtypes,
        computes_with=computes_with,
    )
    basis = (
        *_policy_basis(dtypes),
        *dict.fromkeys(why for _, why in autocast_rule),
        *documented.basis,
    )
    expectations = expect.for_layer(
        entry,
        compute_dtype=dtypes.compute,
        autocast_dtypes=autocast_dtypes,
        documented=documented,
        autocast=computes_with is None,
    )
    expected = expect.winner(expectations, kind="layer")
    observed = output_leaves(outputs)[0] if outputs is not None else ()
    wrapped = (
        expect.wrapped_op(trace_steps, observed[0])
        if spec.target.startswith("custom:") and observed
        else None
    )
    if wrapped is not None:
        op_entry, op_inputs = wrapped
        op_documented = rules.for_op(op_entry, op_inputs)
        if op_documented.dtype is not None:
            expected = Expectation(
                source="result_type",
                dtype=op_documented.dtype,
                basis=f"its call is {op_entry.name}: {op_documented.basis[-1]}",
            )
            expectations = [e for e in expectations if e.source != "result_type"] + [expected]
    user = spec.target.startswith("custom:") and bool(observed) and wrapped is None
    sampled = expect.sampled_ids(trace_steps, observed[0], expectations) if user else None
    if sampled is not None:  # not the policy rule's: the ids' dtype is the sampler's dtype=
        (why, expectations), expected = sampled, None
        documented, basis = rules.Documented(None, (why,)), (*basis, why)
    return Judged(documented, basis, expectations, expected)


def _fit_stage(
    fields: ProbeFields, run: ModeRun, inputs: LayerInputs, outputs: Any, softmax_head: bool
) -> None:
    """``mode="fit"``: one real training step; its failure is the answer's error."""
    try:
        fields["fit"] = run.fit_step(inputs.leaves, outputs, softmax_head)
    except Exception as exc:
        fields.update(status="error", verdict="error", error=error_info(exc, "fit"))


def _softmax_head(entry: LayerEntry, kwargs: dict[str, Any]) -> bool:
    return entry.name == "Softmax" or kwargs.get("activation") == "softmax"


def _received_steps(
    recorder: CallRecorder,
    inputs: LayerInputs,
    converted: list[str],
    autocast_rule: list[tuple[str, str]],
    steps: list[CastStep],
) -> list[CastStep]:
    """The ``autocast`` steps: each tensor ``call()`` received, matched to the input leaf it
    came from by where it sits (argument, then keys); a tensor that matches none (a mask
    Keras passed) is shown by its argument's name, and a leaf ``call()`` never received says
    so on its ``converted`` step."""
    offset = ("arg", 0) if recorder.list_input else ("arg",)
    leaf_at = {(*offset, *path): i for i, path in enumerate(inputs.paths)}
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
                stage="autocast",
                dtype=got,
                note=note,
                index=i,
                name=inputs.names[i],
                changed=got != conv,
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


def _judge_named_outputs(
    fields: ProbeFields, layer: Any, inputs: LayerInputs, declared: tuple[str, ...]
) -> None:
    """Each named output of a dict (a mask, boxes, labels) judged by the expectation Keras
    states for it (``_expect.named_output_expectations``), not by the images' rule."""
    if fields.get("status") != "ok":
        return
    outputs = [s for s in fields["cast_path"] if s.stage == "output"]
    names = [s.name or "" for s in outputs]
    given = {n: d for n, d in zip(inputs.names, inputs.dtypes) if n is not None}
    own = expect.named_output_expectations(layer, names, given)
    if not own:
        return
    each, overall = expect.verdicts(
        fields["documented_dtype"],
        declared,
        fields["output_dtypes"],
        own={i: dtype for i, (dtype, _) in own.items()},
    )
    fields.update(output_verdicts=each, verdict=overall)
    fields["basis"] = (*fields["basis"], *(why for _, why in own.values()))
    fields["cast_path"] = tuple(
        s.model_copy(update={"note": output_note(s.dtype, own[s.index][0])})
        if s.stage == "output" and s.index in own
        else s
        for s in fields["cast_path"]
    )


@dataclass(frozen=True)
class _LayerDtypes:
    """A built layer's policy, and its compute dtype as the layer itself reports it."""

    policy: Any
    compute: str


def _policy_basis(dtypes: _LayerDtypes) -> tuple[str, ...]:
    policy = dtypes.policy
    said = (
        f"policy {policy.name!r}: compute {policy.compute_dtype}, variables {policy.variable_dtype}"
    )
    if dtypes.compute == policy.compute_dtype:
        return (said,)
    return (said, f"the layer's own compute_dtype is {dtypes.compute}, not the policy's")
