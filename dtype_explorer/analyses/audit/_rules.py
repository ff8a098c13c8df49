"""The audit's rules: from the recorded dtype flow of a model to findings.

Every rule is a pure function of records: the :class:`~dtype_explorer.records.LayerCall`
records of one real forward pass and an :class:`AuditedModel` (what the rules need to know of
the model that ran), never Keras itself; the findings across modes and backends are in
:mod:`dtype_explorer.analyses.audit._rules_across`. Keras ran before: the pass itself
(``keras_run.ModelTracer``), the reference re-runs (``keras_run.layer_values_wrong``) and the
answers of ``result_type`` (:func:`result_type_questions`, asked by the audit). The rules
give no fix of their own: a fix is shown once the audit has run it on a copy and seen it clear
the finding (``_fixes``); a change the audit cannot run (a custom layer's own code) comes with
a ``FixProof`` saying so.

>>> from dtype_explorer.records import LayerCall, TensorInfo
>>> call = LayerCall(path="m/dense", layer_class="Dense", depth=1, policy="float32",
...                  compute_dtype="float32", variable_dtype="float32",
...                  given=(TensorInfo(dtype="float64", shape=(2, 3)),),
...                  received=(TensorInfo(dtype="float32", shape=(2, 3)),))
>>> [f.kind for f in find([call], model=AuditedModel(name="m", policy="float32"), policy="float32")]
['silent-downcast']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.analyses.audit import _rules_exact, _rules_output
from dtype_explorer.analyses.audit._rules_exact import computes_on_values
from dtype_explorer.analyses.audit._rules_output import first_at, overflow_step
from dtype_explorer.errors import InvalidSpecError, as_sentence
from dtype_explorer.keras_run import catalog
from dtype_explorer.records import (
    SEVERITIES,
    CastLoss,
    Finding,
    FixProof,
    LayerCall,
    TensorInfo,
    TraceStep,
    ValueFinding,
)

#: The 16-bit floats (``dtypes.FAMILIES``' floats of 16 bits).
HALF = dtypes.HALF  # the 16-bit floats (one owner: dtypes)
#: Why a custom layer's finding shows no fix (its ``FixProof.not_tried``).
CUSTOM_CODE = (
    "the change is in the custom layer's own code (its build() and call()), which the audit "
    "cannot rewrite and run on a copy"
)


@dataclasses.dataclass(frozen=True)
class AuditedModel:
    """What the rules need to know of the model that ran, beside its calls.

    ``policy``: its own dtype policy's name; ``optimizer``: the class name of the optimizer it
    is compiled with (``None``: not compiled); ``loss_scaled``: that optimizer is a
    ``LossScaleOptimizer``; ``result_types``: Keras's ``result_type`` on ``backend`` for each
    of :func:`result_type_questions`.
    """

    name: str
    policy: str
    backend: str = ""
    optimizer: str | None = None
    loss_scaled: bool = False
    result_types: Mapping[tuple[str, ...], str] = dataclasses.field(default_factory=dict)


def find(calls: list[LayerCall], *, model: AuditedModel, policy: str) -> list[Finding]:
    """Every finding the recorded calls support (one per kind and layer). ``model`` is the one
    that ran (under ``policy=`` an uncompiled clone); ``policy`` the one it is meant to run
    under (its own, or the one it was cloned under)."""
    rules: tuple[Callable[[list[LayerCall]], Iterable[Finding]], ...] = (
        _call_errors,
        lambda c: _silent_downcasts(c, policy, model.backend),
        _int_into_float,
        _rules_exact.precision_loss,
        _rules_exact.lossy_casts,
        _float32_only,
        _custom_dtypes,
        _rules_output.float16_outputs,
        _overflows,
        lambda c: _no_loss_scaling(c, model),
        lambda c: _rules_disagree(c, model),
    )
    return _unique(f for rule in rules for f in rule(calls))


def ordered(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then notes; otherwise in the order of the forward pass."""
    return sorted(_unique(findings), key=lambda f: SEVERITIES.index(f.severity))


