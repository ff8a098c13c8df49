"""HTML views: the notebook cards of a probe, a probe set, a survey, a promotion table and an
audit report, and a survey's standalone page. They lay out what the records say and compute no
dtype fact themselves."""

from __future__ import annotations

from dtype_explorer.records import (
    KINDS,
    ROW_COLUMNS,
    UNSUPPORTED,
    AuditReport,
    Expectation,
    Finding,
    FixProof,
    LayerCall,
    LayerDamage,
    ProbeResult,
    ProbeSet,
    PromotionCell,
    PromotionTable,
    Survey,
    TraceStep,
    engine_label,
)
from dtype_explorer.views import _quantize
from dtype_explorer.views._as_code import code_html
from dtype_explorer.views._figures import survey_figure, what_was_surveyed
from dtype_explorer.views._fit import fit_steps_html
from dtype_explorer.views._graph_svg import model_graph_svg
from dtype_explorer.views._markup import (
    ERROR,
    STYLE,
    badge,
    chip,
    clip,
    e,
    floatx_text,
    trace_step_item,
)
from dtype_explorer.views._palette import color, fill_style
from dtype_explorer.views._svg import cast_path_svg
from dtype_explorer.views._text import PRECISION_SHOWN


def result_html(result: ProbeResult) -> str:
    """The notebook card of one probe."""
    code = code_html(result.as_code())
    return f"{STYLE}<div class='dx-card'>{_result_body(result)}{code}</div>"


def _result_body(result: ProbeResult, *, header: bool = True) -> str:
    spec = result.spec
    parts = []
    if header:
        cached = " · cached" if result.cached else ""
        parts.append(
            "<div class='dx-head'>"
            f"<span class='dx-title'>{e(spec.target)}</span>"
            f"<span class='dx-meta'>{e(', '.join(spec.input_dtypes))} · policy "
            f"{e(spec.policy)}{floatx_text(spec.floatx)}"
            f"{f' · quantize {e(spec.quantize)}' if spec.quantize else ''} · {e(result.backend)} "
            f"({e(result.device)}){cached}</span>{badge(result.shown_verdict)}</div>"
        )
    if spec.engine:  # the Keras that answered, a nightly build with its date
        parts.append(f"<div class='dx-meta'>Engine <b>{e(engine_label(spec.engine))}</b></div>")
    if spec.mode != "call":
        parts.append(
            f"<div class='dx-meta'>Mode <b>{e(spec.mode)}</b>: {e(result.execution)}</div>"
        )
    if result.supplied:
        items = "; ".join(e(s.text()) for s in result.supplied)
        parts.append(f"<div class='dx-meta dx-supplied'>supplied by dtype-explorer: {items}</div>")
    parts.append(cast_path_svg(result))
    parts.append(trace_html(result))
    if result.trace_note:
        parts.append(f"<div class='dx-meta'>Op trace: {e(result.trace_note)}</div>")
    parts.append(_views_table(result))
    parts.append(expectations_html(result))
    if result.basis:
        items = "".join(f"<li>{e(line)}</li>" for line in result.basis)
        parts.append(f"<div class='dx-meta'>Why (documented rule):</div><ul>{items}</ul>")
    if result.unsupported:  # this backend cannot run the question: said, not an error
        parts.append(f"<div class='dx-banner'>⊘ {e(result.headline)}</div>")
    elif result.error is not None:
        parts.append(
            f"<details open><summary>{e(result.error.type)} "
            f"(in {e(result.error.where)})</summary><pre>{e(result.error.message)}</pre>"
            "</details>"
        )
    parts.append(_quantize.layer_quantization_html(result.quantization))
    if result.variables:
        rows = "".join(
            f"<tr><td>{e(name)}</td><td>{chip(v.stored)}</td><td>{chip(v.read)}</td>"
            f"<td>{'yes' if v.autocast else 'no'}</td></tr>"
            for name, v in result.variables.items()
        )
        parts.append(
            "<details><summary>Variables</summary><table><tr><th>variable</th><th>stored</th>"
            f"<th>read in call()</th><th>autocast</th></tr>{rows}</table></details>"
        )
    if result.numerics is not None:
        parts.append(f"<div class='dx-meta'>Numerics: {e(_numerics_text(result))}</div>")
        parts.extend(
            f"<div class='dx-banner'>A right dtype with wrong numbers: {e(f.text())}</div>"
            for f in result.numerics.findings
        )
    if result.fit is not None:
        parts.append(_fit_html(result))
    parts.append(_environment_html(result))
    return "".join(parts)


