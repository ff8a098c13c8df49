"""Fixes that are proven (issue 38 item 3): for each finding whose fix is a change of dtypes
or of the optimizer, the audit makes that change in the user's terms on a copy of the model,
runs the copy on the audited sample and re-runs its own rules on it, traced (``rules_on``);
the finding's ``fix`` is that change only when the finding is gone and nothing new broke,
and its ``proof`` (``records.FixProof``) says what was measured before and after. Advice that
was not run, or did not clear the finding, is never a fix: the proof says why instead
(:func:`not_tried`, for the modes and engines that run no copy).

``prove``'s phases:

1. the overflows: one set of layers kept in float32 for all of them, chosen from the
   measured ranges (``_fix_choice``: each 16-bit layer whose float32 output or input is
   beyond its dtype's range, and the layers that overflowed), run on a copy
   (``keras_run.float32_fix``: their own ``dtype=``, a ``DTypePolicyMap`` of their paths,
   the nearest layers ``clone_model`` visits; grown only by a layer still overflowing),
   measured before and after (inf/NaN, the output against the model in float32, the
   headroom at the layer);
2. each lossy ``keras.Input`` conversion of integers: that Input made again in int32 on a
   copy (``keras_run.with_input_dtype``), and the ids the index-taking layers received;
3. the findings a wider dtype clears (``_fixes_layers``: the model in float64, a layer in
   float32, an Input in float32) and the loss scale (``_fixes_training``: one training step);
4. the combined float32 set: every layer phases 1 and 3 proven in float32, run at once on
   one copy (where they are more than one proof's), the findings it covers re-checked;
5. each copy confirmed by the audit's rules, re-run on it.

>>> report = check_model(model, sample)                       # doctest: +SKIP
>>> report.by_kind("overflow")[0].proof.proven                # doctest: +SKIP
True
"""

from __future__ import annotations

from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.analyses.audit import _fix_code
from dtype_explorer.analyses.audit._fix_choice import float32_candidates
from dtype_explorer.analyses.audit._fixes_layers import (
    RulesOn,
    layer_proofs,
    new_harms,
    rerun,
    same,
)
from dtype_explorer.analyses.audit._fixes_training import loss_scale_proof
from dtype_explorer.errors import as_sentence
from dtype_explorer.keras_run import (
    DtypeCopies,
    declared_inputs,
    float32_copy,
    float32_fix,
    float_outputs,
    ids_received,
    overflow_measures,
    policy_clone,
    with_input_dtype,
)
from dtype_explorer.records import Finding, FixMeasure, FixProof, LayerCall, LayerDamage

#: The findings whose fix is run on a copy before it is shown.
PROVEN_KINDS = (
    "overflow",
    "lossy-cast",
    "silent-downcast",
    "int-into-float-layer",
    "float32-only-layer",
    "precision-loss",
    "no-loss-scaling",
)
#: The ways a proof keeps layers in float32 (what the combined set joins).
_FLOAT32_WAYS = ("layer-dtype", "policy-map")


def not_tried(findings: list[Finding], why: str) -> list[Finding]:
    """``findings`` with each one of :data:`PROVEN_KINDS` given no fix and a proof saying
    why none was tried (``why``: "the audit runs fixes on a copy only in mode 'call' ...")."""
    return [
        _with(f, FixProof(not_tried=why)) if f.kind in PROVEN_KINDS and f.proof is None else f
        for f in findings
    ]


