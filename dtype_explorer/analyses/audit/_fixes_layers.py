"""Fixes that are proven, for the findings a wider dtype clears (issue 38 item 3). Each
finding's change is made on a copy of the model, the copy traced on the audited sample and
the audit's rules re-run on it (``rules_on``): the change is the finding's fix only where the
finding is gone there and nothing new broke; its ``FixProof`` says what the layer received
and computed in before and after, or why no change was run. The changes, by finding:

1. float64 data narrowed on the way in (``silent-downcast`` from float64): the model copied
   with every layer and float ``keras.Input`` in float64 (``keras_run.with_dtype``);
2. a layer in float32 (``silent-downcast`` into a layer under another policy,
   ``float32-only-layer``, ``precision-loss``, ``lossy-cast`` at an autocast or a variable
   read): that layer in float32 (``keras_run.float32_copy``: its own ``dtype=``, a
   ``DTypePolicyMap`` of its path, or the nearest layer ``clone_model`` visits), at most
   :data:`MAX_COPIES` copies, findings at the same layer sharing one;
3. integer data into a float layer (``int-into-float-layer``), or float32 data through a
   16-bit ``keras.Input``: that Input made again in float32 (``keras_run.with_input_dtype``).

A ``custom-variable-dtype`` finding's change is in the layer's own code, which the audit
cannot rewrite: its rule gives the reason (no fix is tried). A note (severity ``info``) gets
no copy either (:data:`NOTE`).

>>> report = check_model(model, sample)                          # doctest: +SKIP
>>> report.by_kind("float32-only-layer")[0].proof.proven         # doctest: +SKIP
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.analyses.audit import _fix_code
from dtype_explorer.errors import as_sentence
from dtype_explorer.keras_run import (
    DtypeCopies,
    declared_inputs,
    float32_copy,
    with_dtype,
    with_input_dtype,
)
from dtype_explorer.records import Finding, FixMeasure, FixProof, LayerCall

#: The findings whose fix this module runs on a copy before it is shown.
LAYER_KINDS = (
    "silent-downcast",
    "int-into-float-layer",
    "float32-only-layer",
    "precision-loss",
    "lossy-cast",
)
#: The most copies with a layer in float32 one audit runs (the combined set covers the rest).
MAX_COPIES = 4
#: Why a note shows no fix: a fact, not a fault (a few values made subnormal on the way into
#: a float16 layer), and a copy per note would cost a traced pass each.
NOTE = "it is a note, not a fault: the audit runs a fix on a copy for warnings and errors only"
#: What a fixed copy must not newly show as an error (by kind and path) to count as proven.
HARMS = ("overflow", "lossy-cast", "call-error")

#: The audit's rules on a copy, traced on the audited sample: its findings and calls.
RulesOn = Callable[[Any], tuple[list[Finding], list[LayerCall]]]
#: A change to run: ``("model", dtype)``, ``("float32", path)``, ``("input", index, dtype)``.
Plan = tuple


def plan(finding: Finding, model: Any, calls: list[LayerCall]) -> Plan | str:
    """The change that would clear ``finding`` (see the module), or why none is tried."""
    kind, details = finding.kind, finding.details
    if kind == "silent-downcast" and details.get("from") == "float64":
        return ("model", "float64")
    if kind == "silent-downcast" and finding.path == model.name:  # a 16-bit keras.Input
        return _input_plan(model, str(details.get("to")), str(details.get("from")), finding)
    if kind == "int-into-float-layer":
        wide = "float64" if _compute(calls, finding.path) == "float64" else "float32"
        return _input_plan(model, str(details.get("input")), wide, finding)
    if kind == "lossy-cast" and (finding.loss is None or finding.loss.step == "keras-input"):
        return "the keras.Input's own fix is run in its phase"  # never here (``_fixes``)
    if kind == "lossy-cast" and finding.loss.step not in ("autocast", "variable-read", "creation"):
        return (
            f"the values are lost at {finding.loss.step} in the layer's own code, which the "
            "audit cannot change on a copy"
        )
    if finding.path == model.name:
        return "it is the model's own call, not a layer the audit can put in float32 alone"
    return ("float32", finding.path)


def _input_plan(model: Any, dtype: str, wide: str, finding: Finding) -> Plan | str:
    """The model's ``keras.Input`` of ``dtype`` made again in ``wide`` (the first of them)."""
    import keras

    inputs = declared_inputs(model)
    if inputs is None:
        return "the model is subclassed: it declares no keras.Input to make again"
    flat = list(keras.tree.flatten(inputs))
    found = [i for i, t in enumerate(flat) if dtypes.describe(t) == dtype]
    if not found:
        return (
            f"the {dtype} data reaching {finding.path} does not come straight from a "
            "keras.Input, and the audit changes only an Input's dtype"
        )
    return ("input", found[0], wide)


