"""A fix that is proven, for a model computing in float16 and compiled without loss scaling
(``no-loss-scaling``, issue 38 item 3): one real ``model.fit`` step on a copy of the model as
compiled, and the first step a copy with its optimizer wrapped in a
``keras.optimizers.LossScaleOptimizer`` applies, each against the same step of the model in
float32 (``keras_run.loss_scale_measures``). The steps the LossScaleOptimizer skips before it
(inf/NaN in its scaled gradients, its scale halved) are its design, not a failure: the proof
says how many. The LossScaleOptimizer is the finding's fix only where, on the audited sample,
gradient values underflowed to zero without it (non-zero in float32) and fewer did in its
applied step, none inf/NaN; where none underflowed there is nothing it was seen to recover,
and where it applied no step at all (inf/NaN down to a scale below 1) it is no fix: the proof
says what was measured. The targets are zeros fitting the model's outputs (class
indices for a sparse loss), as ``mode="fit"`` uses when given no labels.

>>> report = check_model(model, sample)                       # doctest: +SKIP
>>> report.by_kind("no-loss-scaling")[0].proof.after.underflowed  # doctest: +SKIP
0
"""

from __future__ import annotations

from typing import Any

from dtype_explorer.analyses.audit import _fix_code
from dtype_explorer.errors import as_sentence
from dtype_explorer.keras_run import loss_scale_measures, trained_in_float32
from dtype_explorer.records import Finding, FixMeasure, FixProof, LayerCall


def loss_scale_proof(model: Any, sample: Any, arguments: dict) -> FixProof:
    """The ``no-loss-scaling`` finding's fix run in training steps (see the module).

    Args:
        model: the audited, compiled model (never changed: copies train).
        sample: the audited sample.
        arguments: the call's keyword arguments.

    Returns:
        Its proof: ``proven`` with the code where the step recovered underflowed gradients.
    """
    import keras

    if keras.backend.backend() == "numpy":
        return FixProof(not_tried="the numpy backend cannot train (model.fit is not there)")
    try:
        before, after, settling = loss_scale_measures(model, sample, None, arguments)
    except Exception as error:  # a model whose copy cannot train: said, never a fix
        said = f"{type(error).__name__}: {as_sentence(str(error))}"[:300]
        return FixProof(not_tried=f"one training step of its copies could not run: {said}")
    lost, left = before.underflowed or 0, after.underflowed or 0
    proven = settling.applied and lost > 0 and left < lost and not after.nonfinite_gradients
    if not settling.applied:
        tried = (
            f"the LossScaleOptimizer skipped all {settling.skipped + 1} steps: its scaled "
            f"gradients held inf/NaN down to scale {settling.scale:g} (they overflow float16 "
            "even unscaled), so it applied none"
        )
    elif proven:
        tried = "the underflowed gradients came back"
    elif not lost:
        tried = (
            "no gradient value underflowed to zero without it on this sample (targets: "
            "zeros), so there was nothing for it to recover"
        )
    else:
        tried = f"{left} of {lost} underflowed gradient values still zero" + (
            f", {after.nonfinite_gradients} inf/NaN" if after.nonfinite_gradients else ""
        )
    if settling.applied and settling.skipped:
        tried = (
            f"the LossScaleOptimizer skipped {settling.skipped} step(s) with inf/NaN scaled "
            f"gradients and halved its scale to {settling.scale:g}, as it is designed to; "
            f"in the first step it applied, {tried}"
        )
    optimizer = _optimizer(model)
    return FixProof(
        how="loss-scale",
        change=_fix_code.loss_scale_code(optimizer, lost - left) if proven else "",
        proven=proven,
        before=before,
        after=after.model_copy(update={"finding": not proven}),
        tried=(tried,),
    )


def update_lost_proof(
    finding: Finding, model: Any, sample: Any, labels: Any, steps: int, calls: list[LayerCall]
) -> Finding:
    """The ``update-lost`` finding with its fix run (``keras_run.trained_in_float32``): the
    layers holding the variables the run left unchanged in float32 on a copy, trained the same
    steps on the same batch. Proven where every one of those variables then moved and no
    gradient held inf/NaN; the finding as it was where no copy could train.

    Args:
        finding: the ``update-lost`` finding (``details["variables"]``: the names).
        model: the audit's compiled copy (never trained here).
        sample: the audited batch.
        labels: the targets the audit's run trained on.
        steps: how many steps it ran.
        calls: the audit's layer calls (how user code names each layer's class).

    Returns:
        The finding, with its fix and proof.
    """
    names = list(finding.details.get("variables", ()))
    values = int(finding.details.get("values", 0))
    done = trained_in_float32(model, sample, labels, steps, names)
    trial, run = done.trial, done.run
    before = FixMeasure(finding=True, at=finding.path, frozen_values=values, of_values=values)
    if trial is None:
        why = "no copy with the layers holding them in float32 could be made"
        return finding.model_copy(update={"proof": FixProof(not_tried=why)})
    what = trial.text(ran=False)
    if run is None:
        tried = f"{what}: {as_sentence(done.error)}" if done.error else what
        proof = FixProof(how=trial.how, layers=trial.layers, before=before, tried=(tried,))
        return finding.model_copy(update={"proof": proof})
    sizes = dict(zip(names, finding.details.get("sizes", ()), strict=False))
    still = list(done.still)
    left = sum(sizes.get(n, 0) for n in still)
    bad = sum(g.nonfinite or 0 for g in run.gradients)
    proven = bool(run.applied) and not still and not bad and run.first_nonfinite() is None
    after = FixMeasure(
        finding=not proven,
        at=finding.path,
        frozen_values=left,
        of_values=values,
        nonfinite_gradients=bad or None,
    )
    root = calls[0] if calls else None
    change = _fix_code.float32_code(
        trial,
        {c.path: c.spelled for c in calls},
        root.layer_class if root else "",
        root.spelled if root else type(model).__name__,
    )
    proof = FixProof(
        how=trial.how,
        layers=trial.layers,
        policy_map=trial.policy_map,
        default_policy=trial.default_policy,
        change=change if proven else "",
        proven=proven,
        before=before,
        after=after,
        tried=(f"{what}: {left} of {values} values still unchanged after {steps} step(s)",),
    )
    return finding.model_copy(update={"proof": proof, "fix": change if proven else ""})


def _optimizer(model: Any) -> str:
    """The class name of ``model``'s optimizer."""
    return type(getattr(model, "optimizer", None)).__name__
