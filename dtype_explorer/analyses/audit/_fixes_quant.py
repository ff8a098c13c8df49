"""Fixes that are proven, for a quantized copy's findings (``check_model(..., quantize=)``):

1. ``quantization-error`` (the output moved beyond the threshold): the model quantized again
   on a copy by Keras's own ``Model.quantize(mode, filters=...)``, the layers with the
   largest error left float one more at a time (at most :data:`MAX_FLOAT`), each copy's
   output measured against the float model; the first set that brings the error within the
   threshold is the fix;
2. ``quantize-refused`` for a layer computing in float16 (int8 refuses it): the model rebuilt
   under ``mixed_bfloat16`` on a copy (``keras_run.policy_rebuild``, as ``policy=`` rebuilds
   it) and quantized; the fix where Keras then quantizes every layer it reaches.

Each proof says what was measured before and after, or why nothing was run.

>>> report = check_model(model, sample, quantize="int4")           # doctest: +SKIP
>>> report.by_kind("quantization-error")[0].proof.after.output_error   # doctest: +SKIP
0.012
"""

from __future__ import annotations

from typing import Any

from dtype_explorer.analyses.audit import _fix_code
from dtype_explorer.analyses.audit import _rules_quant as rules
from dtype_explorer.errors import as_sentence
from dtype_explorer.keras_run import (
    leaf_outputs,
    model_copy,
    policy_rebuild,
    quantize_layers,
    quantized_leaving_float,
)
from dtype_explorer.records import Finding, FixMeasure, FixProof, QuantizationReport

#: The most layers a proof leaves float, the worst first.
MAX_FLOAT = 3
#: The policy a quantization Keras refuses under float16 is run under instead.
BFLOAT16 = "mixed_bfloat16"


def proven(findings: list[Finding], quantized: Any, report: QuantizationReport) -> list[Finding]:
    """``findings`` with the quantization error's and the float16 refusal's fixes run on
    copies (see the module): each such finding's ``fix`` where it worked, its ``proof``.

    Args:
        findings: the quantization findings (``_rules_quant.quantization_findings``).
        quantized: the audit's quantized copy under way (``_quantize.Quantized``: the model
            it was made from, the sample, the request, the call's arguments).
        report: the quantization report.

    Returns:
        The findings, in order.
    """
    out = []
    for f in findings:
        if f.kind == "quantization-error":
            proof = _guarded(_error_proof, quantized, report)
        elif f.kind == "quantize-refused" and rules.refused_under_float16(report):
            proof = _guarded(_bfloat16_proof, quantized, report)
        else:
            out.append(f)
            continue
        out.append(
            f.model_copy(update={"fix": proof.change if proof.proven else "", "proof": proof})
        )
    return out


def _guarded(prove: Any, quantized: Any, report: QuantizationReport) -> FixProof:
    try:
        return prove(quantized, report)
    except Exception as error:  # a copy Keras cannot make or run: said, never a fix
        said = f"{type(error).__name__}: {as_sentence(str(error))}"[:300]
        return FixProof(not_tried=f"the copy could not be made or run: {said}")


def _error_proof(quantized: Any, report: QuantizationReport) -> FixProof:
    """Phase 1: the worst layers left float, one more at a time, one layer at least still
    quantized."""
    quantized_rows = [r for r in report.layers if r.status == "quantized"]
    rows = sorted(
        (r for r in quantized_rows if r.error is not None), key=lambda r: -(r.error or 0.0)
    )[: min(MAX_FLOAT, len(quantized_rows) - 1)]  # a fix leaves some layer quantized
    before = FixMeasure(finding=True, output_error=report.output_error, threshold=report.threshold)
    if not rows:
        return FixProof(
            not_tried=(
                "leaving a layer float would leave no layer quantized"
                if len(quantized_rows) < 2
                else "no quantized layer's own error was measured to choose from"
            )
        )
    target, sample, arguments = quantized.target, quantized.sample, quantized.arguments
    _, reference = leaf_outputs(model_copy(target), sample, arguments)
    paths: list[str] = []
    tried = []
    after = None
    for row in rows:
        paths.append(row.path)
        names = [p.rsplit("/", 1)[-1] for p in paths]  # Keras's layer.name
        copy = quantized_leaving_float(target, quantized.request, set(names))
        if copy is None:
            return FixProof(not_tried="this Keras's Model.quantize takes no filters=")
        error = rules.relative_error(reference, leaf_outputs(copy, sample, arguments)[1])
        within = error is not None and error <= report.threshold
        after = FixMeasure(finding=not within, output_error=error, threshold=report.threshold)
        tried.append(
            f"{', '.join(paths)} left float: output error "
            + ("not comparable" if error is None else f"{error:.3g}")
        )
        if within:
            assert error is not None
            code = _fix_code.quantize_filters_code(report.mode, names, _config(report), error)
            return FixProof(
                how="quantize-filters",
                change=code,
                layers=tuple(paths),
                mode=report.asked,
                proven=True,
                before=before,
                after=after,
                tried=tuple(tried),
            )
    return FixProof(
        how="quantize-filters",
        layers=tuple(paths),
        mode=report.asked,
        before=before,
        after=after,
        tried=tuple(tried),
    )


def _bfloat16_proof(quantized: Any, report: QuantizationReport) -> FixProof:
    """Phase 2: the model rebuilt under bfloat16 on a copy, then quantized."""
    assert report.refused is not None
    refused = f"{report.refused.type}: {as_sentence(report.refused.message)}"[:300]
    before = FixMeasure(finding=True, error=refused)
    done = policy_rebuild(quantized.target, BFLOAT16)
    if done.model is None:
        return FixProof(not_tried=f"the model could not be rebuilt under {BFLOAT16}: {done.failed}")
    copy = model_copy(done.model)  # the rebuild is kept for reuse: quantize a copy of it
    _, again = quantize_layers(copy, quantized.request, source=copy)
    proven = again is None
    said = "" if again is None else f"{again.type}: {as_sentence(again.message)}"[:300]
    change = ""
    if proven:
        spelled = type(quantized.target).__name__
        change = _fix_code.quantize_policy_code(
            done.how, BFLOAT16, report.mode, _config(report), spelled
        )
    return FixProof(
        how="quantize-policy",
        change=change,
        default_policy=BFLOAT16,
        mode=report.asked,
        proven=proven,
        before=before,
        after=FixMeasure(finding=not proven, error=said),
        tried=(f"under {BFLOAT16}: " + ("quantize() ran" if proven else f"raised {said}"),),
    )


def _config(report: QuantizationReport) -> str:
    """The ``config=`` argument of ``quantize`` as the audit passed it: a calibrated mode's
    config, an int4 block size's ``Int4QuantizationConfig``."""
    if report.asked.startswith("int4/"):
        size = report.asked.split("/", 1)[1]
        return f", config=keras.quantizers.Int4QuantizationConfig(block_size={size})"
    return rules.with_config(report.mode)