def prove(
    findings: list[Finding],
    model: Any,
    sample: Any,
    arguments: dict,
    calls: list[LayerCall],
    rules_on: RulesOn,
    damage: tuple[LayerDamage, ...] = (),
    copies: DtypeCopies | None = None,
) -> tuple[list[Finding], FixProof | None]:
    """``findings`` with each one of :data:`PROVEN_KINDS` given its proof, and the combined
    float32 set (see the module).

    Args:
        findings: the audit's findings so far.
        model: the audited model (never changed).
        sample: the audited sample.
        arguments: the call's keyword arguments.
        calls: the audited layer calls (how user code names each class).
        rules_on: the audit's rules on a copy, traced on ``sample``: its findings and calls.
        damage: the per-layer reference (the measured ranges the float32 set is chosen from).
        copies: ``model``'s copies in another dtype made for the audit (the reference's
            float64 copy is the float64 fix's); ``None``: each fix makes its own.

    Returns:
        The findings, each of those kinds with its proof and a fix only where it is proven;
        the combined float32 set's proof (``None``: no layer was proven in float32).
    """
    proofs: dict[int, FixProof] = {}
    overflows = [f for f in findings if f.kind == "overflow"]
    run = (model, sample, arguments)
    try:
        if overflows:
            proofs.update(_overflow_proofs(overflows, run, calls, rules_on, damage))
        for f in findings:
            if f.kind == "lossy-cast" and f.loss is not None and f.loss.step == "keras-input":
                proofs[id(f)] = _input_proof(f, findings, model, sample, arguments, rules_on)
        proofs.update(layer_proofs(findings, model, sample, arguments, calls, rules_on, copies))
        scaled = [f for f in findings if f.kind == "no-loss-scaling" and f.proof is None]
        if scaled:
            proofs[id(scaled[0])] = loss_scale_proof(model, sample, arguments)
        combined = _combined(findings, proofs, run, calls, rules_on)
    except Exception as error:  # the tool's own failure: no fix shown, and said as the tool's
        return not_tried(findings, f"the audit failed to run it ({_said(error, 'tool')})"), None
    return [_with(f, proofs[id(f)]) if id(f) in proofs else f for f in findings], combined


def _with(finding: Finding, proof: FixProof) -> Finding:
    return finding.model_copy(update={"fix": proof.change if proof.proven else "", "proof": proof})


# --------------------------------------------------------------------------- 1. overflows


def _overflow_proofs(
    overflows: list[Finding],
    run: tuple[Any, Any, dict],
    calls: list[LayerCall],
    rules_on: RulesOn,
    damage: tuple[LayerDamage, ...],
) -> dict[int, FixProof]:
    """One float32 set for every overflow, chosen from the measured ranges, its copy run and
    confirmed (phases 1 and 5)."""
    model, sample, arguments = run
    chosen_by = {
        p: why for p, why in float32_candidates(damage, calls, overflows).items() if p != model.name
    }
    starts = list(chosen_by)
    covers = tuple(f"overflow at {f.path}" for f in overflows)
    if not starts:
        why = (
            "the overflow is in the model's own call(), not in a layer the audit can put in "
            "float32 on its own"
        )
        return {id(f): FixProof(not_tried=why) for f in overflows}
    try:
        fix = float32_fix(model, sample, starts, arguments)
    except Exception as error:  # the tool's own failure to copy: said, never a fix
        return {id(f): FixProof(not_tried=_said(error)) for f in overflows}
    tried = tuple(t.text() for t in fix.trials)
    chosen = fix.chosen
    if not fix.trials:
        why = _no_copy(model)
        return {id(f): FixProof(not_tried=why) for f in overflows}
    if chosen is None:
        last = fix.trials[-1]
        proof = FixProof(how=last.how, layers=last.layers, tried=tried, chosen_by=chosen_by,
                         covers=covers)  # fmt: skip
        return {id(f): proof for f in overflows}
    reference = _reference(model, sample, arguments)
    paths = list(dict.fromkeys(f.path for f in overflows))
    before = _measures(model, sample, paths, arguments, reference)
    after = _measures(chosen.copy, sample, paths, arguments, reference)
    try:
        again = rerun(rules_on, chosen.copy, model)[0]
    except Exception as error:
        again = None
        tried += (f"the audit's rules on the copy raised {_said(error)}",)
    cleared = again is not None and not new_harms(again, overflows, kinds=("overflow",))
    change = _float32_code(chosen, calls, model)
    why = {**chosen_by, **_why_added(chosen.layers, chosen_by)}
    proofs = {}
    for f in overflows:
        still = again is None or any(g.kind == "overflow" and g.path == f.path for g in again)
        proofs[id(f)] = FixProof(
            how=chosen.how,
            change=change,
            layers=chosen.layers,
            policy_map=chosen.policy_map,
            default_policy=chosen.default_policy,
            chosen_by=why,
            covers=covers,
            proven=cleared,
            before=before[f.path],
            after=after[f.path].model_copy(update={"finding": still}),
            tried=tried,
        )
    return proofs


