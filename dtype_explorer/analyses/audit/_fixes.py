"""Fixes that are proven (issue 38 item 3): for the ``overflow`` and ``lossy-cast`` findings,
the audit makes a change in the user's terms on a copy of the model, runs the copy on the
audited sample and re-runs its own rules on it, traced (``rules_on``); the finding's
``fix`` is that change only when the finding is gone and nothing new broke, and its
``proof`` (``records.FixProof``) says what was measured before and after. Advice that was
not run, or did not clear the finding, is never a fix: the proof says why instead
(:func:`not_tried`, for the modes and engines that run no copy).

``prove``'s phases:

1. the overflows: one set of layers kept in float32 for all of them
   (``keras_run.float32_fix``: their own ``dtype=``, a ``DTypePolicyMap`` of their paths,
   the nearest layers ``clone_model`` visits; grown by the next layer that still overflows),
   measured before and after (inf/NaN, the output against the model in float32, the
   headroom at the layer);
2. each lossy ``keras.Input`` conversion of integers: that Input made again in int32 on a
   copy (``keras_run.with_input_dtype``), and the ids the index-taking layers received;
3. each copy confirmed by the audit's rules, re-run on it.

>>> report = check_model(model, sample)                       # doctest: +SKIP
>>> report.by_kind("overflow")[0].proof.proven                # doctest: +SKIP
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.analyses.audit import _fix_code
from dtype_explorer.errors import as_sentence
from dtype_explorer.keras_run import (
    declared_inputs,
    float32_fix,
    float_outputs,
    ids_received,
    overflow_measures,
    policy_clone,
    with_input_dtype,
)
from dtype_explorer.records import Finding, FixMeasure, FixProof, LayerCall

#: The findings whose fix is run on a copy before it is shown.
PROVEN_KINDS = ("overflow", "lossy-cast")
#: What a fixed copy must not newly show as an error (by kind and path) to count as proven.
_HARMS = ("overflow", "lossy-cast", "call-error")

#: Runs the audit's rules on a copy of the model, traced on the audited sample.
RulesOn = Callable[[Any], list[Finding]]


def not_tried(findings: list[Finding], why: str) -> list[Finding]:
    """``findings`` with each ``overflow`` and ``lossy-cast`` one given no fix and a proof
    saying why none was tried (``why``: "the audit runs fixes on a copy only in mode 'call'
    ...")."""
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
) -> list[Finding]:
    """``findings`` with each ``overflow`` and ``lossy-cast`` finding's fix run on a copy
    (see the module).

    Args:
        findings: the audit's findings so far.
        model: the audited model (never changed).
        sample: the audited sample.
        arguments: the call's keyword arguments.
        calls: the audited layer calls (how user code names each class).
        rules_on: the audit's rules on a copy, traced on ``sample``.

    Returns:
        The findings, those two kinds each with its proof, and a fix only where it is proven.
    """
    proofs: dict[int, FixProof] = {}
    overflows = [f for f in findings if f.kind == "overflow"]
    try:
        if overflows:
            proofs.update(_overflow_proofs(overflows, model, sample, arguments, calls, rules_on))
        for f in findings:
            if f.kind == "lossy-cast":
                proofs[id(f)] = _input_proof(f, findings, model, sample, arguments, rules_on)
    except Exception as error:  # the tool's own failure: no fix shown, and said as the tool's
        return not_tried(findings, f"the audit failed to run it ({_said(error, 'tool')})")
    return [_with(f, proofs[id(f)]) if id(f) in proofs else f for f in findings]


def _with(finding: Finding, proof: FixProof) -> Finding:
    return finding.model_copy(update={"fix": proof.change if proof.proven else "", "proof": proof})


# --------------------------------------------------------------------------- 1. overflows


def _overflow_proofs(
    overflows: list[Finding],
    model: Any,
    sample: Any,
    arguments: dict,
    calls: list[LayerCall],
    rules_on: RulesOn,
) -> dict[int, FixProof]:
    """One float32 set for every overflow, its copy run and confirmed (phases 1 and 3)."""
    starts = [f.path for f in overflows if f.path != model.name]
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
        proof = FixProof(how=last.how, layers=last.layers, tried=tried)
        return {id(f): proof for f in overflows}
    reference = _reference(model, sample, arguments)
    paths = list(dict.fromkeys(f.path for f in overflows))
    before = _measures(model, sample, paths, arguments, reference)
    after = _measures(chosen.copy, sample, paths, arguments, reference)
    try:
        again = _as_model(rules_on(chosen.copy), chosen.copy, model)
    except Exception as error:
        again = None
        tried += (f"the audit's rules on the copy raised {_said(error)}",)
    cleared = again is not None and not _new_harms(again, overflows, kinds=("overflow",))
    change = _overflow_code(chosen, calls, model)
    proofs = {}
    for f in overflows:
        still = again is None or any(g.kind == "overflow" and g.path == f.path for g in again)
        proofs[id(f)] = FixProof(
            how=chosen.how,
            change=change,
            layers=chosen.layers,
            policy_map=chosen.policy_map,
            default_policy=chosen.default_policy,
            proven=cleared,
            before=before[f.path],
            after=after[f.path].model_copy(update={"finding": still}),
            tried=tried,
        )
    return proofs


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


