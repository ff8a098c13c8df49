"""Plain-text views, for terminals, logs and ``print``: a probe's cast path and views, and an
audit's dtype-flow table with its findings."""

from __future__ import annotations

from dtype_explorer.records import ROW_COLUMNS, AuditReport, ProbeResult


def format_result(result: ProbeResult) -> str:
    """A readable multi-line account of one probe: the cast path and the three views."""
    spec = result.spec
    lines = [
        f"{spec.target} on {result.backend} ({result.device}), policy {spec.policy}: "
        f"{result.status}, {result.verdict}"
    ]
    for step in result.cast_path:
        label = (
            step.name
            if step.name is not None
            else f"#{step.index}"
            if step.index is not None
            else ""
        )
        mark = "*" if step.changed else " "
        lines.append(f"  {step.stage:<10}{label:<24}{mark}{step.dtype:<14}{step.note}")
    lines.append(
        f"  documented {result.documented_dtype or '-'} | declared {result.declared_dtype or '-'}"
        f" | observed {result.output_dtype or '-'}"
    )
    lines.extend(f"  because: {line}" for line in result.basis)
    if result.error is not None:
        lines.append(f"  error ({result.error.where}): {result.error.type}: {result.error.message}")
    if result.numerics is not None:
        n = result.numerics
        err = (
            f"{n.max_rel_error:.3g} vs {n.reference_dtype}" if n.max_rel_error is not None else "-"
        )
        lines.append(
            f"  numerics: {n.nonfinite_from_finite} inf/NaN from finite input; rel. error {err}"
        )
    return "\n".join(lines)


def audit_text(report: AuditReport) -> str:
    """A terminal rendering: the summary, the dtype-flow table, then the findings."""
    lines = [report.summary()]
    if report.sample:
        lines.append("sample: " + ", ".join(f"{t.shape} {t.dtype}" for t in report.sample))
    rows = [{c: str(v) for c, v in call.row().items()} for call in report.layers]
    for row, call in zip(rows, report.layers, strict=True):
        row["path"] = "  " * call.depth + call.path.rsplit("/", 1)[-1]
    widths = {c: min(44, max([len(c), *(len(r[c]) for r in rows)])) for c in ROW_COLUMNS}
    for cells in [{c: c for c in ROW_COLUMNS}, *rows]:
        lines.append(
            "  ".join(cells[c][: widths[c]].ljust(widths[c]) for c in ROW_COLUMNS).rstrip()
        )
    lines.insert(len(lines) - len(rows) - 1, "")
    if report.findings:
        lines += ["", "Findings:"]
    for finding in report.findings:
        lines += [
            f"[{finding.severity}] {finding.kind} at {finding.path}",
            f"    {finding.message}",
        ]
        if finding.fix:
            lines += ["    fix:", *(f"      {line}" for line in finding.fix.splitlines())]
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)