# --------------------------------------------------------------------------- rules


def _call_errors(calls: list[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        if call.error is not None and call.retried is None:
            yield Finding(
                kind="call-error",
                severity="error",
                path=call.path,
                message=(
                    f"The forward pass stopped in {call.layer_class} ({call.compute_dtype} "
                    f"compute, received {_names(call.received)}): {_error(call)}"
                ),
                details={"error": call.error.to_dict()},
            )


def _silent_downcasts(
    calls: list[LayerCall], model_policy: str, backend: str = ""
) -> Iterator[Finding]:
    yield from _float64_not_kept(calls, backend)
    for call in calls:
        for source, target, why in _casts(call):
            if not dtypes.narrows(source, target):
                continue
            if source != "float64" and call.policy == model_policy:
                continue  # float32 -> 16-bit under the model's own mixed policy: asked for
            step = _cast_step(call, source, target)
            yield Finding(
                kind="silent-downcast",
                severity="warning" if source == "float64" else "info",
                path=call.path,
                message=(
                    f"{source} data is cast to {target} on entry to {call.layer_class} ({why}), "
                    f"without a warning: {_precision_lost(target)}.{first_at(step)}"
                ),
                details={"from": source, "to": target},
                step=step,
            )


def _float64_not_kept(calls: list[LayerCall], backend: str = "") -> Iterator[Finding]:
    """Layers whose policy computes in float64 that received and returned float32: float64
    was not kept (on jax without ``jax_enable_x64`` every float64 array is made float32,
    the Keras variables' declared dtype staying ``float64``). One finding, at the first such
    call, counting the others.

    >>> from dtype_explorer.records import TensorInfo
    >>> f32 = (TensorInfo(dtype="float32", shape=(2, 1)),)
    >>> call = LayerCall(path="m/d", layer_class="Dense", depth=1, policy="float64",
    ...                  compute_dtype="float64", variable_dtype="float64", given=f32,
    ...                  received=f32, outputs=f32)
    >>> message = next(_float64_not_kept([call], "jax")).message
    >>> message.split(": ")[1].split(", and")[0]
    'jax did not keep float64 (it holds float64 only with jax_enable_x64 set)'
    """
    narrowed = [
        call
        for call in calls
        if call.leaf
        and call.error is None
        and call.compute_dtype == "float64"
        and _below_float64(call.received)
        and _below_float64(call.outputs)
    ]
    if not narrowed:
        return
    first = narrowed[0]
    got = next(t.dtype for t in first.outputs if dtypes.is_float(t.dtype))
    others = len({c.path for c in narrowed} - {first.path})
    more = f" ({others} more layer{'s' if others != 1 else ''} alike)" if others else ""
    why = (
        "jax did not keep float64 (it holds float64 only with jax_enable_x64 set)"
        if backend == "jax"
        else "float64 was not kept on its way in"
    )
    yield Finding(
        kind="silent-downcast",
        severity="warning",
        path=first.path,
        message=(
            f"{first.layer_class} computes in float64 by its policy, yet it received "
            f"{_names(first.received)} and returned {got}{more}: {why}, and Keras said nothing "
            f"(the variables still say float64): {_precision_lost(got)}."
        ),
        details={"from": "float64", "to": got, "kept": False},
    )


def _below_float64(tensors: Iterable[TensorInfo]) -> bool:
    """Whether a float among ``tensors`` is narrower than float64."""
    return any(dtypes.narrows("float64", t.dtype) for t in tensors if dtypes.is_float(t.dtype))


def _int_into_float(calls: list[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        ints = [t.dtype for t in call.received if dtypes.is_integer(t.dtype)]
        if not ints or not call.leaf or not dtypes.is_float(call.compute_dtype):
            continue
        entry = _catalog_entry(call.layer_class) if call.builtin else None
        if entry is not None and not _computes_on_floats(entry):
            continue
        raised = call.error is not None and call.retried is not None
        if raised:
            outcome = (
                f"here it raised {_error(call)} The audit re-ran it with the input cast to "
                f"{call.compute_dtype}, and that works."
            )
        else:
            outcome = (
                f"here it returned {_names(call.outputs)}, but whether integer input is "
                "accepted, cast or rejected differs between layers and backends "
                "(check_model(..., backends=...) re-runs it on each backend)."
            )
        yield Finding(
            kind="int-into-float-layer",
            severity="error" if raised else "warning" if entry is not None else "info",
            path=call.path,
            message=(
                f"{ints[0]} data reaches {call.layer_class}, which computes in "
                f"{call.compute_dtype}; Keras autocasts only float inputs, so {outcome}"
            ),
            details={"input": ints[0], "raised": raised},
        )


def _float32_only(calls: list[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        half_in = any(t.dtype in HALF for t in call.received)
        if call.error is not None and call.retried and half_in:
            yield Finding(
                kind="float32-only-layer",
                severity="error",
                path=call.path,
                message=(
                    f"{call.layer_class} fails under the {call.policy} policy: Keras autocasts "
                    f"its input to {_names(call.received)}, and it only takes float32. "
                    f"{_error(call)} The audit re-ran it with float32 input, and that works."
                ),
                details={"received": _names(call.received)},
            )
        elif call.builtin and call.leaf and _stays_wider(call, only_half=True):
            cast = _rules_output.cast_on_purpose(call)
            if cast is not None:  # its own call casts up (ReversibleEmbedding's logits)
                yield _rules_output.kept_wide_on_purpose(call, cast)
                continue
            yield Finding(
                kind="float32-only-layer",
                severity="warning",
                path=call.path,
                message=(
                    f"{call.layer_class} computes in {call.compute_dtype} under {call.policy}, "
                    f"yet returned {_names(call.outputs)}: it silently stays in float32, and "
                    "the next layers cast back down."
                ),
            )


def _custom_dtypes(calls: list[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        if call.builtin or call.call_index:
            continue
        problems = [
            f"variable '{name}' is stored as {var.stored}, but the {call.policy} policy "
            f"stores variables in {call.variable_dtype}"
            for name, var in call.variables.items()
            if dtypes.is_float(var.stored) and var.stored != call.variable_dtype
        ]
        problems += [
            f"variable '{name}' is read as {var.read} in call(), not in the compute dtype "
            f"{call.compute_dtype}" + ("" if var.autocast else " (add_weight(autocast=False))")
            for name, var in call.variables.items()
            if var.read and dtypes.is_float(var.read) and var.read != call.compute_dtype
        ]
        if call.leaf and _stays_wider(call, only_half=False):
            problems.append(
                f"call() returns {_names(call.outputs)} from {_names(call.received)} input, "
                f"although its policy computes in {call.compute_dtype}: it casts against its policy"
            )
        if problems:
            yield Finding(
                kind="custom-variable-dtype",
                severity="warning",
                path=call.path,
                message=f"Custom layer {call.layer_class}: " + "; ".join(problems) + ".",
                details={"problems": problems},
                proof=FixProof(not_tried=CUSTOM_CODE),
            )


def _overflows(calls: list[LayerCall]) -> Iterator[Finding]:
    # inf/NaN out of a lookup is an id out of its range (jax fills NaN), not an overflow:
    # the step that rounded the ids says so (``lossy-cast``); nor is it one of the model or
    # block around that lookup, whose output merely carries it
    overflowed = [c for c in calls if _overflowed(c)]
    for call in overflowed:
        if not computes_on_values(call):
            continue
        read = _read_overflow(call)
        if read is None and any(o.path.startswith(call.path + "/") for o in overflowed):
            continue  # an inner layer is where it happened (an overflow, or a lookup's fill)
        finite_given = all(t.finite is not False for t in call.given or ())
        at_entry = finite_given and any(t.finite is False for t in call.received)
        counted = next((x for x in call.losses if at_entry and x.cause == "overflow"), read)
        step = overflow_step(call)
        if read is None and _input_conversion_overflowed(call, step):
            continue  # the keras.Input conversion made the inf: its ``lossy-cast`` says so
        yield Finding(
            kind="overflow",
            severity="error",
            path=call.path,
            message=f"{_overflow_said(call, at_entry, counted)}: "
            + (f"{counted.text()}." if counted else f"{_held(call)}.")
            + first_at(step),
            step=step,
            loss=counted,
            details={"cause": _overflow_cause(at_entry, counted)},
        )  # no fix here: the audit runs one on a copy and shows it once it works (_fixes)


def _input_conversion_overflowed(call: LayerCall, step: TraceStep | None) -> bool:
    """Whether the call's first inf came out of its own ``keras.Input`` conversion (a
    functional model's ``ops.convert_to_tensor`` of an input to the Input's dtype): a cast
    that overflowed, measured at that step and in the call's ``keras-input`` loss."""
    converted = any(x.step == "keras-input" and x.overflowed for x in call.losses)
    return (
        converted
        and step is not None
        and any(x.step == "cast" and x.overflowed for x in step.losses)
    )


def _overflow_said(call: LayerCall, at_entry: bool, counted: CastLoss | None) -> str:
    """What made the inf: the autocast on entry, a variable read in the compute dtype, or an
    op computing in it (a later op hiding it, where the output looks finite; a call that
    raised has no output to look at)."""
    hidden = bool(call.outputs) and all(t.finite is not False for t in call.outputs)
    if counted is not None and counted.step == "variable-read" and not at_entry:
        name = counted.where.removeprefix("variable ")
        read = (
            f"reading the {counted.source} variable {name} in {counted.target} overflowed "
            f"{counted.overflowed} weight{'s' if counted.overflowed != 1 else ''}"
        )
        if hidden:
            return (
                f"In {call.layer_class}, {read} (inf from finite values) and a later op hid "
                "it: the output looks finite, its gradient is not"
            )
        return f"{call.layer_class} produced inf or NaN from finite input: {read}"
    if hidden:
        return (
            f"An op of {call.layer_class} overflowed {call.compute_dtype} (inf from finite "
            "values) and a later op hid it: the output looks finite, its gradient is not"
        )
    how = (
        f"casting its finite input to {_names(call.received)} on entry"
        if at_entry
        else f"computing in {call.compute_dtype}"
    )
    return f"{call.layer_class} produced inf or NaN from finite input by {how}"


def _overflow_cause(at_entry: bool, counted: CastLoss | None) -> str:
    """The step the overflow finding names: ``autocast``, ``variable-read`` or ``compute``."""
    if at_entry:
        return "autocast"
    return "variable-read" if counted is not None else "compute"


def _read_overflow(call: LayerCall) -> CastLoss | None:
    """The first variable read of the call that overflowed (``LayerCall.losses``)."""
    return next((x for x in call.losses if x.step == "variable-read" and x.overflowed), None)


def _held(call: LayerCall) -> str:
    """``float16 holds at most 65504``: the 16-bit float the call overflowed, in its words."""
    half = next(d for d in (call.compute_dtype, *(t.dtype for t in call.outputs)) if d in HALF)
    return f"{half} holds at most {dtypes.float_limits(half)[0]:g}"


def _no_loss_scaling(calls: list[LayerCall], model: AuditedModel) -> Iterator[Finding]:
    if model.optimizer is None or model.loss_scaled:
        return
    if not any(c.compute_dtype == "float16" for c in calls):
        return
    name = model.optimizer
    yield Finding(
        kind="no-loss-scaling",
        severity="warning",
        path=model.name,
        message=(
            f"The model is compiled with {name} and computes in float16, without loss "
            "scaling: small gradients underflow to zero. compile() adds a LossScaleOptimizer "
            f"only when the model's own policy is mixed_float16 ({model.policy} here)."
        ),
        details={"optimizer": name},
    )  # no fix here: the audit runs a training step with loss scaling and shows it (_fixes)


def result_type_questions(calls: list[LayerCall]) -> list[tuple[str, ...]]:
    """The ``result_type`` arguments :func:`find` needs answered (``AuditedModel.result_types``):
    for each catalogued layer computing in its compute dtype, its float inputs and that dtype."""
    return list(dict.fromkeys(q for _, q in _rule_questions(calls)))


def _rule_questions(calls: list[LayerCall]) -> Iterator[tuple[LayerCall, tuple[str, ...]]]:
    for call in calls:
        entry = _catalog_entry(call.layer_class) if call.builtin and call.leaf else None
        if entry is None or entry.contract != "compute" or call.error is not None:
            continue
        floats = [t.dtype for t in call.received if dtypes.family(t.dtype) == "float"]
        if floats and set(floats) == {call.compute_dtype}:
            yield call, (*floats, call.compute_dtype)


def _rules_disagree(calls: list[LayerCall], model: AuditedModel) -> Iterator[Finding]:
    """A layer computing in its compute dtype (every float input autocast to it) where
    ``result_type`` of those inputs and the compute dtype names another dtype: Keras's two
    rules disagree (``result_type('float64', 'float64')`` is float32 on torch and numpy)."""
    for call, question in _rule_questions(calls):
        said = model.result_types.get(question)
        if said is None or said == call.compute_dtype:
            continue
        floats = question[:-1]
        got = _names(call.outputs)
        yield Finding(
            kind="rules-disagree",
            severity="info" if got == call.compute_dtype else "warning",
            path=call.path,
            message=(
                f"Keras's rules disagree here: the policy {call.policy} says {call.layer_class} "
                f"computes in {call.compute_dtype}, result_type({', '.join(floats)}, "
                f"{call.compute_dtype}) says {said} on {model.backend}. It returned "
                f"{got}: the policy's answer is the documented one for a layer."
            ),
            details={"policy": call.compute_dtype, "result_type": said, "output": got},
        )


# --------------------------------------------------------------------------- wrong numbers


def wrong_numbers(checked: Iterable[tuple[LayerCall, ValueFinding | None]]) -> list[Finding]:
    """A finding for each leaf call whose numbers were wrong against its reference run
    (``keras_run.layer_values_wrong``: the first output element wrapped around, saturated,
    truncated, or off beyond the dtype's error); ``None``: the numbers held. No fix here: the
    audit casts the inputs of a copy of the layer and shows the cast once the numbers hold
    (``_fixes_values``)."""
    findings = []
    for call, found in checked:
        if found is None:
            continue
        where = f"output {found.output} [{', '.join(map(str, found.element))}]"
        findings.append(
            Finding(
                kind=found.kind,
                severity="warning",
                path=call.path,
                message=(
                    f"{call.layer_class} returned {_names(call.outputs)} on "
                    f"{_names(call.received)} input, but the numbers are wrong: at {where}, "
                    f"{found.message}."
                ),
                details={
                    "output": found.output,
                    "element": list(found.element),
                    "value": found.value,
                    "expected": found.expected,
                    "reference_dtype": found.reference_dtype,
                    "call_index": call.call_index,
                },
            )
        )
    return findings


# --------------------------------------------------------------------------- across backends


def reprobe_target(call: LayerCall) -> str | None:
    """The catalog name to re-probe ``call`` as on other backends, or ``None`` if it is not
    worth it: a catalogued leaf layer given integer, bool or 64-bit input, or one that raised
    (where backends part ways)."""
    entry = _catalog_entry(call.layer_class) if call.builtin and call.leaf else None
    if entry is None or entry.skip or not _odd_input(call):
        return None
    return entry.name


def _odd_input(call: LayerCall) -> bool:
    """Integer, bool or 64-bit input, or a call that raised: where backends part ways."""
    given = call.given if call.given is not None else call.received
    odd = any(not dtypes.is_float(t.dtype) or t.dtype == "float64" for t in given)
    return odd or call.error is not None


# --------------------------------------------------------------------------- helpers


def _cast_step(call: LayerCall, source: str, target: str) -> TraceStep | None:
    """The op of the call that cast ``source`` data to ``target``."""
    return next(
        (
            s
            for s in call.trace
            if s.phase == "call"
            and s.changes_dtype
            and any(t.dtype == source for t in s.inputs)
            and any(t.dtype == target for t in s.outputs)
        ),
        None,
    )


def _casts(call: LayerCall) -> Iterator[tuple[str, str, str]]:
    """(from, to, why) for every input dtype Keras changed on the way into ``call``."""
    if call.given is not None and len(call.given) == len(call.received):
        for given, received in zip(call.given, call.received, strict=True):
            if given.dtype != received.dtype:
                why = f"its {call.policy} policy autocasts float inputs"
                yield given.dtype, received.dtype, why
    if call.entry and len(call.entry) == len(call.received):
        for received, entry in zip(call.received, call.entry, strict=True):
            if received.dtype != entry:
                yield received.dtype, entry, f"its keras.Input is {entry}"


def _computes_on_floats(entry: Any) -> bool:
    """A catalogued layer doing float math on its (float-role) input."""
    return entry.contract in ("compute", "self-managed") and entry.roles[0] == "float"


def _stays_wider(call: LayerCall, *, only_half: bool) -> bool:
    """A float-computing call returning floats wider than its compute dtype, although its
    float inputs arrived in the compute dtype (``only_half``: only for 16-bit compute)."""
    compute = call.compute_dtype
    if not dtypes.is_float(compute) or call.error is not None:
        return False
    if only_half and compute not in HALF:
        return False
    floats_in = [t.dtype for t in call.received if dtypes.is_float(t.dtype)]
    floats_out = [t.dtype for t in call.outputs if dtypes.is_float(t.dtype)]
    if not floats_out or any(d != compute for d in floats_in):
        return False
    return any(dtypes.narrows(d, compute) for d in floats_out)


def _overflowed(call: LayerCall) -> bool:
    finite_in = all(t.finite is not False for t in (call.given or call.received))
    # an op of the call that left float16's range counts even when a later op hid it
    nonfinite_out = (
        any(t.finite is False for t in call.outputs)
        or any(s.float16_overflow or s.hidden_overflow() for s in call.trace if s.phase == "call")
        or _read_overflow(call) is not None
    )
    half = call.compute_dtype in HALF or any(t.dtype in HALF for t in call.outputs)
    return finite_in and nonfinite_out and half


def _catalog_entry(name: str) -> Any:
    try:
        found = catalog.entry(name)
    except InvalidSpecError:
        return None
    return found if found.kind == "layer" else None


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    seen: dict[tuple[str, str, str], Finding] = {}  # a round trip's: per format and change
    for f in findings:
        seen.setdefault((f.kind, f.path, repr([f.details.get(k) for k in ("format", "layers")])), f)
    return list(seen.values())


def _precision_lost(target: str) -> str:
    if target == "float16":
        return "float16 keeps about 3 significant digits and overflows beyond 65504"
    if target == "bfloat16":
        return "bfloat16 keeps about 2 significant digits"
    return "digits beyond float32's ~7 significant ones are lost"


def _error(call: LayerCall) -> str:
    assert call.error is not None
    return f"{call.error.type}: {as_sentence(call.error.message)}"


def _names(infos: Iterable[Any]) -> str:
    return ", ".join(t.dtype for t in infos) or "nothing"