def _environment_html(result: ProbeResult) -> str:
    """The card's footer: the device and the settings that produced the numbers, the
    precision asked for and the op's kernel path (``""`` when none was read)."""
    if not result.environment_text and not result.kernel:
        return ""
    asked = f" · precision={e(result.spec.precision)} asked" if result.spec.precision else ""
    kernel = f" · kernel {e(result.kernel)}" if result.kernel else ""
    said = f"{e(result.environment_text)}{asked}{kernel}"
    return f"<div class='dx-meta dx-env'>Ran with: {said}</div>"


def _fit_html(result: ProbeResult) -> str:
    """The training step: loss, optimizer, loss scaling, each gradient, variables after."""
    fit = result.fit
    assert fit is not None
    rows = "".join(
        f"<tr><td>{e(g.name)}</td><td>{chip(g.dtype)}</td><td>{chip(g.variable_dtype)}</td>"
        f"<td{f' style=color:{ERROR}' if g.nonfinite else ''}>{g.nonfinite}</td>"
        f"<td>{chip(fit.variables_after.get(g.name))}</td></tr>"
        for g in fit.gradients
    )
    warned = "".join(f"<div class='dx-meta'>Keras warned: {e(w)}</div>" for w in fit.warnings)
    return (
        f"<details open><summary>Training step: {e(fit.text())}</summary><table><tr>"
        "<th>variable</th><th>gradient</th><th>variable dtype</th><th>inf/NaN</th>"
        f"<th>after the step</th></tr>{rows}</table>{warned}</details>"
    )


def trace_html(result: ProbeResult) -> str:
    """The op trace of the call as a list: steps that change a dtype edged like the cast
    path's changed edges, the first inf/NaN made from finite values in the error colour, each
    step's line linked (Keras's own lines to its repository at the installed version)."""
    steps = result.call_trace()
    if not steps:
        return ""
    items = "".join(_trace_item(step) for step in steps)
    built = len(result.trace) - len(steps)
    more = f"; {built} more while building the layer" if built else ""
    if result.trace_dropped:
        more += f"; {result.trace_dropped} more not recorded"
    first = result.first_nonfinite_step()
    alarm = f" · first inf/NaN at #{first.index} {e(first.op)}" if first is not None else ""
    is_open = " open" if first is not None or len(steps) <= 8 else ""
    return (
        f"<details class='dx-trace-box'{is_open}><summary>Inside the call: {len(steps)} op(s)"
        f"{more}{alarm}</summary><ol class='dx-trace'>{items}</ol></details>"
    )


def _trace_item(step: TraceStep) -> str:
    meta = f" <span class='dx-meta'>kernel: {e(step.kernel)}</span>" if step.kernel else ""
    return trace_step_item(step, meta, _source_html(step))


def _source_html(step: TraceStep) -> str:
    src = step.source
    if src is None:
        return ""
    where = e(src.short)
    link = (
        f"<a href='{e(src.url)}' target='_blank' rel='noopener'>{where}</a>"
        if src.url
        else f"<span title='{e(src.file)}'>{where}</span>"
    )
    return f"<span class='dx-src'>{link} <code>{e(clip(src.text, 100))}</code></span>"


