"""The audit's rules for quantized models and round trips: pure functions of records (a
``QuantizationReport`` and the quantized copy's ``LayerCall`` records; a ``RoundTripReport``),
no Keras. The compute path of a quantized layer is read here from its op trace.

The rules give no fix of their own. A quantization finding's fix is run by the audit on a
copy (``_quantize``: quantize again leaving the worst layers float, or under bfloat16) and
shown once it worked; a round trip's fix is the other round trip that was measured (a
preset loaded with ``dtype=``, the ``.keras`` format), proven by its own measurement; every
other finding says why no fix was run (its ``FixProof.not_tried``).

>>> from dtype_explorer.records import QuantizationReport, QuantizedLayer
>>> row = QuantizedLayer(path="m/conv", layer_class="Conv2D", status="skipped",
...     why="Layer Conv2D does not have a `quantize` method implemented.", has_weights=True,
...     float_bytes=80)
>>> [f.kind for f in quantization_findings(QuantizationReport(mode="int8", asked="int8",
...     layers=(row,)), [])]
['not-quantized']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import numpy as np

from dtype_explorer.errors import as_sentence
from dtype_explorer.records import (
    Finding,
    FixMeasure,
    FixProof,
    LayerCall,
    QuantizationReport,
    QuantizedLayer,
    RoundTrip,
    RoundTripReport,
)
from dtype_explorer.records import compute_path as trace_compute_path

#: The dtypes a weight-only layer stores its kernel in: gptq and awq hold uint8 bytes.
_STORED_LOW = ("int4", "int8", "float8_e4m3fn", "float8_e5m2", "uint8")


def compute_path(call: LayerCall, stored: Iterable[str] = ()) -> tuple[str, ...]:
    """The steps of a quantized layer's call, read from its op trace (the records' reading,
    :func:`dtype_explorer.records.compute_path`): quantize inputs → (integer) product →
    accumulate dtype → descale → bias; a weight-only layer (its product in a float dtype while
    its kernel is stored low, gptq/awq's ``uint8`` included) says "dequantized to <dtype> on
    every call". ``stored``: the dtypes the layer stores its variables in."""
    return trace_compute_path(call.trace, stored, low_stored=_STORED_LOW)


def relative_error(reference: list[np.ndarray], values: list[np.ndarray]) -> float | None:
    """The largest |quantized - float| over the largest |float| (``None`` when the outputs
    cannot be compared: different counts or shapes)."""
    if len(reference) != len(values) or not reference:
        return None
    worst = 0.0
    for a, b in zip(reference, values):
        if a.shape != b.shape:
            return None
        try:  # bfloat16 and float8 (ml_dtypes) read as float64 too
            a64, b64 = a.astype("float64"), b.astype("float64")
        except (TypeError, ValueError):
            continue
        scale = float(np.max(np.abs(a64))) if a64.size else 0.0
        diff = float(np.max(np.abs(a64 - b64))) if a64.size else 0.0
        worst = max(worst, diff / scale if scale else diff)
    return worst


def quantization_findings(report: QuantizationReport, calls: list[LayerCall]) -> list[Finding]:
    """The findings of a quantization report: the refusal, layers with weights left float,
    quantized layers whose output dtype is not their compute dtype, errors beyond the
    threshold, and a quantized policy on a container layer."""
    findings: list[Finding] = []
    if report.refused is not None:
        findings.append(_refused(report))
    findings += _not_quantized(report.layers)
    findings += _output_dtypes(report.layers)
    findings += _errors(report)
    findings += _containers(calls)
    return findings


def refused_under_float16(report: QuantizationReport) -> bool:
    """Whether Keras refused to quantize a layer computing in float16 (the audit then runs the
    quantization again under bfloat16 on a copy)."""
    at = next((r for r in report.layers if r.status == "refused"), None)
    return at is not None and at.compute_dtype == "float16"


def _refused(report: QuantizationReport) -> Finding:
    at = next((r for r in report.layers if r.status == "refused"), None)
    proof = None if refused_under_float16(report) else _structure_said(report)
    return Finding(
        kind="quantize-refused",
        severity="error",
        path=at.path if at else "",
        message=(
            f"model.quantize({report.asked!r}) raises"
            + (f" at {at.layer_class} ({at.policy})" if at else "")
            + f": {report.refused.type}: {report.refused.message} The audit ran the float model."
        ),
        details={"mode": report.mode},
        proof=proof,
    )


def _structure_said(report: QuantizationReport) -> FixProof | None:
    """For gptq/awq refused for want of blocks: why no structure was tried."""
    assert report.refused is not None
    if report.mode not in ("gptq", "awq") or "structure" not in report.refused.message:
        return None
    return FixProof(
        not_tried=(
            "which layers run first and which blocks to calibrate one after another is the "
            "model's own structure (config.quantization_layer_structure, or the model's "
            "get_quantization_layer_structure), which the audit cannot choose for it"
        )
    )


def _not_quantized(rows: Iterable[QuantizedLayer]) -> Iterator[Finding]:
    for row in rows:
        if row.status != "skipped" or not row.has_weights or row.why.startswith("not reached"):
            continue
        yield Finding(
            kind="not-quantized",
            severity="info",
            path=row.path,
            message=(
                f"{row.layer_class} keeps its {row.policy} weights ({row.float_bytes} bytes): "
                f"quantize() skipped it. Keras said: {row.why or 'nothing'}"
            ),
            proof=FixProof(
                not_tried=(
                    "Keras has no quantized form of this layer: the change would be another "
                    "layer in the model's code, which the audit cannot make on a copy"
                )
            ),
        )


def _output_dtypes(rows: Iterable[QuantizedLayer]) -> Iterator[Finding]:
    for row in rows:
        if row.status != "quantized" or not row.output_dtypes:
            continue
        off = [d for d in row.output_dtypes if d != row.compute_dtype]
        if not off:
            continue
        yield Finding(
            kind="quantized-output-dtype",
            severity="warning",
            path=row.path,
            message=(
                f"quantized {row.layer_class} under {row.policy} computes in "
                f"{row.compute_dtype}, yet returned {', '.join(off)}: the next layers get "
                f"{', '.join(off)} and cast it themselves."
            ),
            details={"output": list(row.output_dtypes), "compute": row.compute_dtype},
            proof=FixProof(
                not_tried=(
                    f"a cast after {row.path} goes in the model's own code, which the audit "
                    "cannot change and run on a copy"
                )
            ),
        )


def _errors(report: QuantizationReport) -> Iterator[Finding]:
    rows = [r for r in report.layers if r.status == "quantized" and r.error is not None]
    worst = max(rows, key=lambda r: r.error or 0.0, default=None)
    error = report.output_error
    if error is None or error <= report.threshold:
        return
    where = (
        f"; the largest layer error is at {worst.path} ({worst.layer_class}: {worst.error:.3g})"
        if worst
        else ""
    )
    yield Finding(
        kind="quantization-error",
        severity="warning",
        path=worst.path if worst else "",
        message=(
            f"quantize({report.asked!r}) moves the model's output by {error:.3g} of its largest "
            f"value against the float model (same weights, same sample), above the threshold "
            f"{report.threshold:g}{where}."
        ),
        details={"error": error, "threshold": report.threshold},
    )  # no fix here: the audit quantizes a copy again, the worst layers left float (_quantize)


def with_config(mode: str) -> str:
    """The ``config=`` a calibrated mode's ``quantize`` call needs (its dataset and tokenizer)."""
    return ", config=config" if mode in ("gptq", "awq") else ""


def _containers(calls: Iterable[LayerCall]) -> Iterator[Finding]:
    for call in calls:
        if call.leaf or not _quantized_policy(call.policy):
            continue
        yield Finding(
            kind="quantized-container",
            severity="error",
            path=call.path,
            message=(
                f"{call.layer_class} (a container of layers) is under the quantized policy "
                f"{call.policy}: a global quantized dtype policy reaches container layers, "
                "and Keras raises when a Functional model calls its quantized entry point."
            ),
            proof=FixProof(
                not_tried=(
                    "the container took the global policy when the model was built: building "
                    "it again under a float policy is the user's own code, which the audit "
                    "cannot run"
                )
            ),
        )
        return


def _quantized_policy(name: str) -> bool:
    return "_from_" in name


def roundtrip_findings(report: RoundTripReport, model: str) -> list[Finding]:
    """One finding per format whose load raised, per change of dtypes (the layers that changed
    alike in one finding), and per format whose outputs moved; or the one finding that the
    model's own call raised, where no format was saved."""
    if report.call_error is not None:
        return [_not_called(report, model)]
    findings = []
    for trip in report.trips:
        if trip.outcome == "raised" and trip.error is not None:
            findings.append(_trip_error(trip, model, report))
        findings += _dtype_changes(trip, report)
        if trip.output_dtypes != trip.loaded_output_dtypes and trip.outcome == "compared":
            findings.append(
                Finding(
                    kind="roundtrip-dtype",
                    severity="error",
                    path=model,
                    message=(
                        f"{trip.format}: the outputs were {', '.join(trip.output_dtypes)}, "
                        f"after loading {', '.join(trip.loaded_output_dtypes)}"
                    ),
                    details={"format": trip.format},
                    proof=_preset_proof(trip, report),
                )
            )
        if trip.max_abs_difference:
            findings.append(
                Finding(
                    kind="roundtrip-values",
                    severity="warning",
                    path=model,
                    message=(
                        f"{trip.format}: the loaded model's outputs differ from the model's by up "
                        f"to {trip.max_abs_difference:g} on the same sample"
                    ),
                    details={"format": trip.format, "max_abs": trip.max_abs_difference},
                )
            )
    return [_shown(f) for f in findings]


def _not_called(report: RoundTripReport, model: str) -> Finding:
    """The model's own call on the sample raised: Keras's message, and why nothing was saved.

    >>> from dtype_explorer.records import ErrorInfo
    >>> said = ErrorInfo(type="InvalidArgumentError", message="uint8 is not allowed")
    >>> _not_called(RoundTripReport(call_error=said), "m").kind
    'call-error'
    """
    assert report.call_error is not None
    return Finding(
        kind="call-error",
        severity="error",
        path=model,
        message=(
            f"The model's own call on the sample raised {report.call_error.type}: "
            f"{as_sentence(report.call_error.message)} (Keras's error.) The round trips were "
            "not run: a loaded model's outputs would have nothing to be compared with."
        ),
        details={"error": report.call_error.to_dict()},
    )


def _shown(finding: Finding) -> Finding:
    """``finding`` with its proof's change as its fix where the proof holds."""
    proof = finding.proof
    return finding.model_copy(update={"fix": proof.change if proof and proof.proven else ""})


def _trip_error(trip: RoundTrip, model: str, report: RoundTripReport) -> Finding:
    """Keras's message; the fix is the ``.keras`` round trip where it brought the model back
    unchanged (measured beside it)."""
    assert trip.error is not None
    clean = [t.format for t in report.trips if _unchanged(t)]
    proof = None
    if ".keras" in clean:
        proof = FixProof(
            how="save-format",
            format=".keras",
            change=(
                f"# proven: this model came back unchanged through {', '.join(clean)}\n"
                'model.save("model.keras")\nmodel = keras.saving.load_model("model.keras")'
            ),
            proven=True,
            before=FixMeasure(
                finding=True, at=model, error=f"{trip.format} {trip.stage}: {trip.error.type}"
            ),
            after=FixMeasure(finding=False, at=model),
        )
    return _shown(
        Finding(
            kind="roundtrip-error",
            severity="error",
            path=model,
            message=f"{trip.format}: {trip.stage} raised {trip.error.type}: {trip.error.message}",
            details={"format": trip.format, "stage": trip.stage},
            proof=proof,
        )
    )


def _unchanged(trip: RoundTrip) -> bool:
    """Whether ``trip`` brought the model back as it left: same dtypes, same outputs."""
    return (
        trip.outcome == "compared"
        and not trip.dtype_changes
        and not trip.max_abs_difference
        and trip.output_dtypes == trip.loaded_output_dtypes
    )


def _dtype_changes(trip: RoundTrip, report: RoundTripReport) -> list[Finding]:
    """``path: what → what`` changes grouped by what changed (counts of variables aside): a
    preset that loads every layer under another policy is one finding naming the layers."""
    groups: dict[str, list[str]] = {}
    for change in trip.dtype_changes:
        path, _, what = change.partition(": ")
        groups.setdefault(re.sub(r"\b\d+ ", "", what), []).append(path)
    findings = []
    for what, paths in groups.items():
        named = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        layers = f"{len(paths)} layers ({named})" if len(paths) > 1 else paths[0]
        findings.append(
            Finding(
                kind="roundtrip-dtype",
                severity="error",
                path=paths[0],
                message=f"{trip.format}: after save and load, {layers}: {what}",
                details={"format": trip.format, "layers": list(paths)},
                proof=_preset_proof(trip, report),
            )
        )
    return [_shown(f) for f in findings]


def _preset_proof(trip: RoundTrip, report: RoundTripReport) -> FixProof | None:
    """keras-hub's ``from_preset`` without ``dtype=`` loads a float preset under Keras's
    global policy (``PresetLoader._resolve_dtype``); the audit also loaded it with ``dtype=``
    the model's policy (``"preset, dtype=<policy>"``): that round trip, measured, is the fix
    where it came back unchanged."""
    if trip.format != "preset":
        return None
    typed = next((t for t in report.trips if t.format.startswith("preset, dtype=")), None)
    if typed is None:
        return FixProof(not_tried="the preset was not loaded again with dtype=")
    policy = typed.format.partition("dtype=")[2]
    proven = _unchanged(typed)
    return FixProof(
        how="save-format",
        format=typed.format,
        change=(
            f'model = type(model).from_preset(preset_dir, dtype="{policy}")   # proven: '
            "saved and loaded back so, every dtype and output as before"
        )
        if proven
        else "",
        proven=proven,
        before=FixMeasure(finding=True, at=trip.format),
        after=FixMeasure(
            finding=not proven, at=typed.format, error=typed.error.type if typed.error else ""
        ),
        tried=(
            f"{typed.format}: "
            + ("unchanged" if proven else f"{typed.outcome}, {len(typed.dtype_changes)} changes"),
        ),
    )
