"""The audit's findings across modes and backends, each a pure function of records: how
``model.predict`` (a ``PredictReport``) and one ``model.fit`` step (a ``FitReport``) differ from
the eager call, and how the same layer call answered on other backends (its ``ProbeResult``s).

>>> from dtype_explorer.records import LayerDifference, PredictReport
>>> report = PredictReport(compiled=True, execution="model.predict, compiled by jax.jit",
...     differences=(LayerDifference(path="m/dense", layer_class="Dense", call_index=0,
...                                  where="output", eager=("float32",), predict=("float16",)),))
>>> [(f.kind, f.path) for f in mode_divergences(report)]
[('mode-divergence', 'm/dense')]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dtype_explorer.errors import as_sentence
from dtype_explorer.records import (
    Finding,
    FitReport,
    FixProof,
    LayerCall,
    LayerDifference,
    PredictReport,
    ProbeResult,
    ProbeSet,
)

#: Why a failure of a compiled run shows no fix: its cause is code the audit cannot change.
_IN_ITS_CODE = (
    "what raised is {where}'s own code under a compiled function, which the audit cannot "
    "rewrite and run on a copy"
)

# --------------------------------------------------------------------------- across modes


def predict_differences(
    eager: list[LayerCall], calls: list[LayerCall], run: str = "predict"
) -> Iterator[LayerDifference]:
    """Each layer call whose received or output dtypes under predict (``calls``; ``run``:
    ``"dataset"`` for predict on a ``tf.data.Dataset``) differ from the eager pass's
    (``eager``; a call that raised there and was not re-run is skipped), for Keras 3's and
    Keras 2's audits alike.

    >>> from dtype_explorer.records import LayerCall, TensorInfo
    >>> def call(dtype):
    ...     return LayerCall(path="m/d", layer_class="Dense", depth=1, policy="float32",
    ...                      compute_dtype="float32", variable_dtype="float32",
    ...                      received=(TensorInfo(dtype=dtype, shape=(2,)),))
    >>> [d.text() for d in predict_differences([call("float32")], [call("float64")])]
    ['d received: eager float32, predict float64']
    """
    by_key = {(c.path, c.call_index): c for c in eager}
    for call in calls:
        before = by_key.get((call.path, call.call_index))
        if before is None or (before.error is not None and not before.retried):
            continue
        for where in ("received", "outputs"):
            was = tuple(t.dtype for t in getattr(before, where))
            now = tuple(t.dtype for t in getattr(call, where))
            if was != now and now:
                yield LayerDifference(
                    path=call.path,
                    layer_class=call.layer_class,
                    call_index=call.call_index,
                    where="received" if where == "received" else "output",
                    eager=was,
                    predict=now,
                    run=run,
                )


def mode_divergences(predict: PredictReport) -> Iterator[Finding]:
    """A layer whose dtypes under ``model.predict`` differ from its eager call's, and an
    output with inf/NaN under predict that the eager call did not have."""
    # 1. model.predict raised where the eager call ran
    if predict.error is not None:
        yield _predict_raised(predict)
    # 2. dtypes that differ: the model's own input, then each layer call
    for diff in predict.differences:
        if "/" not in diff.path and diff.where == "received":  # the model itself
            yield _model_input_differs(predict, diff)
        else:
            yield _layer_differs(predict, diff)
    # 3. outputs with inf/NaN that the eager call did not have
    for i, (now, was) in enumerate(zip(predict.nonfinite, predict.eager_nonfinite)):
        if now > was:
            yield Finding(
                kind="mode-divergence",
                severity="error",
                path=f"output {i}",
                message=(
                    f"model.predict's output {i} holds {now} inf/NaN values where the eager "
                    f"call's holds {was} ({predict.execution})."
                ),
                details={"nonfinite": now, "eager_nonfinite": was},
            )


#: What Keras's data adapters take (``keras.src.trainers.data_adapters.get_data_adapter``
#: and ``array_slicing.convert_to_sliceable``, whose own error lists the array types).
_ADAPTERS_TAKE = (
    "arrays (a NumPy array of a dtype Keras knows, a tf.Tensor, tf.RaggedTensor, "
    "tf.SparseTensor, jax array, torch.Tensor, Pandas DataFrame or Series), a tf.data.Dataset, "
    "a keras.utils.PyDataset, a torch DataLoader or a Python generator"
)


def _predict_raised(predict: PredictReport) -> Finding:
    assert predict.error is not None
    if predict.refused_by is not None:
        return _predict_refused(predict)
    where = predict.failed_at or "the model"
    cause = predict.cause or predict.error
    also = (
        f" (model.predict re-raised it as {predict.error.type}: "
        f"{as_sentence(predict.error.message)})"
        if cause.type != predict.error.type
        else ""
    )
    return Finding(
        kind="mode-divergence",
        severity="error",
        path=predict.failed_at or "model.predict",
        message=(
            f"Under {predict.execution}, {where} raised {cause.type} where the eager call "
            f"ran: {as_sentence(cause.message)}{also}"
        ),
        details={"error": predict.error.to_dict(), "cause": cause.to_dict()},
        proof=FixProof(not_tried=_IN_ITS_CODE.format(where=where)),
    )


def _predict_refused(predict: PredictReport) -> Finding:
    """Keras's data adapter (``predict.refused_by``) refused the sample: nothing of the
    model ran, so nothing in it is to blame or to fix."""
    assert predict.error is not None and predict.refused_by is not None
    return Finding(
        kind="mode-divergence",
        severity="error",
        path="model.predict",
        message=(
            f"{predict.execution.split(',')[0]} refused the sample before any compiled "
            f"function or layer ran, where the eager call took it: Keras's data adapter "
            f"({predict.refused_by}) raised {predict.error.type}: "
            f"{as_sentence(predict.error.message)} model.predict's data adapters take "
            f"{_ADAPTERS_TAKE}."
        ),
        details={"error": predict.error.to_dict(), "refused_by": predict.refused_by},
        proof=FixProof(
            not_tried=(
                "the sample's type is refused by Keras's data handling, not by the model: "
                "the remedy is the sample in a type the data adapter takes, which the audit "
                "does not choose for you"
            )
        ),
    )


def _model_input_differs(predict: PredictReport, diff: LayerDifference) -> Finding:
    inside = [d for d in predict.differences if d.path.startswith(diff.path + "/")]
    return Finding(
        kind="mode-divergence",
        severity="info" if not inside else "warning",
        path=diff.path,
        message=(
            f"model.predict hands the model {', '.join(diff.predict)} where model(x) "
            f"hands it {', '.join(diff.eager)}: predict converts the sample before "
            f"its function runs ({predict.execution}). "
            + (
                f"{len(inside)} layer call(s) inside see other dtypes (below)."
                if inside
                else "Its layers receive the same dtypes as in the eager call."
            )
        ),
        details={"where": diff.where, "eager": list(diff.eager), "predict": list(diff.predict)},
    )


def _layer_differs(predict: PredictReport, diff: LayerDifference) -> Finding:
    return Finding(
        kind="mode-divergence",
        severity="warning",
        path=diff.path,
        message=(
            f"{diff.layer_class} {'returns' if diff.where == 'output' else 'receives'} "
            f"{', '.join(diff.predict)} under {predict.execution}, but "
            f"{', '.join(diff.eager)} in the eager call: code tested with model(x) meets "
            "another dtype in model.predict."
        ),
        details={"where": diff.where, "eager": list(diff.eager), "predict": list(diff.predict)},
        proof=FixProof(
            not_tried=(
                f"a cast {'after' if diff.where == 'output' else 'before'} {diff.layer_class} "
                "goes in the model's own code, which the audit cannot change and run "
                "compiled on a copy"
            )
        ),
    )


def step_failed(model: str, said: str, how: str, loss: str, labels: str) -> Finding:
    """The training step of the model named ``model`` raised where the eager
    ``training=True`` call ran."""
    return Finding(
        kind="mode-divergence",
        severity="error",
        path=model,
        message=(
            f"One model.fit step ({how}, loss {loss}, labels {labels}) raised where the eager "
            f"training=True call ran: {said}"
        ),
        details={"error": said},
        proof=FixProof(not_tried=_IN_ITS_CODE.format(where=model)),
    )


def step_error(model: str, said: str, how: str, loss: str, labels: str) -> Finding:
    """The training step of the model named ``model`` raised with the labels the user gave,
    and raises as well with labels fitting its outputs: the model's own error, with Keras's
    first message whole (``said``), not the labels'.

    >>> step_error("m", "InternalError: mixed precision is disallowed.",
    ...            "compiled by tf.function with XLA", "mse", "(2, 1) float32").kind
    'call-error'
    """
    xla = "XLA" in how
    return Finding(
        kind="call-error",
        severity="error",
        path=model,
        message=(
            f"One model.fit step ({how}, loss {loss}, labels {labels}) raised: {said} It "
            "raises with labels fitting the model's outputs too: the model's own error, not "
            "the labels'."
        ),
        details={"error": said},
        proof=None if xla else FixProof(not_tried=_IN_ITS_CODE.format(where=model)),
    )  # under XLA the audit runs the step compiled without it (_fit) and shows that once it runs


def gradient_findings(fit: FitReport, model: str) -> Iterator[Finding]:
    """inf/NaN gradients in the training step: an error without loss scaling; with it, a note
    (``LossScaleOptimizer`` skips the step and lowers its scale, as designed). ``model``:
    the model's name."""
    bad = fit.nonfinite_gradients
    if not bad:
        return
    shown = ", ".join(bad[:5]) + (f", ... ({len(bad)} in all)" if len(bad) > 5 else "")
    if fit.loss_scaling:
        yield Finding(
            kind="nonfinite-gradient",
            severity="info",
            path=model,
            message=(
                f"The scaled gradients of {shown} held inf/NaN at loss scale "
                f"{fit.loss_scale:g}: LossScaleOptimizer skipped the step and lowered the "
                f"scale to {fit.loss_scale_after:g}, as designed. If it keeps happening, the "
                "gradients overflow float16 even unscaled."
            ),
            details={"variables": bad},
        )
        return
    yield Finding(
        kind="nonfinite-gradient",
        severity="error",
        path=model,
        message=(
            f"One training step ({fit.optimizer} on {fit.loss}) gave inf/NaN gradients for "
            f"{shown}, and no loss scaling guards the step: the weights become NaN."
        ),
        details={"variables": bad},
        proof=FixProof(
            not_tried=(
                "the compiled step's ops are not traced, so which layer makes the inf/NaN is "
                "not known to change on a copy; a LossScaleOptimizer skips such steps, it "
                "does not clear them"
            )
        ),
    )


