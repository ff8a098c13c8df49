"""``check_model(..., quantize=)``: quantize a copy of the model, audit that copy, and report
what quantization did (per layer: quantized or skipped and why, what it stores, how it
computes, its error against the float model). The Keras work is ``keras_run``'s
(``quantize_layers``, ``leaf_outputs``); the rules are ``_audit_rules_quant``'s.

>>> import keras, numpy as np, dtype_explorer as dx
>>> inputs = keras.Input((4,))
>>> model = keras.Model(inputs, keras.layers.Dense(2, name="d")(inputs), name="m")
>>> report = dx.check_model(model, np.ones((2, 4), "float32"), quantize="int8")
>>> [(r.path, r.status, [v.dtype for v in r.variables]) for r in report.quantization.layers
...  if r.has_weights]
[('m/d', 'quantized', ['float32', 'int8', 'float32'])]
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dtype_explorer.analyses.audit import _fixes_quant
from dtype_explorer.analyses.audit import _rules_quant as rules
from dtype_explorer.keras_run import (
    QuantizeRequest,
    keras_quantization_summary,
    leaf_outputs,
    model_copy,
    quantization_modes,
    quantize_layers,
)
from dtype_explorer.records import Finding, LayerCall, QuantizationReport, QuantizedLayer

#: The relative output error above which quantization is a finding.
THRESHOLD = 0.05


@dataclasses.dataclass
class Quantized:
    """A quantized copy under way: the copy (``None`` when Keras refused), its report so far;
    the model it was made from, the sample, the request and the call's arguments (what the
    fixes run again, ``_fixes_quant``)."""

    copy: Any
    report: QuantizationReport
    target: Any = None
    sample: Any = None
    request: Any = None
    arguments: dict = dataclasses.field(default_factory=dict)


def quantize_copy(target: Any, sample: Any, request: QuantizeRequest, arguments: dict) -> Quantized:
    """# 1. Two copies of ``target`` through Keras's format (the model itself is only read)
    # 2. One quantized layer by layer, each outcome recorded (and Keras's own
    #    ``quantization_summary()`` of it, where Keras has one)
    # 3. Both run on ``sample``: each layer's and the model's output error."""
    floating, copy = model_copy(target), model_copy(target)
    rows, refused = quantize_layers(copy, request, source=target)
    error = None
    summary, summary_raised = (None, "") if refused else keras_quantization_summary(copy)
    if refused is None:
        reference, ref_out = leaf_outputs(floating, sample, arguments)
        values, out = leaf_outputs(copy, sample, arguments)
        rows = [_with_error(row, reference, values) for row in rows]
        error = rules.relative_error(ref_out, out)
    report = QuantizationReport(
        mode=request.mode,
        asked=request.label,
        modes=quantization_modes(),
        layers=tuple(rows),
        output_error=error,
        threshold=THRESHOLD,
        refused=refused,
        keras_summary=summary,  # Keras's own, beside the rows (keras-nightly has it)
        keras_warnings=(summary_raised,) if summary_raised else (),
    )
    return Quantized(
        copy=None if refused is not None else copy,
        report=report,
        target=target,
        sample=sample,
        request=request,
        arguments=arguments,
    )


def _with_error(row: QuantizedLayer, reference: dict, values: dict) -> QuantizedLayer:
    key = (row.path, 0)
    if key not in reference or key not in values:
        return row
    return row.model_copy(
        update={
            "error": rules.relative_error(reference[key], values[key])
            if row.status == "quantized"
            else None,
            "float_output_dtypes": tuple(str(a.dtype) for a in reference[key]),
        }
    )


def finish(
    quantized: Quantized, calls: list[LayerCall]
) -> tuple[QuantizationReport, list[Finding]]:
    """The report completed from the audited copy's calls (each quantized layer's compute path
    and output dtypes, as traced), and its findings, their fixes run on copies
    (``_fixes_quant``)."""
    report = quantized.report
    by_path: dict[str, LayerCall] = {}
    for call in calls:
        by_path.setdefault(call.path, call)  # the first call of each layer
    rows = []
    for row in report.layers:
        call = by_path.get(row.path)
        if call is None:
            rows.append(row)
            continue
        stored = [v.dtype for v in row.variables]
        rows.append(
            row.model_copy(
                update={
                    "steps": rules.compute_path(call, stored) if row.status == "quantized" else (),
                    "output_dtypes": tuple(t.dtype for t in call.outputs),
                }
            )
        )
    report = report.model_copy(update={"layers": tuple(rows)})
    found = rules.quantization_findings(report, calls)
    return report, _fixes_quant.proven(found, quantized, report)