def _why_added(layers: tuple[str, ...], chosen_by: dict[str, str]) -> dict[str, str]:
    """Why each layer of the set run that the ranges did not choose is in it: it holds
    chosen layers a copy could not reach alone, or it still overflowed without it."""
    found = {}
    for path in layers:
        if path in chosen_by:
            continue
        inside = [p for p in chosen_by if p.startswith(path + "/")]
        found[path] = (
            f"it holds {', '.join(inside)}, which a copy could not put in float32 alone"
            if inside
            else "it still overflowed on a copy without it"
        )
    return found


def _combined(
    findings: list[Finding],
    proofs: dict[int, FixProof],
    run: tuple[Any, Any, dict],
    calls: list[LayerCall],
    rules_on: RulesOn,
) -> FixProof | None:
    """One "keep these layers in float32" set for every finding proven with layers in
    float32 (phase 4): the proof itself where one proof holds them all; else every such
    layer in float32 on one copy, the findings re-checked there, measured before and after
    (how many of them are there, inf/NaN, the output against the model in float32)."""
    model, sample, arguments = run
    kept = [
        (f, proofs[id(f)])
        for f in findings
        if id(f) in proofs and proofs[id(f)].proven and proofs[id(f)].how in _FLOAT32_WAYS
    ]
    covers = tuple(dict.fromkeys(f"{f.kind} at {f.path}" for f, _ in kept))
    layers = list(dict.fromkeys(p for _, proof in kept for p in proof.layers))
    if len(layers) < 2 and len({p.layers for _, p in kept}) < 2:
        return None  # one layer: each finding's own proof says it all
    chosen_by: dict[str, str] = {}
    for f, proof in kept:
        for path, why in (
            proof.chosen_by or dict.fromkeys(proof.layers, f"the {f.kind} at {f.path}")
        ).items():
            chosen_by[path] = f"{chosen_by[path]}; {why}" if path in chosen_by else why
    if len({p.layers for _, p in kept}) == 1:
        return kept[0][1].model_copy(update={"covers": covers, "chosen_by": chosen_by})
    trial = float32_copy(model, layers)
    base = FixProof(layers=tuple(layers), chosen_by=chosen_by, covers=covers)
    if trial is None or not trial.ran or trial.error:
        return base.model_copy(update={"tried": (trial.text(ran=False),) if trial else ()})
    again = rerun(rules_on, trial.copy, model)[0]
    left = [f for f, _ in kept if any(same(g, f) for g in again)]
    harms = new_harms(again, findings, kinds=())
    reference = _reference(model, sample, arguments)
    before = _measures(model, sample, [model.name], arguments, reference)[model.name]
    after = _measures(trial.copy, sample, [model.name], arguments, reference)[model.name]
    proven = not left and not harms
    return base.model_copy(
        update={
            "how": trial.how,
            "layers": trial.layers,
            "policy_map": trial.policy_map,
            "default_policy": trial.default_policy,
            "change": _float32_code(trial, calls, model),
            "proven": proven,
            "before": before.model_copy(update={"findings": len(kept)}),
            "after": after.model_copy(update={"findings": len(left), "finding": bool(left)}),
            "tried": (
                trial.text(ran=False)
                + ("" if proven else f"; {len(left)} findings left, {len(harms)} new harms"),
            ),
        }
    )


def _measures(model: Any, sample: Any, paths: list[str], arguments: dict, reference: Any) -> dict:
    """``keras_run.overflow_measures``, or, where the run raised, what it raised."""
    try:
        return overflow_measures(model, sample, paths, arguments, reference)
    except Exception as error:  # the model itself stops (a call-error found): said
        said = f"{type(error).__name__}: {as_sentence(str(error))}"[:200]
        return {p: FixMeasure(finding=True, at=p, error=said) for p in paths}