def unscaled_loss_findings(fit: FitReport, model: str) -> Iterator[Finding]:
    """A ``LossScaleOptimizer`` that applied steps whose loss the train step never scaled
    (``FitReport.loss_scaled`` is ``False``: its ``scale_loss`` was not called): it divides
    every gradient by its scale all the same, so the inner optimizer receives gradients that
    many times too small (how much its steps shrink is the optimizer's: SGD's by as much).
    The missing call is in the model's own ``train_step``: no copy of it is run with it.

    >>> run = FitReport(loss="mse", optimizer="LossScaleOptimizer(SGD)", loss_scaling=True,
    ...     loss_scaled=False, loss_scale=32768.0, applied=3)
    >>> [(f.kind, f.severity) for f in unscaled_loss_findings(run, "m")]
    [('loss-not-scaled', 'warning')]
    """
    if not fit.loss_scaling or fit.loss_scaled is not False or not fit.applied:
        return
    scale = f"{fit.loss_scale:g}" if fit.loss_scale is not None else "its loss scale"
    yield Finding(
        kind="loss-not-scaled",
        severity="warning",
        path=model,
        message=(
            f"The train step never called optimizer.scale_loss(loss), but the optimizer is "
            f"a {fit.optimizer} (compile() adds one under mixed_float16): it divided the "
            f"gradients of {fit.applied} applied step(s) by the loss scale {scale} though the "
            f"loss was never multiplied by it, so the inner optimizer received gradients {scale} "
            "times too small (an SGD step shrinks by as much; an Adam-type one, which divides "
            "by the gradients' own size, far less, though its epsilon and any clipping see the "
            "wrong scale). The train step lacks the call Keras's own train_step "
            "makes: take the gradients of self.optimizer.scale_loss(loss) (torch: call "
            ".backward() on it; tensorflow: compute it inside the GradientTape; jax: return "
            "it from the function differentiated)."
        ),
        details={"optimizer": fit.optimizer, "loss_scale": fit.loss_scale},
        proof=FixProof(
            not_tried=(
                "the missing call is in the model's own train_step, code the audit does not "
                "rewrite, so no copy was trained with it"
            )
        ),
    )