def layer_proofs(
    findings: list[Finding],
    model: Any,
    sample: Any,
    arguments: dict,
    calls: list[LayerCall],
    rules_on: RulesOn,
    dtype_copies: DtypeCopies | None = None,
) -> dict[int, FixProof]:
    """A proof for each finding of :data:`LAYER_KINDS` (a ``keras.Input``'s lossy cast
    aside), by ``id`` of the finding: one copy per change, findings sharing a change sharing
    its copy.

    Args:
        findings: the audit's findings.
        model: the audited model (never changed).
        sample: the audited sample.
        arguments: the call's keyword arguments.
        calls: the audited layer calls.
        rules_on: the audit's rules on a copy.
        dtype_copies: ``model``'s copies in another dtype made for the audit (the model in
            float64 is then the reference's copy); ``None``: made here.

    Returns:
        ``{id(finding): FixProof}``.
    """
    groups: dict[Plan, list[Finding]] = {}
    proofs: dict[int, FixProof] = {}
    for f in findings:
        if f.kind not in LAYER_KINDS or f.proof is not None:
            continue
        if f.kind == "lossy-cast" and (f.loss is None or f.loss.step == "keras-input"):
            continue
        chosen = NOTE if f.severity == "info" else plan(f, model, calls)
        if isinstance(chosen, str):
            proofs[id(f)] = FixProof(not_tried=chosen)
        else:
            groups.setdefault(chosen, []).append(f)
    copies = 0
    for chosen, group in groups.items():
        if chosen[0] == "float32" and copies >= MAX_COPIES:
            why = (
                f"the audit ran a copy for each of the first {MAX_COPIES} layers only; the "
                "combined float32 set covers the rest"
            )
            proofs.update({id(f): FixProof(not_tried=why) for f in group})
            continue
        copies += chosen[0] == "float32"
        run = _Run(model, sample, arguments, calls, rules_on, findings, dtype_copies)
        proofs.update({id(f): p for f, p in zip(group, run.prove(chosen, group), strict=True)})
    return proofs


class _Run:
    """One change made on a copy and confirmed by the rules, for the findings it is for."""

    def __init__(self, model: Any, sample: Any, arguments: dict, calls: list, rules_on: RulesOn,
                 findings: list[Finding], copies: DtypeCopies | None = None):  # fmt: skip
        self.model, self.sample, self.arguments = model, sample, arguments
        self.calls, self.rules_on, self.findings = calls, rules_on, findings
        self.copies = copies

    def prove(self, chosen: Plan, group: list[Finding]) -> list[FixProof]:
        try:
            copy, proof = self._copy(chosen, sorted({f.path for f in group}))
        except Exception as error:  # the copy could not be made: said, never a fix
            return [FixProof(not_tried=_said(error)) for _ in group]
        if copy is None:
            return [proof for _ in group]
        try:
            again, their_calls = rerun(self.rules_on, copy, self.model)
        except Exception as error:
            tried = (*proof.tried, f"the audit's rules on the copy raised {_said(error)}")
            return [proof.model_copy(update={"tried": tried}) for _ in group]
        harms = new_harms(again, self.findings, kinds=(), severities=("error", "warning"))
        return [self._proof(proof, f, again, their_calls, harms) for f in group]

    def _copy(self, chosen: Plan, paths: list[str]) -> tuple[Any, FixProof]:
        """The copy ``chosen`` makes (``None`` where it could not reach the layer), and the
        proof so far (how, change); ``paths``: the findings' layers."""
        root = self.calls[0] if self.calls else None
        spelled = root.spelled if root is not None else type(self.model).__name__
        if chosen[0] == "model":
            copy = with_dtype(self.model, chosen[1], self.copies)
            shapes = [(tuple(t.shape[1:]), str(t.dtype)) for t in copy.inputs]
            code = _fix_code.model_dtype_code(chosen[1], shapes)
            return copy, FixProof(how="model-dtype", input_dtype=chosen[1], change=code)
        if chosen[0] == "input":
            _, index, dtype = chosen
            copy = with_input_dtype(self.model, index, dtype)
            shape = tuple(copy.inputs[index].shape[1:])
            why = f"{', '.join(paths)} receive{'s' if len(paths) == 1 else ''} {dtype} data"
            return copy, FixProof(how="input-dtype", input_index=index, input_dtype=dtype,
                                  change=_fix_code.input_code(shape, dtype, (), why))  # fmt: skip
        trial = float32_copy(self.model, [chosen[1]])
        if trial is None:
            return None, FixProof(
                not_tried="no layer at or around it can be given another dtype on a copy"
            )
        made = (trial.text(ran=False),)
        proof = FixProof(how=trial.how, layers=trial.layers, policy_map=trial.policy_map,
                         default_policy=trial.default_policy, tried=made)  # fmt: skip
        if trial.error:  # said in the copy's own words (a layer clone_model cannot copy)
            return None, proof.model_copy(
                update={"not_tried": f"the copy could not be made or run: {trial.error}"}
            )
        if not trial.ran:
            return None, proof
        classes = {c.path: c.spelled for c in self.calls}
        code = _fix_code.float32_code(trial, classes, root.layer_class if root else "", spelled)
        return trial.copy, proof.model_copy(update={"change": code})

    def _proof(self, proof: FixProof, finding: Finding, again: list[Finding], their: dict,
               harms: list[Finding]) -> FixProof:  # fmt: skip
        still = any(same(g, finding) for g in again)
        after = _at(their.get(finding.path), finding.path, still, list(their.values()))
        left = ["the finding is still there"] if still else []
        left += [f"new {g.kind} at {g.path}" for g in harms[:3]]
        narrowed = _still_narrowed(proof, after)
        if narrowed:  # the data narrowed as before: the finding's fact, out of the rule's sight
            after = after.model_copy(update={"finding": True})
        left += narrowed
        proven = not left
        ours: dict[str, LayerCall] = {}
        for call in self.calls:
            ours.setdefault(call.path, call)
        what = "the finding is gone" if proven else "; ".join(left)
        return proof.model_copy(
            update={
                "proven": proven,
                "before": _at(ours.get(finding.path), finding.path, True, self.calls),
                "after": after,
                "tried": tuple(f"{t}; {what}" for t in proof.tried) or (what,),
            }
        )