def _reference(model: Any, sample: Any, arguments: dict) -> Any:
    """The model in float32's float outputs (``None``: it cannot be rebuilt so)."""
    try:
        return float_outputs(policy_clone(model, "float32"), sample, arguments)
    except Exception:  # no float32 copy: the error is not measured, the rest is
        return None


def _float32_code(chosen: Any, calls: list[LayerCall], model: Any) -> str:
    root = calls[0] if calls else None
    spelled = root.spelled if root is not None else type(model).__name__
    classes = {c.path: c.spelled for c in calls}
    return _fix_code.float32_code(chosen, classes, root.layer_class if root else "", spelled)


def _no_copy(model: Any) -> str:
    """Why no copy of ``model`` with some layers in float32 could be made."""
    if declared_inputs(model) is None:
        return (
            "it is subclassed: clone_model copies only Sequential and Functional models, and "
            "its config takes no dtype to pass a DTypePolicyMap in"
        )
    return "no layer around the one that overflowed can be given another dtype on a copy"


# --------------------------------------------------------------------------- 2. inputs


def _input_proof(
    finding: Finding,
    findings: list[Finding],
    model: Any,
    sample: Any,
    arguments: dict,
    rules_on: RulesOn,
) -> FixProof:
    """A lossy ``keras.Input`` conversion: that Input made again in int32 (ids read as
    indices; the dtype the ids came in where the Input is int32 already) or in the dtype the
    values came in, run and confirmed (phases 2 and 3)."""
    loss = finding.loss
    if loss is None or loss.step != "keras-input":  # a layer's step: ``_fixes_layers``
        step = "this step" if loss is None else loss.step
        return FixProof(not_tried=f"the values are lost at {step}, not at a keras.Input")
    readers = tuple(str(r) for r in finding.details.get("readers") or ())  # type: ignore[union-attr]
    index = int(loss.where.split()[-1])
    dtype = "int32" if readers or dtypes.is_integer(loss.source) else loss.source
    if dtype == loss.target:  # int64 ids wrapped in an int32 Input: keep them as they came
        dtype = loss.source
    proof = FixProof(how="input-dtype", input_index=index, input_dtype=dtype)
    try:
        before = ids_received(model, sample, readers, index, arguments)
        copy = with_input_dtype(model, index, dtype)
        after = ids_received(copy, sample, readers, index, arguments)
        again = rerun(rules_on, copy, model)[0]
    except Exception as error:  # the copy could not be made or run: said, never a fix
        return proof.model_copy(update={"not_tried": _said(error)})
    still = any(
        g.kind == "lossy-cast" and g.loss is not None and g.loss.step == loss.step
        and g.loss.where == loss.where and g.path == finding.path
        for g in again
    )  # fmt: skip
    left = _left(still, new_harms(again, findings, kinds=()), after, readers)
    proven = not left
    tried = f"input {index} as keras.Input(dtype={dtype!r}): " + (left or "the finding is gone")
    shape = tuple(copy.inputs[index].shape[1:])
    return proof.model_copy(
        update={
            "change": _fix_code.input_code(shape, dtype, readers),
            "layers": readers,
            "proven": proven,
            "before": before,
            "after": after.model_copy(update={"finding": still}),
            "tried": (tried,),
        }
    )


def _left(still: bool, harms: list[Finding], after: FixMeasure, readers: tuple[str, ...]) -> str:
    """What the input fix left wrong (``""``: nothing, the fix is proven): the finding, a new
    harm, a reader that raised, or ids still changed on their way (jax without x64 makes
    int64 ids int32 whatever the Input says)."""
    said = ["the finding is still there"] if still else []
    said += [f"new {g.kind} at {g.path}" for g in harms[:3]]
    said += [f"raised {after.raised}"] if after.raised else []
    if after.ids_changed:
        said.append(
            f"{after.ids_changed} of {after.ids} ids still changed on the way to "
            + ", ".join(readers)
        )
    return "; ".join(said)


def _said(error: Exception, whose: str = "copy") -> str:
    """``error`` in words; ``whose``: the copy's (it could not be made or run), or the tool's."""
    said = f"{type(error).__name__}: {as_sentence(str(error))}"[:300]
    return f"the copy could not be made or run: {said}" if whose == "copy" else said