def later_step_findings(fit: FitReport, model: str) -> Iterator[Finding]:
    """inf/NaN gradients that first appear after the first step of a run of several
    (``steps=N``; the first step's are :func:`gradient_findings`'): the step and variable where
    they appear, and what the optimizer did then (skipped, the loss scale lowered, or applied).

    >>> from dtype_explorer.records import FitStep
    >>> run = FitReport(loss="mse", optimizer="SGD", steps=(FitStep(step=1, loss=1.0),
    ...     FitStep(step=2, loss=9.0, nonfinite={"dense/kernel": 3})))
    >>> [(f.severity, f.details["step"]) for f in later_step_findings(run, "m")]
    [('error', 2)]
    """
    where = fit.first_nonfinite()
    if where is None or where[0] == 1:
        return
    step, variable = where
    names = list(fit.steps[step - 1].nonfinite)
    shown = ", ".join(names[:5]) + (f", ... ({len(names)} in all)" if len(names) > 5 else "")
    skipped = [s for s in fit.skipped_steps if s >= step]
    details: dict[str, Any] = {"step": step, "variable": variable, "variables": names}
    if fit.loss_scaling:
        scales = [(s, a) for s, _, a in fit.scale_changes() if s >= step]
        lowered = f" and lowered the loss scale to {scales[-1][1]:g}" if scales else ""
        yield Finding(
            kind="nonfinite-gradient",
            severity="info",
            path=model,
            message=(
                f"From step {step} of {len(fit.steps)}, the scaled gradients of {shown} held "
                f"inf/NaN: LossScaleOptimizer skipped {len(skipped)} step(s){lowered}, as "
                "designed. If it keeps happening, the gradients overflow float16 even unscaled."
            ),
            details={**details, "skipped": skipped},
        )
        return
    yield Finding(
        kind="nonfinite-gradient",
        severity="error",
        path=model,
        message=(
            f"Training step {step} of {len(fit.steps)} ({fit.optimizer} on {fit.loss}) gave "
            f"inf/NaN gradients for {shown}, and no loss scaling guards the step: the weights "
            "become NaN."
        ),
        fix=(
            "# keep the loss and the last layer in float32, or scale the loss:\n"
            "optimizer = keras.optimizers.LossScaleOptimizer(optimizer)"
        ),
        details=details,
    )


