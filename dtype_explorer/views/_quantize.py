"""The views of a quantization report and of round trips (``AuditReport.quantization``,
``AuditReport.roundtrip``): the rows are computed on the records; here they are laid out.

>>> from dtype_explorer.records import QuantizationReport, QuantizedLayer
>>> row = QuantizedLayer(path="m/d", layer_class="Dense", status="quantized",
...     policy="int8_from_float32", steps=("integer matmul: int8 x int8 -> int32",))
>>> print(quantization_text(QuantizationReport(mode="int8", asked="int8", layers=(row,))))
quantize('int8'): 1 layers quantized, 0 skipped; 0 bytes stored (float: 0, 0 saved)
  m/d  Dense  quantized  int8_from_float32
      integer matmul: int8 x int8 -> int32
"""

from __future__ import annotations

from dtype_explorer.records import AuditReport, QuantizationReport, RoundTripReport
from dtype_explorer.views._markup import e

_COLUMNS = ("path", "layer", "status", "policy", "stored", "bytes", "output", "error")


def quantization_text(report: QuantizationReport) -> str:
    """The report's line, then one line per layer (its compute path indented below it)."""
    lines = [report.text()]
    for layer in report.layers:
        row = layer.row()
        cells = [row[c] for c in _COLUMNS if row[c]]
        lines.append("  " + "  ".join(cells))
        lines += [f"      {step}" for step in layer.steps]
    return "\n".join(lines)


def roundtrip_text(report: RoundTripReport) -> str:
    return "\n".join(f"round trip {trip.text()}" for trip in report.trips)


def quantization_html(report: QuantizationReport) -> str:
    """A table of the layers, the compute path in its own column."""
    head = "".join(f"<th>{e(c)}</th>" for c in (*_COLUMNS, "compute path"))
    body = "".join(
        "<tr>"
        + "".join(f"<td>{e(layer.row()[c])}</td>" for c in _COLUMNS)
        + f"<td>{'<br>'.join(e(s) for s in layer.steps)}</td></tr>"
        for layer in report.layers
    )
    return (
        f"<h4>{e(report.text())}</h4><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def roundtrip_html(report: RoundTripReport) -> str:
    items = "".join(f"<li>{e(trip.text())}</li>" for trip in report.trips)
    return f"<h4>Round trips</h4><ul>{items}</ul>"


def audit_extras(report: AuditReport) -> list[str]:
    """The lines an audit's text shows for its quantization and round trips."""
    lines = []
    if report.quantization is not None:
        lines += ["", quantization_text(report.quantization)]
    if report.roundtrip is not None:
        lines += ["", roundtrip_text(report.roundtrip)]
    return lines


def audit_extras_html(report: AuditReport) -> str:
    html = "" if report.quantization is None else quantization_html(report.quantization)
    return html + ("" if report.roundtrip is None else roundtrip_html(report.roundtrip))