def _views_table(result: ProbeResult) -> str:
    observed = result.output_dtype if result.ok else None
    views = [
        ("documented", result.documented_dtype, "what Keras's rules say"),
        ("declared", result.declared_dtype, "what Keras says symbolically"),
        ("observed", observed, "what the eager call returned"),
    ]
    cells = []
    for name, dtype, tip in views:
        odd = dtype is not None and observed is not None and dtype != observed
        if name == "observed" and not result.ok:
            cells.append(f"<td title='{tip}'>raised</td>")
        else:
            cells.append(f"<td>{chip(dtype, odd=odd, title=tip)}</td>")
    head = "".join(f"<th>{name}</th>" for name, _, _ in views)
    return f"<table><tr>{head}</tr><tr>{''.join(cells)}</tr></table>"


def expectations_html(result: ProbeResult) -> str:
    """Every expectation side by side: who says which dtype and why; the one the verdict uses
    is marked, the ones naming another dtype are flagged; a verdict per output when there are
    several; Keras's rules disagreeing as a banner."""
    if not result.expectations:
        return ""
    odd = {id(x) for x in result.disagreements()}

    def said(x: Expectation) -> str:
        if x.dtype:
            return chip(x.dtype, odd=id(x) in odd)
        return f"<span title='{e(x.why)}'>{e(x.shown)}</span>"

    rows = "".join(
        f"<tr><td>{e(x.name)}{' <b>(verdict)</b>' if x.source == result.expected_by else ''}"
        f"</td><td>{said(x)}</td><td>{e(clip(x.why, 110))}</td></tr>"
        for x in result.expectations
    )
    html = (
        "<details open><summary>Expectations</summary><table><tr><th>who</th><th>dtype</th>"
        f"<th>why</th></tr>{rows}</table></details>"
    )
    disagree = result.rules_disagree()
    if disagree:
        html += f"<div class='dx-banner'>{e(disagree)}</div>"
    if len(result.output_verdicts) > 1:
        cells = "".join(
            f"<tr><td>#{i}</td><td>{chip(dtype)}</td><td>{badge(verdict)}</td></tr>"
            for i, (dtype, verdict) in enumerate(zip(result.output_dtypes, result.output_verdicts))
        )
        html += f"<table><tr><th>output</th><th>observed</th><th>verdict</th></tr>{cells}</table>"
    return html


def _numerics_text(result: ProbeResult) -> str:
    n = result.numerics
    if n is None:
        return ""
    bits = [f"{n.nonfinite_from_finite} inf/NaN from finite input of {n.output_count} values"]
    if n.max_abs_output is not None:
        bits.append(f"max |output| {n.max_abs_output:.4g}")
    if n.max_rel_error is not None:
        bits.append(f"relative error {n.max_rel_error:.3g} against {n.reference_dtype}")
    if n.note:
        bits.append(n.note)
    return "; ".join(bits)