def frozen_findings(fit: FitReport, model: str) -> Iterator[Finding]:
    """Trainable variables the run left exactly as they were though their gradients were
    nonzero in the steps the optimizer applied (``FitReport.frozen``): every update was lost,
    so training does nothing to them, silently. An error where no trainable value moved, a
    warning where some variables did.

    >>> from dtype_explorer.records import FrozenVariable, GradientInfo
    >>> grads = tuple(GradientInfo(name=n, dtype="bfloat16", variable_dtype="bfloat16")
    ...     for n in ("dense/kernel", "head/kernel"))
    >>> run = FitReport(loss="mse", optimizer="Adam", applied=3, gradients=grads,
    ...     frozen=(FrozenVariable(name="dense/kernel", dtype="bfloat16", size=8,
    ...     gradient_nonzero=24, spacing=0.0009765625, magnitude=0.23),))
    >>> [(f.kind, f.severity) for f in frozen_findings(run, "m")]
    [('update-lost', 'warning')]
    """
    if not fit.frozen or not fit.applied:
        return
    frozen = fit.frozen
    everything = {g.name for g in fit.gradients} <= {f.name for f in frozen}
    names = [f.name for f in frozen]
    shown = ", ".join(names[:5]) + (f", ... ({len(names)} in all)" if len(names) > 5 else "")
    values = sum(f.size for f in frozen)
    steps = f"{fit.applied} applied training step" + ("s" if fit.applied != 1 else "")
    dtypes = sorted({f.dtype for f in frozen})
    gaps = [f for f in frozen if f.spacing is not None and f.magnitude]
    gap = (
        f" Neighbouring {gaps[0].dtype} values near {gaps[0].magnitude:.3g} (the median "
        f"|{gaps[0].name}|) are {gaps[0].spacing:.3g} apart: an update under about half of "
        "that is rounded away when the variable is stored."
        if gaps
        else ""
    )
    yield Finding(
        kind="update-lost",
        severity="error" if everything else "warning",
        path=model,
        message=(
            f"{'No trainable value' if everything else f'None of the {values} values of {shown}'}"
            f" changed in {steps} ({fit.optimizer} on {fit.loss}), though the gradients "
            f"reaching {'them' if not everything else shown} were nonzero: every update was "
            f"lost, and training changes nothing there. The variables are stored in "
            f"{', '.join(dtypes)}.{gap}"
        ),
        details={
            "variables": names,
            "values": values,
            "applied": fit.applied,
            "dtypes": dtypes,
            "sizes": [f.size for f in frozen],
        },
    )  # its fix is run on a copy by the audit (``_fixes_training.update_lost_proof``)


