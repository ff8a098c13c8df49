"""A fix that is proven, for a model computing in float16 and compiled without loss scaling
(``no-loss-scaling``, issue 38 item 3): one real ``model.fit`` step on copies of the model,
as compiled and with its optimizer wrapped in a ``keras.optimizers.LossScaleOptimizer``, each
against the same step of the model in float32 (``keras_run.loss_scale_measures``). The
LossScaleOptimizer is the finding's fix only where, on the audited sample, gradient values
underflowed to zero without it (non-zero in float32) and fewer did with it, none inf/NaN;
where none underflowed there is nothing it was seen to recover, and no fix is shown: the
proof says what was measured. The targets are zeros fitting the model's outputs (class
indices for a sparse loss), as ``mode="fit"`` uses when given no labels.

>>> report = check_model(model, sample)                       # doctest: +SKIP
>>> report.by_kind("no-loss-scaling")[0].proof.after.underflowed  # doctest: +SKIP
0
"""

from __future__ import annotations

from typing import Any

from dtype_explorer.analyses.audit import _fix_code
from dtype_explorer.errors import as_sentence
from dtype_explorer.keras_run import loss_scale_measures
from dtype_explorer.records import FixProof


def loss_scale_proof(model: Any, sample: Any, arguments: dict) -> FixProof:
    """The ``no-loss-scaling`` finding's fix run in one training step (see the module).

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
        before, after = loss_scale_measures(model, sample, None, arguments)
    except Exception as error:  # a model whose copy cannot train: said, never a fix
        said = f"{type(error).__name__}: {as_sentence(str(error))}"[:300]
        return FixProof(not_tried=f"one training step of its copies could not run: {said}")
    lost, left = before.underflowed or 0, after.underflowed or 0
    proven = lost > 0 and left < lost and not after.nonfinite_gradients
    if proven:
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
    optimizer = _optimizer(model)
    return FixProof(
        how="loss-scale",
        change=_fix_code.loss_scale_code(optimizer, lost - left) if proven else "",
        proven=proven,
        before=before,
        after=after.model_copy(update={"finding": not proven}),
        tried=(tried,),
    )


def _optimizer(model: Any) -> str:
    """The class name of ``model``'s optimizer."""
    return type(getattr(model, "optimizer", None)).__name__
