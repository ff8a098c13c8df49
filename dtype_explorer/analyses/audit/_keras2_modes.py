"""The Keras 2 audit's modes ``predict`` and ``fit`` (:func:`._audit_keras2.check_keras2_model`):
Keras 2's real ``model.predict`` (a ``tf.function``), its layers as that function traced them
compared with the eager call's (the same :class:`~dtype_explorer.records.PredictReport` and
``mode-divergence`` findings as Keras 3), and one real ``train_on_batch`` step of a copy of the
model (under ``mixed_float16`` with Keras 2's ``LossScaleOptimizer``): the gradients' dtypes,
whether each held inf/NaN, the loss scale before and after, and the same
:func:`._audit_rules_across.gradient_findings`.

The layers that differ are :func:`._audit_rules_across.predict_differences`, shared with the
Keras 3 audit.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dtype_explorer.analyses.audit import _predict as _audit_predict
from dtype_explorer.analyses.audit import _rules as _audit_rules
from dtype_explorer.analyses.audit import _rules_across as _audit_rules_across
from dtype_explorer.errors import as_sentence, keras_message
from dtype_explorer.keras_run import Keras2Tracer, keras2_train_on_batch
from dtype_explorer.records import (
    Finding,
    FitReport,
    LayerCall,
    PredictReport,
)
from dtype_explorer.timing import ms

#: How each mode ran, in words (``AuditReport.execution``).
EXECUTION = {
    "predict": "model.predict (Keras 2: compiled by tf.function)",
    "fit": "model.train_on_batch: one training step, compiled by tf.function",
}


def predict_phase(
    model: Any, sample: Any, eager: list[LayerCall], eager_outputs: Any, audited: Any
) -> tuple[PredictReport, list[LayerCall], list[Finding]]:
    """Keras 2's real ``model.predict`` on ``sample``, every layer call recorded as its
    ``tf.function`` traced it, compared with the eager pass (``eager``, ``eager_outputs``):
    the report, those records, and the rules' findings on them (``audited``: the
    ``AuditedModel``) with the mode divergences."""
    import tensorflow as tf

    report, calls = _audit_predict.predicted(
        Keras2Tracer(model, values=False),
        sample,
        eager,
        [np.asarray(x) for x in tf.nest.flatten(eager_outputs)],
        flatten=lambda outputs: [np.asarray(x) for x in tf.nest.flatten(outputs)],
        compiled=True,
        execution=EXECUTION["predict"],
    )
    found = [
        f
        for f in _audit_rules.find(calls, model=audited, policy=audited.policy)
        if f.kind != "call-error"
    ]
    return report, calls, [*found, *_audit_rules_across.mode_divergences(report)]


def fit_phase(
    model: Any, copy: Any, sample: Any, outputs: Any, timings: dict[str, float]
) -> tuple[FitReport | None, list[Finding]]:
    """One real Keras 2 ``train_on_batch`` step of ``copy`` (:func:`keras2_copy` of
    ``model``; compiled as ``model`` is, with a fresh optimizer, else SGD on mean squared
    error) on zeros shaped as its outputs: the report and its gradient findings, or the
    finding that the step raised."""
    import tensorflow as tf

    t0 = time.perf_counter()
    targets = [np.zeros(tuple(t.shape), "float32") for t in tf.nest.flatten(outputs)]
    loss, optimizer = _compile_config(model)
    try:
        fit = keras2_train_on_batch(copy, sample, targets, None, loss, optimizer, nonfinite=True)
    except Exception as error:
        said = f"{type(error).__name__}: {as_sentence(keras_message(str(error), limit=1000))}"
        shown = f"zeros shaped as the outputs {[tuple(t.shape) for t in targets]}"
        timings["fit_ms"] = ms(t0)
        return None, [
            _audit_rules_across.step_failed(
                copy.name, said, "compiled by tf.function", str(loss), shown
            )
        ]
    timings["fit_ms"] = ms(t0)
    return fit, list(_audit_rules_across.gradient_findings(fit, copy.name))


def _compile_config(model: Any) -> tuple[Any, Any]:
    """The loss and a fresh optimizer of a compiled Keras 2 model (its inner one under a
    ``LossScaleOptimizer``: Keras 2's ``compile`` wraps it again under a mixed policy), or
    mean squared error and ``None`` (SGD)."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or getattr(model, "loss", None) is None:
        return "mean_squared_error", None
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return model.loss, type(inner).from_config(inner.get_config())
