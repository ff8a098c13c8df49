"""The ``predict`` mode's pass, shared by the Keras 3 audit (:mod:`._audit`) and the Keras 2
one (:mod:`._audit_keras2_modes`): the real ``model.predict`` on the sample, every layer call
recorded as the compiled function traced it (the tracer's ``run_predict``), and the
:class:`~dtype_explorer.records.PredictReport` comparing its outputs and layers with the eager
pass's. Each Keras says how it compiled (``compiled``, ``execution``) and how its outputs
flatten; the rest is one piece of code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dtype_explorer.analyses.audit import _rules_across as _audit_rules_across
from dtype_explorer.errors import keras_message
from dtype_explorer.keras_run import (
    ModelTracer,
    keras_flatten,
    nonfinite_count,
    predict_compiled_by,
    refused_by,
    tensor_info,
)
from dtype_explorer.records import ErrorInfo, LayerCall, PredictReport


def predicted(
    tracer: Any,
    sample: Any,
    eager: list[LayerCall],
    eager_leaves: list[Any],
    *,
    flatten: Callable[[Any], list[Any]],
    compiled: bool,
    execution: str,
    dataset: bool = False,
) -> tuple[PredictReport, list[LayerCall]]:
    """``tracer``'s (a ``ModelTracer`` or ``Keras2Tracer``, ``values=False``) real predict on
    ``sample`` (``dataset``: on a ``tf.data.Dataset`` of it, Keras 3's tracer), compared with
    the eager pass (its calls ``eager``, its output leaves ``eager_leaves``); ``flatten``
    makes the predicted outputs' leaves arrays.

    Returns:
        The report, and the layer calls as the compiled function traced them.
    """
    error = refused = None
    try:
        outputs, symbolic = (
            tracer.run_predict(sample, dataset=True) if dataset else tracer.run_predict(sample)
        )
    except Exception as exc:  # the eager call ran: that predict does not is the finding
        outputs = symbolic = None
        error = ErrorInfo(type=type(exc).__name__, message=keras_message(str(exc), limit=2000))
        refused = refused_by(exc)
    calls = tracer.finish(symbolic)
    leaves = [] if outputs is None else flatten(outputs)
    report = PredictReport(
        compiled=compiled,
        execution=execution,
        outputs=tuple(tensor_info(x) for x in leaves),
        nonfinite=tuple(nonfinite_count(x) for x in leaves),
        eager_outputs=tuple(tensor_info(x) for x in eager_leaves),
        eager_nonfinite=tuple(nonfinite_count(x) for x in eager_leaves),
        differences=tuple(
            _audit_rules_across.predict_differences(
                eager, calls, "dataset" if dataset else "predict"
            )
        ),
        error=error,
        failed_at=None if tracer.failed_at is None else tracer.failed_at.path,
        cause=None if tracer.failed_at is None else tracer.failed_at.error,
        refused_by=refused if tracer.failed_at is None else None,
    )
    return report, calls


def keras3_predicted(
    model: Any, sample: Any, eager: list[LayerCall], eager_outputs: Any, dataset: bool = False
) -> tuple[PredictReport, list[LayerCall]]:
    """The real ``model.predict`` on ``sample`` (``dataset``: on a ``tf.data.Dataset`` of it,
    one batch, as users feed one on every backend), every layer call recorded as the compiled
    function traced it, compared with the eager pass ``eager``."""
    import keras

    compiled, how = predict_compiled_by(model)
    batch = int(keras.tree.flatten(sample)[0].shape[0])
    run = (
        f"model.predict on a tf.data.Dataset (from_tensor_slices(sample).batch({batch}))"
        if dataset
        else "model.predict"
    )
    return predicted(
        ModelTracer(model, values=False),
        sample,
        eager,
        keras_flatten(eager_outputs),
        flatten=lambda outputs: [np.asarray(x) for x in keras.tree.flatten(outputs)],
        compiled=compiled,
        execution=f"{run}, {how}",
        dataset=dataset,
    )