def same(found: Finding, finding: Finding) -> bool:
    """``found`` (on a copy) is ``finding`` again: the same kind at the same layer (for a
    lossy cast, at the same step and tensor)."""
    if found.kind != finding.kind or found.path != finding.path:
        return False
    if finding.loss is None or found.loss is None:
        return True
    return (found.loss.step, found.loss.where) == (finding.loss.step, finding.loss.where)


def _at(
    call: LayerCall | None, path: str, finding: bool, calls: list[LayerCall] | None = None
) -> FixMeasure:
    """What the layer at ``path`` received and computes in (``call``: its first call; for
    the model itself, the first layer of ``calls``, which its Input feeds)."""
    if call is not None and call.depth == 0:  # the model's own Input: its first layer says
        call = next((c for c in calls if c.depth == 1), None) if calls else None
    if call is None:
        return FixMeasure(finding=finding, at=path)
    path = call.path
    received = ", ".join(t.dtype for t in call.received)
    return FixMeasure(finding=finding, at=path, received=received, computes=call.compute_dtype)


def _still_narrowed(proof: FixProof, after: FixMeasure) -> list[str]:
    """What a model made again in a wider dtype (``model-dtype``) left narrowed: its first
    layer still receives a float narrower than that dtype (jax without ``jax_enable_x64``
    converts float64 data to float32 whatever the ``keras.Input`` says), so the data is
    narrowed as before and the finding only went from the rule's sight.

    >>> proof = FixProof(how="model-dtype", input_dtype="float64")
    >>> _still_narrowed(proof, FixMeasure(finding=False, at="m/d", received="float32"))
    ['m/d still receives float32: the backend did not keep float64']
    >>> _still_narrowed(proof, FixMeasure(finding=False, at="m/d", received="float64"))
    []
    """
    if proof.how != "model-dtype" or not after.received:
        return []
    wide = proof.input_dtype
    narrow = [
        d
        for d in dict.fromkeys(after.received.split(", "))
        if dtypes.is_float(d) and dtypes.narrows(wide, d)
    ]
    if not narrow:
        return []
    return [f"{after.at} still receives {', '.join(narrow)}: the backend did not keep {wide}"]


def _compute(calls: list[LayerCall], path: str) -> str:
    return next((c.compute_dtype for c in calls if c.path == path), "")


def rerun(rules_on: RulesOn, copy: Any, model: Any) -> tuple[list[Finding], dict]:
    """The audit's rules on ``copy``, its findings and first calls at the model's paths (a
    copy made from a config without a name is named afresh)."""
    found, calls = rules_on(copy)
    old, new = copy.name, model.name

    def renamed(path: str) -> str:
        return new + path[len(old) :] if path == old or path.startswith(old + "/") else path

    findings = [g.model_copy(update={"path": renamed(g.path)}) for g in found]
    first: dict[str, LayerCall] = {}
    for call in calls:
        first.setdefault(renamed(call.path), call)
    return findings, first


def new_harms(
    again: list[Finding],
    before: list[Finding],
    kinds: tuple[str, ...],
    severities: tuple[str, ...] = ("error",),
) -> list:
    """What the copy's rules find that shows the fix did not work: any finding of ``kinds``,
    and any other harm (:data:`HARMS`, or the values moved into a ``precision-loss``, of
    ``severities``: never a value made subnormal on the way to a float16 layer, a note) the
    model did not have."""
    had = {(f.kind, f.path) for f in before}
    harmful = (*HARMS, "precision-loss")
    return [
        g
        for g in again
        if g.kind in kinds
        or (g.kind in harmful and g.severity in severities and (g.kind, g.path) not in had)
    ]


def _said(error: Exception) -> str:
    said = f"{type(error).__name__}: {as_sentence(str(error))}"[:300]
    return f"the copy could not be made or run: {said}"
