"""Plain-text views, for terminals, logs and ``print``: a probe's cast path and views, and an
audit's dtype-flow table with its findings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer.records import engine_label
from dtype_explorer.views import _quantize
from dtype_explorer.views._fit import fit_steps_lines

if TYPE_CHECKING:  # annotations only: a cached probe's text imports no audit record
    from dtype_explorer.records import AuditReport, Numerics, ProbeResult, TraceStep


def format_result(result: ProbeResult, *, trace: bool = True, detail: bool = False) -> str:
    """A readable multi-line account of one probe: the cast path, the three views, and the op
    trace of the call (``trace``; ``detail`` adds each step's link and the ops it ran)."""
    spec = result.spec
    lines = [
        f"{spec.target} on {result.backend} ({result.device}), policy {spec.policy}"
        f"{f', quantize {spec.quantize}' if spec.quantize else ''}: "
        f"{result.status}, {result.shown_verdict}"
    ]
    if spec.engine:  # the Keras that answered, a nightly build with its date
        lines.append(f"  engine {engine_label(spec.engine)}")
    if spec.mode != "call" or result.execution not in ("", "eager call"):
        lines.append(f"  mode {spec.mode}: {result.execution or '-'}")
    if result.supplied:
        lines.append(f"  {result.supplied_text()}")
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
    lines.extend(expectation_lines(result))
    if result.unsupported:
        lines.append(f"  ⊘ {result.headline}")
    elif result.error is not None:
        lines.append(f"  error ({result.error.where}): {result.error.type}: {result.error.message}")
    lines.extend(_quantize.layer_quantization_lines(result.quantization))
    lines.extend(f"  warning: {text}" for text in result.warnings)
    if result.numerics is not None:
        n = result.numerics
        lines.append(f"  numerics: {numerics_sentence(n)}")
        lines.extend(f"  !! wrong numbers: {f.text()}" for f in n.findings)
    if result.fit is not None:
        fit = result.fit
        lines.append(f"  fit: {fit.text()}")
        for g in fit.gradients:
            bad = f"  !! {g.nonfinite} inf/NaN" if g.nonfinite else ""
            lines.append(
                f"    gradient {g.name:<20} {g.dtype:<10} (variable {g.variable_dtype}){bad}"
            )
        after = ", ".join(f"{name} {dtype}" for name, dtype in fit.variables_after.items())
        lines.append(f"    variables after the step: {after or '-'}")
        lines.extend(f"    Keras warned: {w}" for w in fit.warnings)
    if trace and result.trace:
        lines.extend(format_trace(result, detail=detail))
    if trace and result.trace_note:
        lines.append(f"  trace: {result.trace_note}")
    lines.extend(environment_lines(result))
    return "\n".join(lines)


def environment_lines(result: ProbeResult) -> list[str]:
    """The settings that produced the numbers (``environment_text``), the precision asked for
    and the op's kernel path, each where known."""
    asked = f" (precision={result.spec.precision} asked)" if result.spec.precision else ""
    lines = [f"  ran with: {result.environment_text}{asked}"] if result.environment_text else []
    if result.kernel:
        lines.append(f"  kernel: {result.kernel}")
    return lines


def expectation_lines(result: ProbeResult) -> list[str]:
    """Every expectation side by side (``*`` the one the verdict uses, ``!`` one that names
    another dtype), Keras's rules disagreeing, and a verdict per output when there are several."""
    if not result.expectations:
        return []
    odd = {id(x) for x in result.disagreements()}
    said = "  ".join(
        ("*" if x.source == result.expected_by else "!" if id(x) in odd else "")
        + f"{x.name} {x.shown}"
        for x in result.expectations
    )
    lines = [f"  expected: {said}"]
    lines.extend(
        f"    {x.name}: {x.why}" for x in result.expectations if x.no_counterpart is not None
    )
    disagree = result.rules_disagree()
    if disagree:
        lines.append(f"  ! {disagree}")
    if len(result.output_verdicts) > 1:
        each = ", ".join(
            f"#{i} {dtype} {verdict}"
            for i, (dtype, verdict) in enumerate(zip(result.output_dtypes, result.output_verdicts))
        )
        lines.append(f"  per output: {each}")
    return lines


def format_trace(result: ProbeResult, *, detail: bool = False) -> list[str]:
    """The op trace of the call, one step a line with the line that ran it under it.

    ``*`` marks a step that changed a dtype, ``!!`` its flags (``TraceStep.flags``: inf/NaN
    made from finite inputs, a float16 overflow, one hidden inside it); ``detail`` adds the
    link to each Keras line and the ops each step ran itself (one level down).
    """
    steps = result.call_trace()
    built = len(result.trace) - len(steps)
    head = f"  trace: {len(steps)} op(s) in the call"
    lines = [head + (f" ({built} more while building the layer)" if built else "") + ":"]
    for step in steps:
        lines.append("  " + _step_line(step))
        lines.extend(_where(step, detail, "        "))
        if detail:
            for child in step.children:
                lines.append("        └ " + _step_line(child, numbered=False))
    if result.trace_dropped:
        lines.append(f"  ... and {result.trace_dropped} more op(s), not recorded")
    part = result.first_dtype_change()
    if part is not None:
        lines.append(f"  first dtype change: #{part.index} {part.op}: {part.change_text()}")
    first = result.first_nonfinite_step()
    if first is not None:
        lines.append(f"  first inf/NaN from finite values: #{first.index} {first.op}")
    return lines


def _step_line(step: TraceStep, *, numbered: bool = True) -> str:
    ins = ", ".join(t.text() for t in step.inputs)
    if step.cast_to:
        ins += f", dtype={step.cast_to}"
    mark = "*" if step.changes_dtype else " "
    said = f"RAISED {step.error}" if step.error else step.change_text()
    if step.conversions:
        said += f" ({', '.join(step.conversions)})"
    alarm = f"  !! {step.flag_text()}" if step.flags else ""
    alarm += f"  (kernel: {step.kernel})" if step.kernel else ""
    number = f"#{step.index:<3}" if numbered else ""
    return f"{number}{mark}{step.op}({ins}) -> {step.outcome}  [{said}]{alarm}"


def _where(step: TraceStep, detail: bool, indent: str) -> list[str]:
    if step.source is None:
        return []
    src = step.source
    lines = [f"{indent}at {src.short} in {src.function}: {src.text}"]
    if detail and src.url:
        lines.append(f"{indent}   {src.url}")
    if step.via is not None:
        lines.append(f"{indent}via {step.via.short} in {step.via.function}: {step.via.text}")
    return lines


def audit_text(report: AuditReport) -> str:
    """A terminal rendering: the summary, the dtype-flow table, then the findings. A cell
    longer than its column (44 characters at most) ends in ``…``, never cut silently."""
    columns = report.row_columns
    lines = [report.summary()]
    if report.sample:
        lines.append("sample: " + ", ".join(f"{t.shape} {t.dtype}" for t in report.sample))
    rows = audit_rows(report)
    widths = {c: min(44, max([len(c), *(len(r[c]) for r in rows)])) for c in columns}
    lines.append("")
    for cells in [{c: c for c in columns}, *rows]:
        lines.append("  ".join(_fit(cells[c], widths[c]) for c in columns).rstrip())
    lines += audit_details(report)
    return "\n".join(lines)


def audit_rows(report: AuditReport) -> list[dict[str, str]]:
    """The dtype-flow rows as text (keys: ``AuditReport.row_columns``), each path indented by
    its depth."""
    rows = [{c: str(v) for c, v in call.row().items()} for call in report.layers]
    for row, call in zip(rows, report.layers, strict=True):
        row["path"] = "  " * call.depth + call.path.rsplit("/", 1)[-1]
    return rows


def audit_details(report: AuditReport) -> list[str]:
    """What follows the dtype-flow table: ``model.predict`` and the training step, the
    findings (``[severity] kind at path``, the message, the fix) and the notes."""
    lines: list[str] = []
    if report.predict is not None:
        lines += ["", report.predict.text()]
        lines += [f"  differs: {d.text()}" for d in report.predict.differences]
    if report.fit is not None:
        run = "training run" if report.fit.steps else "training step"
        lines += ["", f"{run} ({report.fit.execution}): {report.fit.text()}"]
        lines += [
            f"  gradient {g.name}: {g.dtype} (variable {g.variable_dtype})"
            + (f", {g.nonfinite} inf/NaN" if g.nonfinite else "")
            for g in report.fit.gradients
        ]
        lines += fit_steps_lines(report.fit)
    lines += _quantize.audit_extras(report)
    lines += precision_lines(report)
    if report.findings:
        lines += ["", "Findings:"]
    for finding in report.findings:
        lines += [
            f"[{finding.severity}] {finding.heading()} at {finding.path}",
            f"    {finding.message}",
        ]
        if finding.fix:
            lines += ["    fix:", *(f"      {line}" for line in finding.fix.splitlines())]
        if finding.proof is not None:  # the fix run on a copy: before and after, or why not
            lines += [f"    {line}" for line in finding.proof.lines()]
    lines += float32_set_lines(report)
    lines += [f"note: {note}" for note in report.notes]
    return lines


def float32_set_lines(report: AuditReport) -> list[str]:
    """The combined "keep these layers in float32" set (``AuditReport.float32_set``): its
    code where it was proven, what it covers, why each layer is in it, before and after."""
    proof = report.float32_set
    if proof is None:
        return []
    lines = ["", "Keep these layers in float32 (one set for the findings it covers):"]
    if proof.proven and proof.change:
        lines += ["    fix:", *(f"      {line}" for line in proof.change.splitlines())]
    return lines + [f"    {line}" for line in proof.lines()]


#: How many layers the "where precision goes" list shows.
PRECISION_SHOWN = 5


def precision_lines(report: AuditReport) -> list[str]:
    """ "Where precision goes": the layers with the largest error against the float32 model
    (``AuditReport.precision_goes``), the first layer whose error jumps named."""
    if not report.damage:
        return []
    ranked, jump = report.precision_goes()
    reference = report.damage[0].reference
    lines = ["", f"Where precision goes (each layer's output against the model in {reference}):"]
    if jump:
        lines.append(f"  the error first jumps at {jump}")
    lines += [f"  {d.text()}" for d in ranked[:PRECISION_SHOWN]]
    if len(ranked) > PRECISION_SHOWN:
        lines.append(f"  ... {len(ranked) - PRECISION_SHOWN} more (report.damage)")
    return lines


def _fit(text: str, width: int) -> str:
    """``text`` in ``width`` characters, ending in ``…`` where it is longer.

    >>> _fit("bias: float32→float16", 18), _fit("float32", 9)
    ('bias: float32→flo…', 'float32  ')
    """
    return (text if len(text) <= width else text[: width - 1] + "…").ljust(width)


def numerics_sentence(n: Numerics) -> str:
    """The numerics of a result in plain words.

    >>> from dtype_explorer.records import Numerics
    >>> numerics_sentence(Numerics(output_count=8, max_rel_error=0.0004, reference_dtype="float64"))
    'all 8 output values finite; largest relative error against the float64 run 0.0004'
    >>> numerics_sentence(Numerics(output_count=0))
    'no output values (the call raised)'
    >>> numerics_sentence(Numerics(output_count=0, note="no number output"))
    'no output values (no number output)'
    """
    if not n.output_count:
        if n.outputs:  # outputs there, of no element
            return "no output values (the outputs are empty)"
        return f"no output values ({n.note or 'the call raised'})"
    said = (
        f"{n.nonfinite_from_finite} of {n.output_count} output values became inf/NaN from "
        "finite inputs"
        if n.nonfinite_from_finite
        else f"all {n.output_count} output values finite"
    )
    if n.max_rel_error is not None:
        said += (
            f"; largest relative error against the {n.reference_dtype} run {n.max_rel_error:.3g}"
        )
    return said