def probe_set_html(probe_set: ProbeSet) -> str:
    """The notebook card of one spec on several backends: a row per backend, a banner when
    they diverge, and each backend's full card folded below."""
    results = list(probe_set)
    if not results:
        return f"{STYLE}<div class='dx-card'>no results</div>"
    spec = results[0].spec
    verdict = probe_set.verdict
    shown = probe_set.shown_verdict  # no ✓ next to wrong values
    head = (
        "<div class='dx-head'>"
        f"<span class='dx-title'>{e(spec.target)}</span>"
        f"<span class='dx-meta'>{e(', '.join(spec.input_dtypes))} · policy {e(spec.policy)}"
        f"{floatx_text(spec.floatx)} · {len(results)} {e(probe_set.axis)}</span>"
        f"{badge(shown)}</div>"
    )
    banner = ""
    label = probe_set.label
    if verdict == "diverges":
        said = " · ".join(
            f"<b>{e(label(r))}</b> {e(r.outcome)}" for r in results if not r.unsupported
        )
        who = "Backends" if probe_set.axis == "backends" else probe_set.axis.capitalize()
        banner = f"<div class='dx-banner'>{e(who)} disagree: {said}</div>"
    apart = probe_set.value_divergence()
    if apart is not None:
        banner += f"<div class='dx-banner'>Numbers diverge: {e(apart.message)}</div>"
    part = probe_set.first_divergence()
    if part is not None:
        said = " · ".join(f"<b>{e(b)}</b> {e(o)}" for b, o in part.outcomes.items())
        banner += f"<div class='dx-banner'>Traces part at <code>{e(part.op)}</code>: {said}</div>"
    rows = []
    for r in results:
        error = r.headline if r.unsupported else r.error_text()
        status = UNSUPPORTED if r.unsupported else r.status
        rows.append(
            f"<tr><td><b>{e(label(r))}</b></td><td>{e(status)}</td>"
            f"<td>{chip(r.output_dtype if r.ok else None)}</td>"
            f"<td>{chip(r.documented_dtype)}</td><td>{chip(r.declared_dtype)}</td>"
            f"<td>{badge(r.shown_verdict)}</td><td style='white-space:nowrap'>{_path_chips(r)}</td>"
            f"<td title='{e(error)}'>{e(clip(error, 60))}</td></tr>"
        )
    table = (
        f"<table><tr><th>{'backend' if probe_set.axis == 'backends' else 'run'}</th>"
        "<th>status</th><th>observed</th><th>documented</th>"
        f"<th>declared</th><th>verdict</th><th>cast path</th><th>error</th></tr>{''.join(rows)}"
        "</table>"
    )
    details = "".join(
        f"<details><summary>{e(label(r))}: details</summary>"
        f"{_result_body(r, header=False)}</details>"
        for r in results
    )
    code = code_html(probe_set.as_code())
    return f"{STYLE}<div class='dx-card'>{head}{banner}{table}{details}{code}</div>"


def _path_chips(result: ProbeResult) -> str:
    """The changed steps of a cast path as chips: ``uint8 -> float32 -> float32``."""
    chips = [chip(s.dtype, title=f"{s.stage}: {s.note}") for s in result.notable_steps()]
    if not result.ok and not result.unsupported:
        chips.append("<span class='dx-meta'>raises</span>")
    return " → ".join(chips)


def survey_summary_html(survey: Survey) -> str:
    """Counts per class and policy, with the survey's scope (the notebook repr)."""
    counts = survey.counts()
    head = "".join(f"<th>{e(p)}</th>" for p in counts.columns)
    rows = "".join(
        f"<tr><td><span class='dx-chip' style='{fill_style('survey_classes', c)}'>"
        f"{e(c)}</span></td>" + "".join(f"<td>{int(v)}</td>" for v in counts.loc[c]) + "</tr>"
        for c in counts.index
    )
    scope = (
        f"{survey.plan_text()}, each on {len(survey.backends)} "
        f"backend{'s' if len(survey.backends) != 1 else ''} "
        f"({', '.join(survey.backends)}): {len(survey.results)} probes in {survey.elapsed_s:g} s"
    )
    return (
        f"{STYLE}<div class='dx-card'><div class='dx-head'>"
        f"<span class='dx-title'>{what_was_surveyed(survey.targets)}</span>"
        f"<span class='dx-meta'>{e(scope)}</span>"
        f"</div><table><tr><th>cells</th>{head}</tr>{rows}</table></div>"
    )


def survey_html(survey: Survey) -> str:
    """A standalone HTML page: scope, counts, the heatmap and the cells worth a look."""
    figure = survey_figure(survey).to_html(full_html=False, include_plotlyjs=True)
    frame = survey.to_frame()
    notable = frame[frame["classification"].isin(["diverges", "declared-mismatch"])]
    table = notable.to_html(index=False, border=0, classes="dx-table") if len(notable) else ""
    first = {r.backend: r for r in reversed(survey.results)}  # one result per backend
    versions = {k: v for r in first.values() for k, v in r.versions.items()}
    meta = " · ".join(f"{k} {v}" for k, v in sorted(versions.items()))
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>dtype-explorer survey</title>"
        f"</head><body style='margin:16px'>{survey_summary_html(survey)}"
        f"<div class='dx-card'><span class='dx-meta'>created {e(survey.created)} · {e(meta)}"
        f"</span></div>{figure}"
        + (
            f"<div class='dx-card'><b>Diverging or declared-mismatch cells</b>{table}</div>"
            if table
            else ""
        )
        + "</body></html>"
    )


