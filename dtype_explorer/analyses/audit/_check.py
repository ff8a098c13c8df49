"""Audit a Keras model: run one real forward pass, record every layer's dtypes, find hazards.

The pass and its records are the engine's (``keras_run.ModelTracer``: every autocast, every
variable as stored and as read, every output; a layer that raises on a dtype re-run with the
fix, so that the pass goes on and the fix is known to work). The rules that turn the records
into findings live in :mod:`dtype_explorer.analyses.audit._rules` (and ``_audit_rules_across``
for predict, fit and other backends); the re-probes on other backends in ``_audit_reprobe``;
the audit on another Keras release in ``_audit_engine``.

>>> report = check_model(model)                       # doctest: +SKIP
>>> [f.kind for f in report.findings]                 # doctest: +SKIP
['float16-output']
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import time
from typing import Any

from dtype_explorer.analyses.audit import _engine as _audit_engine
from dtype_explorer.analyses.audit import _fit as _audit_fit
from dtype_explorer.analyses.audit import _fixes as _audit_fixes
from dtype_explorer.analyses.audit import _fixes_values as _audit_fixes_values
from dtype_explorer.analyses.audit import _keras2 as _audit_keras2
from dtype_explorer.analyses.audit import _predict as _audit_predict
from dtype_explorer.analyses.audit import _quantize as _audit_quantize
from dtype_explorer.analyses.audit import _reprobe as _audit_reprobe
from dtype_explorer.analyses.audit import _rules as _audit_rules
from dtype_explorer.analyses.audit import _rules_across as _audit_rules_across
from dtype_explorer.analyses.audit import _rules_facts as _audit_rules_facts
from dtype_explorer.analyses.audit import _save as _audit_save
from dtype_explorer.analyses.audit import _tf_keras as _audit_tf_keras
from dtype_explorer.analyses.audit._reference import damage_phase as _damage_phase
from dtype_explorer.analyses.audit._reference import reference_dtype as _reference_dtype
from dtype_explorer.errors import InvalidSpecError, unknown
from dtype_explorer.keras_run import (
    DtypeCopies,
    ModelTracer,
    audit_question,
    call_arguments,
    check_call_kwargs,
    compile_copy,
    compiled_by,
    configs_written,
    copy_failed,
    declared_inputs,
    describe_model,
    heap_frozen,
    is_compiled,
    is_keras2,
    layer_values_wrong,
    policy_rebuild,
    preserved_keras_state,
    quantize_request,
    rebuilt_notes,
    reference_dtype,
    sample_for,
    tensor_info,
    tensorflow_if_imported,
    training_copy,
    validate_policy,
    variables_kept,
)
from dtype_explorer.records import (
    AUDIT_MODES,
    MODES,
    AuditReport,
    Finding,
    LayerCall,
)
from dtype_explorer.runtime import engines, pool
from dtype_explorer.timing import ms

# --------------------------------------------------------------------------- entry point


def check_model(
    model: Any,
    sample: Any = None,
    *,
    policy: Any = None,
    backends: str | list[str] | None = None,
    timeout: float | None = None,
    call_kwargs: dict[str, Any] | None = None,
    mode: str = "call",
    labels: Any = None,
    engine: str | None = None,
    quantize: Any = None,
    steps: int = 1,
) -> AuditReport:
    """Run ``model`` once on ``sample`` and report where dtypes change and which changes hurt.

    Never changes the model's weights, optimizer, compile state or policy, nor Keras's floatx
    or global policy.

    ``mode`` audits the model the way it will be used: ``"call"`` its eager call
    (``Model.__call__``, inference); ``"training"`` the eager call with ``training=True`` (the
    model's variables, moving statistics and seed states put back bitwise); ``"predict"`` the
    real ``model.predict`` (compiled as Keras compiles it: on tensorflow, and on jax and torch
    under ``jit_compile``; else eager), its layers as the
    compiled function saw them (dtypes; values only at the outputs), beside the eager call;
    ``"fit"`` one real ``model.fit`` step on a copy (the model's own loss and optimizer if it is
    compiled, else SGD on a loss fitting the output), with gradient dtypes, inf/NaN gradients
    and loss scaling; ``steps=N`` runs N steps and records each (loss, loss scale, skipped
    steps, inf/NaN gradients: ``report.fit.steps``, drawn by ``report.figure()``); ``"save"`` a
    save and load of a copy in each format, compared layer by layer; ``"dataset"`` the real
    ``model.predict`` on a ``tf.data.Dataset`` of the sample
    (``from_tensor_slices(sample).batch(n)``, one batch, as users feed one on every backend),
    its layers as the compiled function saw them, beside the eager call.

    Args:
        model: a Keras model or layer.
        sample: an array, list or dict matching ``model.inputs`` (default: built from them,
            batch of 2, in their dtypes; refused past a probe's ``MAX_SAMPLE_ELEMENTS`` per
            input, then pass one).
        policy: audit a clone of the model with every layer under this dtype policy
            (Sequential and Functional models).
        backends: ``"all"`` or a list of backends on which to re-run the layers that take
            integer or odd-dtype inputs, to find divergences.
        timeout: seconds a worker may take for each of those re-runs.
        call_kwargs: keyword arguments of the model's call, as JSON values (a list becomes
            a NumPy array): ``{"training": True}`` audits the training pass (dropout, batch
            statistics) instead of inference (``training=False``).
        mode: ``"call"`` (default), ``"training"``, ``"predict"``, ``"fit"``, ``"save"`` or
            ``"dataset"``.
        labels: the targets of the ``"fit"`` step (default: zeros fitting the output and the
            loss: class indices for a sparse loss).
        engine: audit with another Keras (``dx.probe``'s ``engine``: ``"keras==3.X.Y"``,
            created first when missing): the model is rebuilt from its config (with its
            weights) in that release's worker, on this process's backend. A model whose
            config that release cannot rebuild raises. ``"tf_keras"``: rebuilt in Keras 2.
        quantize: audit a quantized copy: a mode of the installed Keras (``"int8"``,
            ``"float8"``, ``"int4"``, ``"int4/<block size>"``) or a
            ``keras.quantizers.QuantizationConfig`` (``GPTQConfig``/``AWQConfig`` carry their
            calibration data). ``report.quantization`` says per layer what ``quantize()``
            did, what it stores, its compute path and its error against the float model.
            With ``engine=``, the mode by name: the copy rebuilt there is quantized by that
            release, with its modes (one it lacks is refused in its words, naming the
            release that added it).
        steps: with ``mode="fit"``, how many training steps the copy runs (1 to
            ``records.MAX_FIT_STEPS``; default 1), each on the same batch, with a progress bar
            for a long run.

    Returns:
        An ``AuditReport``: the dtype flow layer by layer (``.to_frame()``) and the findings,
        each with a fix (``.findings``).

    >>> import keras, numpy as np
    >>> import dtype_explorer as dx
    >>> inputs = keras.Input((3,), dtype="float64")
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs))
    >>> report = dx.check_model(model)
    >>> [f.kind for f in report.findings]
    ['silent-downcast']
    >>> fit = dx.check_model(model, mode="fit").fit  # one real step on a copy
    >>> fit.loss, [(g.name, g.dtype) for g in fit.gradients]
    ('mean_squared_error', [('dense/kernel', 'float32'), ('dense/bias', 'float32')])
    >>> run = dx.check_model(model, mode="fit", steps=3).fit  # three steps on a copy
    >>> [s.step for s in run.steps], run.skipped_steps
    ([1, 2, 3], ())
    """
    import keras

    if is_keras2(model):  # a tf_keras model (the Keras 2 kernel): traced through Keras 2
        refused = {"policy": policy, "backends": backends, "engine": engine, "labels": labels}
        refused["steps"] = None if steps == 1 else steps
        return _audit_keras2.check_keras2_model(model, sample, mode, call_kwargs, quantize, refused)
    if not isinstance(model, keras.layers.Layer):
        raise InvalidSpecError(
            f"check_model needs a Keras model or layer (keras.Model, keras.layers.Layer); "
            f"got {type(model).__module__}.{type(model).__qualname__}"
        )
    started = time.perf_counter()
    # 1. Check the question: mode, labels, call kwargs, policy, backends and engine
    asked = _question(model, mode, labels, timeout, call_kwargs, policy, backends, engine)
    asked = dataclasses.replace(
        asked, steps=_audit_fit.check_steps(steps, asked.mode, asked.engine)
    )
    if asked.engine is not None:  # 2. On another Keras release: rebuilt and audited there
        options = {"call_kwargs": call_kwargs, "mode": asked.mode, "labels": labels}
        if asked.steps != 1:
            options["steps"] = asked.steps
        if quantize is not None:  # the copy is quantized there, with that release's modes
            options["quantize"] = _audit_engine.quantize_by_name(quantize, asked.engine)
        there = _audit_engine.EngineQuestion(
            model, sample, asked.policy, asked.backends, asked.timeout, asked.engine, options
        )
        return _audit_tf_keras.check_on_engine(there, audit=audit_rebuilt)
    asked = dataclasses.replace(
        asked, quantize=None if quantize is None else quantize_request(quantize)
    )
    notes = [] if model.built else [f"{describe_model(model)} was not built; the audit built it."]
    # each config written once and without importing TensorFlow; the user's heap out of the
    # collector's way (Keras collects where a quantized layer drops a variable)
    with configs_written(), tensorflow_if_imported(), preserved_keras_state(), heap_frozen():
        # 3. The eager pass, every layer call recorded (on a copy for "fit"), under policy= on
        #    the model rebuilt under it (or, where Keras cannot rebuild it, as built: said)
        target, asked = _under_policy(model, asked, notes)
        audit = _eager_pass(model, target, sample, asked, notes)
        # 4. The rules on the records: the calls, their numbers, other backends
        audit.findings += _call_findings(audit, asked)
        # 5. The mode's own run: the real model.predict, or one model.fit step on the copy
        if asked.mode in ("predict", "dataset") and audit.outputs is not None:
            _predict_phase(audit, dataset=asked.mode == "dataset")
        if asked.mode == "fit" and audit.outputs is not None:
            _fit_phase(audit, model, labels, asked.steps)
        if asked.mode == "save":
            audit.ran["roundtrip"] = _audit_save.round_trip_phase(audit, model.name)
        if asked.mode == "call":
            wide = _reference_dtype(audit.calls, audit.findings)
            if audit.outputs is not None and wide is not None:
                _damage_phase(audit, wide)
            _fix_phase(audit)  # each overflow's and lossy cast's fix run on a copy
        audit.findings = _audit_fixes.not_tried(audit.findings, _no_fix_run(asked.mode))
        if audit.quantized is not None:
            audit.ran["quantization"], found = _audit_quantize.finish(audit.quantized, audit.calls)
            audit.findings += found
        audit.timings["total_ms"] = ms(started)
        # 6. The report, with its question as data ("copy as code": AuditReport.as_code)
        asked_for = {"call_kwargs": call_kwargs, "timeout": timeout, "quantize": quantize}
        question = audit_question(
            audit.unquantized, model, audit.sample, sample_given=sample is not None, labels=labels,
            steps=asked.steps, **asked_for,
        )  # fmt: skip
    return AuditReport(
        model=model.name,
        model_class=type(model).__name__,
        backend=keras.backend.backend(),
        policy=model.dtype_policy.name,
        policy_override=asked.policy,
        sample=tuple(tensor_info(x) for x in keras.tree.flatten(audit.sample)),
        layers=tuple(audit.calls),
        findings=tuple(_audit_rules.ordered(audit.findings)),
        backends=tuple(asked.backends),
        notes=tuple(audit.notes),
        timings=audit.timings,
        mode=asked.mode,
        **audit.ran,
        keras=keras.__version__,
        question=question,
    )


@dataclasses.dataclass(frozen=True)
class _Question:
    """What ``check_model`` was asked, checked."""

    mode: str
    arguments: dict[str, Any]
    policy: str | None
    backends: list[str]
    timeout: float | None
    engine: str | None
    quantize: Any = None
    steps: int = 1


@dataclasses.dataclass
class _Audit:
    """The audit under way: what ran and what it found. ``target``: the model, or its clone
    under ``policy=``; ``audited``: the model that ran (``target``, or its training copy);
    ``policy``: the policy it is meant to run under."""

    target: Any
    audited: Any
    sample: Any
    policy: str
    tracer: ModelTracer
    outputs: Any
    calls: list[LayerCall]
    notes: list[str]
    timings: dict[str, float]
    ran: dict[str, Any]
    findings: list[Finding] = dataclasses.field(default_factory=list)
    quantized: _audit_quantize.Quantized | None = None
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The user's model (``target`` is its rebuild under ``policy=``).
    model: Any = None
    #: ``target``'s copies in another dtype, each made once for this audit (the float64
    #: reference's copy is the float64 fix's); ``None`` where the call trains (it would move
    #: a shared copy's statistics between the two).
    copies: DtypeCopies | None = None

    @property
    def unquantized(self) -> Any:
        """``target`` as it was before any quantization: the float model a quantized audit
        quantized (a script rebuilds it and quantizes it as the audit did)."""
        return self.target if self.quantized is None else self.quantized.target


def _question(
    model: Any,
    mode: Any,
    labels: Any,
    timeout: Any,
    call_kwargs: dict[str, Any] | None,
    policy: Any,
    backends: str | list[str] | None,
    engine: str | None,
) -> _Question:
    """check_model's arguments checked, in the order it documents them failing."""
    mode = _audit_mode(mode, model)
    if labels is not None and mode != "fit":
        raise InvalidSpecError(
            f"labels are the targets of a training step: pass them with mode='fit'; got "
            f"mode={mode!r}"
        )
    timeout = pool.time_limit(timeout)
    arguments = call_arguments(check_call_kwargs(call_kwargs, "check_model"))
    if "training" in arguments and mode != "call":
        raise InvalidSpecError(
            f"call_kwargs: mode={mode!r} sets training itself; pass training in call_kwargs "
            f"only with mode='call'. Received: call_kwargs={call_kwargs!r}"
        )
    return _Question(
        mode=mode,
        arguments=arguments,
        policy=None if policy is None else validate_policy(policy),
        backends=_requested_backends(backends),
        timeout=timeout,
        engine=engines.pin(engine),
    )