def _overflow_code(chosen: Any, calls: list[LayerCall], model: Any) -> str:
    root = calls[0] if calls else None
    if chosen.how == "policy-map":
        spelled = root.spelled if root is not None else type(model).__name__
        return _fix_code.policy_map_code(chosen.policy_map, chosen.default_policy, spelled)
    classes = {c.path: c.spelled for c in calls}
    return _fix_code.layer_dtype_code(
        chosen.layers, classes, root.layer_class if root else "", chosen.options
    )


def _no_copy(model: Any) -> str:
    """Why no copy of ``model`` with some layers in float32 could be made."""
    if declared_inputs(model) is None:
        return (
            "it is subclassed: clone_model copies only Sequential and Functional models, and "
            "its config takes no dtype to pass a DTypePolicyMap in"
        )
    return "no layer around the one that overflowed can be given another dtype on a copy"


def _new_harms(again: list[Finding], before: list[Finding], kinds: tuple[str, ...]) -> list:
    """What the copy's rules find that shows the fix did not work: any finding of ``kinds``,
    and any other harm (:data:`_HARMS`, an error: not a value made subnormal on the way to
    a float16 layer) the model did not have."""
    had = {(f.kind, f.path) for f in before}
    return [
        g
        for g in again
        if g.kind in kinds
        or (g.kind in _HARMS and g.severity == "error" and (g.kind, g.path) not in had)
    ]


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
    indices) or in the dtype the values came in, run and confirmed (phases 2 and 3)."""
    loss = finding.loss
    if loss is None or loss.step != "keras-input":
        step = "this step" if loss is None else loss.step
        return FixProof(
            not_tried=f"the audit proves fixes that change a keras.Input's dtype or put "
            f"overflowing layers in float32, and these values are lost at {step}, which "
            "neither changes"
        )
    readers = tuple(str(r) for r in finding.details.get("readers") or ())  # type: ignore[union-attr]
    index = int(loss.where.split()[-1])
    dtype = "int32" if readers or dtypes.is_integer(loss.source) else loss.source
    proof = FixProof(how="input-dtype", input_index=index, input_dtype=dtype)
    try:
        before = ids_received(model, sample, readers, index, arguments)
        copy = with_input_dtype(model, index, dtype)
        after = ids_received(copy, sample, readers, index, arguments)
        again = _as_model(rules_on(copy), copy, model)
    except Exception as error:  # the copy could not be made or run: said, never a fix
        return proof.model_copy(update={"not_tried": _said(error)})
    still = any(
        g.kind == "lossy-cast" and g.loss is not None and g.loss.step == loss.step
        and g.loss.where == loss.where and g.path == finding.path
        for g in again
    )  # fmt: skip
    harms = _new_harms(again, findings, kinds=())
    proven = not still and not harms and not after.raised
    tried = f"input {index} as keras.Input(dtype={dtype!r}): " + (
        "the finding is gone" if proven else _left(still, harms, after.raised)
    )
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


def _left(still: bool, harms: list[Finding], raised: str) -> str:
    said = ["the finding is still there"] if still else []
    said += [f"new {g.kind} at {g.path}" for g in harms[:3]]
    said += [f"raised {raised}"] if raised else []
    return "; ".join(said)


def _as_model(found: list[Finding], copy: Any, model: Any) -> list[Finding]:
    """The copy's findings at the model's paths (a copy made from a config without a name is
    named afresh)."""
    old, new = copy.name, model.name
    return [
        g.model_copy(update={"path": new + g.path[len(old) :]})
        if g.path == old or g.path.startswith(old + "/")
        else g
        for g in found
    ]


def _said(error: Exception, whose: str = "copy") -> str:
    """``error`` in words; ``whose``: the copy's (it could not be made or run), or the tool's."""
    said = f"{type(error).__name__}: {as_sentence(str(error))}"[:300]
    return f"the copy could not be made or run: {said}" if whose == "copy" else said