def promotion_html(table: PromotionTable) -> str:
    """Summary card of a promotion table: scope, cells per kind, the disagreements."""
    cells = table.cells()
    counts = {k: sum(c.kind == k for c in cells) for k in KINDS}
    count_chips = " ".join(
        f"<span class='dx-chip' style='{fill_style('promotion_kinds', k)}'>{e(k)}: {n}</span>"
        for k, n in counts.items()
    )
    worst = [c for c in cells if c.kind in ("keras-disagrees", "backend-specific")][:40]
    rows = "".join(
        f"<tr><td>{e(c.lhs)}</td><td>{e(c.rhs)}</td><td>{chip(c.shown)}</td><td>{e(c.kind)}</td>"
        f"<td>{e(_who_says_text(c))}</td></tr>"
        for c in worst
    )
    refs = ", ".join(f"{k} {v}" for k, v in table.reference_versions.items())
    body = (
        "<table><tr><th>lhs</th><th>rhs</th><th>documented</th><th>kind</th><th>who says what</th>"
        f"</tr>{rows}</table>"
        if rows
        else ""
    )
    return (
        f"{STYLE}<div class='dx-card'><div class='dx-head'>"
        f"<span class='dx-title'>{e(table.op)} promotion table</span><span class='dx-meta'>"
        f"{len(table.dtypes)}x{len(table.dtypes)} dtypes · floatx {e(table.floatx)} · backends "
        f"{e(', '.join(table.backends))} · references {e(refs)}</span></div>"
        f"<div>{count_chips}</div>{body}</div>"
    )


def _who_says_text(cell: PromotionCell) -> str:
    return "; ".join(f"{value}: {', '.join(who)}" for value, who in cell.who_says().items())


# ------------------------------------------------------------------------------ audits


def audit_html(report: AuditReport) -> str:
    """A notebook rendering: a styled dtype-flow table and the findings with their fixes."""
    flagged = {f.path: f.severity for f in reversed(report.findings)}
    errors = {(d.path, d.call_index): d for d in reversed(report.damage)}
    column = f"error vs {report.damage[0].reference}" if report.damage else ""
    head = "".join(f"<th>{e(c)}</th>" for c in (*ROW_COLUMNS, column) if c)
    body = "".join(
        _html_row(call, flagged.get(call.path), errors.get((call.path, call.call_index)), column)
        for call in report.layers
    )
    findings = "".join(_html_finding(f) for f in report.findings) or (
        "<p>No findings: no dtype hazards in this forward pass.</p>"
    )
    findings += _float32_set_html(report.float32_set)
    notes = "".join(f"<p><i>{e(n)}</i></p>" for n in report.notes)
    how = ""
    if report.predict is not None:
        diffs = "".join(f"<li>{e(d.text())}</li>" for d in report.predict.differences)
        how = f"<p>{e(report.predict.text())}</p>" + (f"<ul>{diffs}</ul>" if diffs else "")
    if report.fit is not None:
        grads = "".join(
            f"<li><code>{e(g.name)}</code>: {e(g.dtype)} (variable {e(g.variable_dtype)})"
            + (f", <b>{g.nonfinite} inf/NaN</b>" if g.nonfinite else "")
            + "</li>"
            for g in report.fit.gradients
        )
        how = (
            f"<p>Training step ({e(report.fit.execution)}): {e(report.fit.text())}</p>"
            f"<ul>{grads}</ul>{fit_steps_html(report.fit)}"
        )
    graph = model_graph_svg(report.graph, report.findings) if report.graph else ""
    if graph:  # scrolls within the card: a 100-layer model is a tall graph
        graph = (
            "<details open><summary>Model graph (layers by compute dtype, edges by tensor "
            "dtype; <code>--widget</code> opens its blocks)</summary>"
            f'<div style="max-height:560px;overflow:auto">{graph}</div></details>'
        )
    return (
        f'{STYLE}<div class="dx-card dx-audit"><h4>{e(report.summary())}</h4>{graph}'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{how}"
        f"{_quantize.audit_extras_html(report)}{_precision_html(report)}"
        f"<h4>Findings</h4>{findings}{notes}{code_html(report.as_code())}</div>"
    )