def _under_policy(model: Any, asked: _Question, notes: list[str]) -> tuple[Any, _Question]:
    """The model rebuilt under ``policy=`` (cloned, else made again from its config), what
    the rebuild could not change noted; where Keras cannot rebuild it, the model as built and
    the question without the policy (its report says so)."""
    if asked.policy is None:
        return model, asked
    done = policy_rebuild(model, asked.policy)
    notes += rebuilt_notes(describe_model(model), model.dtype_policy.name, asked.policy, done)
    if done.model is None:
        return model, dataclasses.replace(asked, policy=None)
    return done.model, asked


def _eager_pass(model: Any, target: Any, sample: Any, asked: _Question, notes: list[str]) -> _Audit:
    """The model (rebuilt under ``policy=`` by :func:`_under_policy`, its training copy for
    ``"fit"``) run once on ``sample``, every layer call recorded; the copy compiled as the
    model is."""
    mode = asked.mode
    inputs = declared_inputs(target)
    sample = sample_for(target, inputs, sample)
    quantized = None
    if asked.quantize is not None:  # a quantized copy is audited (the float one is the reference)
        quantized = _audit_quantize.quantize_copy(target, sample, asked.quantize, asked.arguments)
        target = quantized.copy if quantized.copy is not None else target
    # under policy=, the copy is built as the model would be under that policy
    own = asked.policy or target.dtype_policy.name
    audited = training_copy(target, sample, own) if mode == "fit" else target
    # the leaves' outputs kept for the damage phase; the pass drawn as a graph
    tracer = ModelTracer(audited, keep_leaves=mode == "call", graph=True)
    trains = mode == "training" or bool(asked.arguments.get("training"))
    with variables_kept(audited) if trains else contextlib.nullcontext():
        outputs = tracer.run(sample, inputs, asked.arguments, training=mode in ("training", "fit"))
    if mode == "fit" and outputs is None and tracer.failed_at is not None:  # the copy's fault?
        copy_failed(target, sample, asked.arguments, tracer.failed_at.error)
    calls = tracer.finish(outputs)
    if tracer.graph_error:
        notes.append(f"No model graph (a failure of dtype-explorer): {tracer.graph_error}")
    if mode == "fit":
        compile_copy(audited, model, outputs)  # the user's compile config
    return _Audit(
        target=target,
        audited=audited,
        sample=sample,
        policy=own,
        tracer=tracer,
        outputs=outputs,
        calls=calls,
        notes=notes,
        timings={"forward_ms": tracer.forward_ms},
        ran={"execution": _EXECUTION.get(mode, ""), "graph": tracer.graph},
        quantized=quantized,
        arguments=asked.arguments,
        model=model,
        copies=None if asked.arguments.get("training") else DtypeCopies(target),
    )