# --------------------------------------------------------------------------- across backends


def backend_divergence(call: LayerCall, outcomes: Mapping[str, ProbeResult]) -> Iterator[Finding]:
    """``call`` re-probed on several backends (``outcomes``, by backend): a finding when they
    part ways on the outcome or the dtype, else when they agree on the dtype but not on the
    numbers (same inputs and weights)."""
    finished = [r for r in outcomes.values() if r.status in ("ok", "error")]
    if len({(r.status, r.output_dtype) for r in finished}) < 2:
        yield from _value_divergence(call, list(outcomes.values()))
        return
    first = next(iter(outcomes.values()))
    shown = {backend: _outcome(r) for backend, r in outcomes.items()}
    yield Finding(
        kind="backend-divergence",
        severity="error" if any(r.status == "error" for r in finished) else "warning",
        path=call.path,
        message=(
            f"{call.layer_class} on {', '.join(first.spec.input_dtypes)} input under "
            f"{call.policy} differs across backends: "
            + "; ".join(f"{b} {o}" for b, o in shown.items())
            + "."
        ),
        details=shown,
    )  # no fix here: the audit re-probes the layer with its inputs cast (_reprobe)


def _value_divergence(call: LayerCall, results: list[ProbeResult]) -> Iterator[Finding]:
    """The backends agree on the dtype, but not on the numbers (same inputs and weights)."""
    parted = ProbeSet(results=tuple(results)).value_divergence()
    if parted is None:
        return
    yield Finding(
        kind="value-divergence",
        severity="warning",
        path=call.path,
        message=(
            f"{call.layer_class} on {', '.join(results[0].spec.input_dtypes)} input under "
            f"{call.policy}: every backend returns {results[0].outcome}, but {parted.message}."
        ),
        details={"values": parted.values, "element": list(parted.element)},
    )  # no fix here: the audit re-probes the layer with its inputs cast (_reprobe)


def _outcome(result: ProbeResult) -> str:
    return f"returns {result.outcome}" if result.ok else result.outcome