def _damage_cell(damage: LayerDamage) -> str:
    """A layer's error against the reference, in the audit table: ``rel 1.2e-03, 58 dB``."""
    sqnr = "exact" if damage.sqnr_db is None else f"{damage.sqnr_db:.0f} dB"
    return f"rel {damage.rel_rms:.1e}, {sqnr}"


def _precision_html(report: AuditReport) -> str:
    """ "Where precision goes" (``AuditReport.precision_goes``), the largest error first."""
    if not report.damage:
        return ""
    ranked, jump = report.precision_goes()
    first = f"<p>The error first jumps at <code>{e(jump)}</code>.</p>" if jump else ""
    items = "".join(f"<li>{e(d.text())}</li>" for d in ranked[:PRECISION_SHOWN])
    return (
        f"<details open><summary>Where precision goes (against the model in "
        f"{e(report.damage[0].reference)})</summary>{first}<ol>{items}</ol></details>"
    )


def _html_row(
    call: LayerCall, severity: str | None, damage: LayerDamage | None, column: str
) -> str:
    row = {**call.row(), column: "" if damage is None else _damage_cell(damage)}
    cells = []
    for name in (*ROW_COLUMNS, column) if column else ROW_COLUMNS:
        text = e(row[name])
        if name == "path":
            name = e(call.path.rsplit("/", 1)[-1])
            text = f'<span style="padding-left:{call.depth * 1.2}em">{name}</span>'
        elif name == "received" and row["given"] and row["given"] != row["received"]:
            text = f"<b>{text}</b>"
        cells.append(f"<td>{text}</td>")
    colour = color("severities", severity) if severity else "transparent"
    style = f"border-left:4px solid {colour}"
    return f'<tr style="{style}" title="{e(call.path)}">{"".join(cells)}</tr>'


def _proof_html(proof: FixProof) -> str:
    """A proof's summary, then its other lines as a list."""
    head, *rest = proof.lines()
    items = "".join(f"<li>{e(line.strip())}</li>" for line in rest)
    return f"<div class='dx-meta'>{e(head)}" + (f"<ul>{items}</ul>" if items else "") + "</div>"


def _float32_set_html(proof: FixProof | None) -> str:
    """The combined "keep these layers in float32" set (``AuditReport.float32_set``)."""
    if proof is None:
        return ""
    code = f"<pre><code>{e(proof.change)}</code></pre>" if proof.proven and proof.change else ""
    return (
        '<div class="dx-finding"><b>Keep these layers in float32</b> (one set for the '
        f"findings it covers){code}{_proof_html(proof)}</div>"
    )


def _html_finding(finding: Finding) -> str:
    colour = color("severities", finding.severity)
    fix = f"<pre><code>{e(finding.fix)}</code></pre>" if finding.fix else ""
    if finding.proof is not None:  # the fix run on a copy: before and after, or why not
        fix += _proof_html(finding.proof)
    step = ""
    if finding.step is not None and finding.step.source is not None:
        step = (
            f"<div class='dx-meta'>first at <code>{e(finding.step.op)}</code> "
            f"{_source_html(finding.step)}</div>"
        )
    return (
        f'<div class="dx-finding" style="border-left:4px solid {colour}">'
        f'<b style="color:{colour}">{e(finding.severity)}</b> '
        f"<code>{e(finding.heading())}</code> at <code>{e(finding.path)}</code>"
        f"<p>{e(finding.message)}</p>{step}{fix}</div>"
    )