def _call_findings(audit: _Audit, asked: _Question) -> list[Finding]:
    """The rules on the recorded calls, the value check of the calls kept for it, and the
    re-probes on the backends asked for."""
    import keras

    findings = _audit_rules.find(
        audit.calls, model=_audited_model(audit.audited, audit.calls), policy=audit.policy
    )
    audit.notes += _audit_rules_facts.float32_on_purpose(audit.calls)  # facts, no faults
    wide = reference_dtype(keras.backend.backend())
    checked = [
        (
            call,
            event,
            layer_values_wrong(event.layer, event.values, call.outputs, call.compute_dtype, wide),
        )
        for call, event in zip(audit.calls, audit.tracer.calls)
        if event.values is not None and _audit_rules.computes_on_values(call)
    ]
    findings += _audit_fixes_values.proven(checked, wide)  # each cast run on a layer copy
    if asked.backends:
        layers = {path: layer for layer, path, _ in audit.tracer.layers.values()}
        findings += _audit_reprobe.divergences(
            audit.calls,
            layers,
            asked.backends,
            here=keras.backend.backend(),
            timeout=asked.timeout,
        )
    return findings


def _audited_model(model: Any, calls: list[LayerCall]) -> _audit_rules.AuditedModel:
    """What the rules need to know of ``model``, Keras's ``result_type`` answers included."""
    import keras

    optimizer = getattr(model, "optimizer", None)
    questions = _audit_rules.result_type_questions(calls)
    return _audit_rules.AuditedModel(
        name=model.name,
        policy=model.dtype_policy.name,
        backend=keras.backend.backend(),
        optimizer=None if optimizer is None else type(optimizer).__name__,
        loss_scaled=isinstance(optimizer, keras.optimizers.LossScaleOptimizer),
        result_types={q: keras.backend.result_type(*q) for q in questions},
    )


