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

from typing import TYPE_CHECKING

from dtype_explorer.views._markup import e

if TYPE_CHECKING:  # annotations only: a probe's text imports no audit record
    from dtype_explorer.records import (
        AuditReport,
        LayerQuantization,
        QuantizationReport,
        RoundTripReport,
    )

_COLUMNS = ("path", "layer", "status", "policy", "stored", "bytes", "output", "error")


def quantization_text(report: QuantizationReport) -> str:
    """The report's line, then one line per layer (its compute path indented below it), then
    Keras's own ``quantization_summary()`` where it has one, and whether it agrees."""
    lines = [report.text()]
    for layer in report.layers:
        row = layer.row()
        cells = [row[c] for c in _COLUMNS if row[c]]
        lines.append("  " + "  ".join(cells))
        lines += [f"      {step}" for step in layer.steps]
    if report.keras_summary is not None:  # Keras's own, beside the rows, as Keras wrote it
        lines.append(report.summary_text())
        lines += [f"  | {line}" for line in report.keras_summary.splitlines()]
    lines += [f"  Keras: {said}" for said in report.keras_warnings]
    return "\n".join(lines)


def roundtrip_text(report: RoundTripReport) -> str:
    return "\n".join(f"round trip {line}" for line in report.lines())


def quantization_html(report: QuantizationReport) -> str:
    """A table of the layers, the compute path in its own column."""
    head = "".join(f"<th>{e(c)}</th>" for c in (*_COLUMNS, "compute path"))
    body = "".join(
        "<tr>"
        + "".join(f"<td>{e(layer.row()[c])}</td>" for c in _COLUMNS)
        + f"<td>{'<br>'.join(e(s) for s in layer.steps)}</td></tr>"
        for layer in report.layers
    )
    keras = (
        f"<details><summary>{e(report.summary_text())}</summary>"
        f"<pre>{e(report.keras_summary)}</pre></details>"
        if report.keras_summary is not None
        else ""
    )
    keras += "".join(f"<div class='dx-meta'>Keras: {e(w)}</div>" for w in report.keras_warnings)
    return (
        f"<h4>{e(report.text())}</h4><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>{keras}"
    )


def roundtrip_html(report: RoundTripReport) -> str:
    items = "".join(f"<li>{e(line)}</li>" for line in report.lines())
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


def layer_quantization_lines(q: LayerQuantization | None) -> list[str]:
    """A probe's quantized layer: its line, the stored variables, the compute path.

    >>> from dtype_explorer.records import LayerQuantization, StoredVariable
    >>> q = LayerQuantization(mode="int8", asked="int8", policy="int8_from_float32",
    ...     variables=(StoredVariable(name="kernel", dtype="int8", shape=(4, 4), bytes=16),),
    ...     steps=("integer matmul: int8 x int8 → int32",))
    >>> print("\\n".join(layer_quantization_lines(q)))
      quantize('int8'): policy int8_from_float32, 16 bytes stored
        stored kernel: int8[4x4], 16 bytes
        path   integer matmul: int8 x int8 → int32
    """
    if q is None:
        return []
    lines = [f"  {q.text()}"]
    lines += [f"    stored {v.text()}" for v in q.variables]
    lines += [f"    path   {step}" for step in q.steps]
    return lines


def layer_quantization_html(q: LayerQuantization | None) -> str:
    """A probe card's quantization block: the stored variables' table, the compute path."""
    if q is None:
        return ""
    rows = "".join(
        f"<tr><td>{e(v.name)}</td><td>{e(v.dtype)}</td><td>{e('x'.join(map(str, v.shape)))}"
        f"</td><td>{v.bytes}</td><td>{'int4 packed' if v.packed else ''}</td></tr>"
        for v in q.variables
    )
    table = (
        "<table><tr><th>variable</th><th>dtype</th><th>shape</th><th>bytes</th><th></th></tr>"
        f"{rows}</table>"
        if rows
        else ""
    )
    steps = "".join(f"<li>{e(step)}</li>" for step in q.steps)
    path = f"<div class='dx-meta'>Compute path:</div><ol>{steps}</ol>" if steps else ""
    return (
        f"<details open class='dx-quantization'><summary>{e(q.text())}</summary>{table}{path}"
        "</details>"
    )