def _fix_phase(audit: _Audit) -> None:
    """The findings' fixes run on copies of the model, each copy audited again by the rules,
    traced (``_fixes``); the combined float32 set kept on the report."""
    if not any(f.kind in _audit_fixes.PROVEN_KINDS for f in audit.findings):
        return
    t0 = time.perf_counter()

    def rules_on(copy: Any) -> tuple[list[Finding], list[LayerCall]]:
        tracer = ModelTracer(copy)
        calls = tracer.finish(tracer.run(audit.sample, declared_inputs(copy), audit.arguments))
        model = _audited_model(copy, calls)
        return _audit_rules.find(calls, model=model, policy=audit.policy), calls

    audit.findings, audit.ran["float32_set"] = _audit_fixes.prove(
        audit.findings,
        audit.target,
        audit.sample,
        audit.arguments,
        audit.calls,
        rules_on,
        audit.ran.get("damage", ()),
        audit.copies,
    )
    audit.timings["fixes_ms"] = ms(t0)


def _no_fix_run(mode: str) -> str:
    """Why an audit in ``mode`` ran no fix."""
    return (
        f"the audit runs fixes on a copy in mode 'call' only, not in mode {mode!r}: "
        "check_model(model, sample) runs them"
    )


def _predict_phase(audit: _Audit, dataset: bool = False) -> None:
    """The real ``model.predict`` (``dataset``: on a ``tf.data.Dataset`` of the sample), its
    layers as the compiled function saw them: the rules on those records (a layer that raised
    only here is the mode divergence), and the divergences from the eager call."""
    t0 = time.perf_counter()
    predict, predicted = _audit_predict.keras3_predicted(
        audit.target, audit.sample, audit.calls, audit.outputs, dataset=dataset
    )
    audit.timings["predict_ms"] = ms(t0)
    model = _audited_model(audit.target, predicted)
    audit.findings += [
        f
        for f in _audit_rules.find(predicted, model=model, policy=audit.policy)
        if f.kind != "call-error"
    ]
    audit.findings += _audit_rules_across.mode_divergences(predict)
    audit.ran.update(predict=predict, compiled=predict.compiled, execution=predict.execution)
    audit.calls = predicted


def _fit_phase(audit: _Audit, model: Any, labels: Any, steps: int) -> None:
    """``steps`` real ``model.fit`` steps of the compiled copy: its gradients' findings, or the
    finding that it raised."""
    t0 = time.perf_counter()
    fit, failed = _audit_fit.fit_step(audit.audited, audit.sample, audit.outputs, labels, steps)
    audit.timings["fit_ms"] = ms(t0)
    compiled, how = compiled_by(audit.audited)
    said = "one training step" if steps == 1 else f"{steps} training steps"
    audit.ran.update(fit=fit, compiled=compiled, execution=f"model.fit: {said}, {how}")
    if failed is not None:
        audit.findings.append(failed)
    elif fit is not None:
        audit.findings += _audit_rules_across.gradient_findings(fit, audit.audited.name)
        audit.findings += _audit_rules_across.unscaled_loss_findings(fit, audit.audited.name)
        audit.findings += _audit_rules_across.later_step_findings(fit, audit.audited.name)
        audit.findings += _audit_fit.frozen_proven(
            fit, audit.audited, audit.sample, audit.outputs, labels, audit.calls
        )
    audit.notes.append(
        f"The training {'step' if steps == 1 else 'steps'} ran on a copy of the model (weights "
        "copied, "
        + (
            "compiled from the model's compile config, with a fresh optimizer"
            if is_compiled(model)
            else "compiled with SGD and a loss fitting its output: the model is not compiled"
        )
        + "); the model itself was not trained."
    )


@pool.trusted_entry  # pool.call runs it in a cache-keeping worker
def audit_rebuilt(
    config: dict[str, Any],
    weights: list[Any],
    sample: Any,
    policy: str | None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any] | str:
    """In an engine's worker: rebuild the model from its config and weights with this
    release's Keras, and audit it; the report as a dict, or why it could not be rebuilt."""
    rebuilt = _audit_engine.rebuild(config, weights)
    if isinstance(rebuilt, str):
        return rebuilt
    model, note = rebuilt
    report = check_model(model, sample, policy=policy, **(options or {}))
    if note is not None:
        report = report.model_copy(update={"notes": (*report.notes, note)})
    return report.to_dict()


# --------------------------------------------------------------------------- modes


_EXECUTION = {
    "call": "",
    "training": "the eager call with training=True",
    "save": "save and load of a copy, compared layer by layer",
}


#: The modes only a ``keras.Model`` has (its ``predict``, ``fit``, ``save``).
_MODEL_ONLY = ("predict", "fit", "save", "dataset")


def _audit_mode(mode: Any, model: Any) -> str:
    """``mode`` if an audit of ``model`` can run that way, else ``InvalidSpecError`` saying why
    and listing the modes that apply."""
    import keras

    is_model = isinstance(model, keras.Model)
    numpy = keras.backend.backend() == "numpy"

    def applies(m: str) -> bool:  # TensorFlow looked for only where "dataset" is asked about
        return (
            (is_model or m not in _MODEL_ONLY)
            and (not numpy or m != "fit")
            and (m != "dataset" or importlib.util.find_spec("tensorflow") is not None)
        )

    if not isinstance(mode, str) or (mode not in MODES and mode not in AUDIT_MODES):
        raise unknown("mode", mode, AUDIT_MODES)
    if mode in AUDIT_MODES and applies(mode):
        return mode
    usable = [m for m in AUDIT_MODES if applies(m)]
    if mode == "model":
        why = "an audit's 'call' already runs the model through Model.__call__"
    elif mode == "dataset" and not is_model:
        why = (
            f"{describe_model(model)} is a layer, not a keras.Model: it has no predict() to "
            "feed a tf.data.Dataset to; probe a layer mapped over tf.data with "
            "dx.probe(layer, mode='dataset')"
        )
    elif mode in _MODEL_ONLY and not is_model:
        why = (
            f"{describe_model(model)} is a layer, not a keras.Model: it has no {mode}(); "
            "wrap it in a keras.Model to audit it that way"
        )
    elif mode == "dataset":
        why = "a tf.data.Dataset needs TensorFlow, which is not installed here"
    else:
        why = "the numpy backend cannot train (model.fit is not implemented there)"
    raise InvalidSpecError(
        f"mode {mode!r} cannot audit {describe_model(model)}: {why}; modes that apply: "
        f"{', '.join(usable)}"
    )


def _requested_backends(backends: str | list[str] | None) -> list[str]:
    """The backends to re-probe on, checked by ``backends.names`` (through ``pool.usable``):
    ``"all"``, one name, a list, or the magic's comma-separated text (``--backends jax,torch``)."""
    if backends is None:
        return []
    return pool.usable(backends)
