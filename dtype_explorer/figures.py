"""Thin views: plotly figures and HTML cards. They lay out what the records say and compute
no dtype fact themselves.

* :func:`result_html` / :func:`probe_set_html`: the notebook cards of a ``ProbeResult`` and a
  ``ProbeSet`` (cast-path diagram as inline SVG, the three views, verdict, basis, error).
* :func:`survey_figure` / :func:`promotion_figure`: plotly heatmaps.
* :func:`survey_html` / :func:`survey_summary_html` / :func:`promotion_html`: pages and summaries.

Colours come from JupyterLab's CSS variables, with fallbacks for other front ends.
"""

from __future__ import annotations

import html
import itertools
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dtype_explorer.errors import first_line
from dtype_explorer.model import STAGES, CastStep, ProbeResult, ProbeSet

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from dtype_explorer.promotion import PromotionCell, PromotionTable
    from dtype_explorer.sweep import Survey, SurveyCell

CLASS_COLORS: dict[str, str] = {
    "casts-to-compute": "#4c78a8",
    "keeps-input": "#54a24b",
    "other-dtype": "#eeca3b",
    "declared-mismatch": "#f58518",
    "diverges": "#b279a2",
    "raises": "#e45756",
}
KIND_COLORS: dict[str, str] = {
    "agrees": "#dfe9d8",
    "references-differ": "#9ecae9",
    "backend-specific": "#eeca3b",
    "keras-disagrees": "#e45756",
}
VERDICT_COLORS: dict[str, str] = {
    "as-documented": "var(--jp-success-color1, #388e3c)",
    "deviates": "var(--jp-warn-color1, #f57c00)",
    "declared-mismatch": "var(--jp-warn-color1, #f57c00)",
    "undocumented": "var(--jp-ui-font-color2, #757575)",
    "error": "var(--jp-error-color1, #d32f2f)",
    "diverges": "#8e44ad",
}
_FG = "var(--jp-ui-font-color1, #212121)"
_FG2 = "var(--jp-ui-font-color2, #616161)"
_BG = "var(--jp-layout-color1, #ffffff)"
_BG2 = "var(--jp-layout-color2, #f5f5f5)"
_BORDER = "var(--jp-border-color2, #e0e0e0)"
_ACCENT = "var(--jp-warn-color1, #f57c00)"
_CSS = f"""
.dx-card {{ font-family: var(--jp-ui-font-family, system-ui, sans-serif); font-size: 13px;
  color: {_FG}; background: {_BG}; border: 1px solid {_BORDER}; border-radius: 6px;
  padding: 10px 12px; margin: 4px 0; max-width: 920px; }}
.dx-card .dx-head {{ display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }}
.dx-card .dx-title {{ font-weight: 600; font-size: 14px; }}
.dx-card .dx-meta {{ color: {_FG2}; }}
.dx-card .dx-badge {{ color: #fff; border-radius: 10px; padding: 1px 8px; font-size: 12px;
  white-space: nowrap; }}
.dx-card .dx-chip {{ display: inline-block; border-radius: 4px; padding: 0 6px; color: #fff;
  font-family: var(--jp-code-font-family, monospace); font-size: 12px; line-height: 18px;
  white-space: nowrap; }}
.dx-card table {{ border-collapse: collapse; margin: 6px 0; }}
.dx-card th, .dx-card td {{ border-bottom: 1px solid {_BORDER}; padding: 3px 8px;
  text-align: left; vertical-align: top; }}
.dx-card th {{ color: {_FG2}; font-weight: 500; }}
.dx-card .dx-odd {{ outline: 2px solid {_ACCENT}; outline-offset: 1px; }}
.dx-card pre {{ white-space: pre-wrap; background: {_BG2}; padding: 6px; border-radius: 4px;
  font-family: var(--jp-code-font-family, monospace); font-size: 12px; margin: 4px 0; }}
.dx-card ul {{ margin: 4px 0; padding-left: 20px; }}
.dx-card .dx-banner {{ border-left: 4px solid #8e44ad; background: {_BG2}; padding: 6px 8px;
  margin: 6px 0; }}
.dx-card details > summary {{ cursor: pointer; color: {_FG2}; }}
.dx-card svg text {{ font-family: var(--jp-ui-font-family, system-ui, sans-serif); }}
"""


# ------------------------------------------------------------------------------ dtype chips


def dtype_color(dtype: str | None) -> str:
    """A background colour for a dtype name, by family (16-bit floats stand out)."""
    name = dtype or ""
    if name in ("float16", "bfloat16"):
        return "#e07b1a"
    if name.startswith("float8"):
        return "#d9587a"
    if name == "float32":
        return "#3f6fa8"
    if name == "float64":
        return "#1f3a63"
    if name.startswith("uint"):
        return "#2f8f83"
    if name.startswith("int"):
        return "#3f8f3a"
    if name.startswith("complex"):
        return "#8d5fa0"
    if name.startswith("python_"):
        return "#5a7d8c"
    if name in ("bool", "string"):
        return "#7a6a5a"
    return "#8a8a8a"


def chip(dtype: str | None, *, odd: bool = False, title: str = "") -> str:
    """An inline dtype chip; ``odd`` outlines it (a value that disagrees)."""
    text = dtype if dtype is not None else "—"
    cls = "dx-chip dx-odd" if odd else "dx-chip"
    tip = f' title="{_e(title)}"' if title else ""
    return f'<span class="{cls}" style="background:{dtype_color(dtype)}"{tip}>{_e(text)}</span>'


# ---------------------------------------------------------------------------- cast path SVG

_COL_W, _CHIP_W, _CHIP_H, _NOTE_LINE, _NOTE_LINES, _TOP = 168, 124, 22, 12, 3, 22
_ROW_H = _CHIP_H + _NOTE_LINE * _NOTE_LINES + 12


def cast_path_svg(result: ProbeResult) -> str:
    """The cast path as an inline SVG: one column per stage (input, converted, autocast,
    variables, output), a chip per tensor, edges highlighted where the dtype changed, each
    step's note below its chip. A failed call ends in an error node."""
    columns: list[tuple[str, list[CastStep | None]]] = [
        (stage, list(result.steps(stage))) for stage in STAGES if result.steps(stage)
    ]
    if result.status != "ok":
        columns = [c for c in columns if c[0] != "output"] + [("output", [None])]
    if not columns:
        return ""
    # variables sit below the data rows, so the data's line to the output passes above them
    data_rows = max(len(steps) for stage, steps in columns if stage != "variables")
    first_row = {stage: data_rows if stage == "variables" else 0 for stage, _ in columns}
    rows = max(first_row[stage] + len(steps) for stage, steps in columns)
    width = _COL_W * len(columns)
    height = _TOP + rows * _ROW_H
    places: dict[tuple[int, int], tuple[float, float]] = {}
    parts: list[str] = []
    for col, (stage, steps) in enumerate(columns):
        x = col * _COL_W + (_COL_W - _CHIP_W) / 2
        parts.append(
            f'<text x="{x + _CHIP_W / 2}" y="14" text-anchor="middle" font-size="11" '
            f'fill="{_FG2}">{stage}</text>'
        )
        for row, _step in enumerate(steps):
            places[(col, row)] = (x, _TOP + (first_row[stage] + row) * _ROW_H)
    parts.extend(_edges(columns, places))
    for col, (_, steps) in enumerate(columns):
        for row, step in enumerate(steps):
            parts.append(_node(step, result, *places[(col, row)]))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" style="max-width:100%;height:auto" role="img" '
        f'aria-label="cast path">{"".join(parts)}</svg>'
    )


def _edges(
    columns: list[tuple[str, list[CastStep | None]]],
    places: dict[tuple[int, int], tuple[float, float]],
) -> list[str]:
    """Data flows input -> converted -> autocast by tensor index, then into the output (past the
    variables column, whose chips feed the output with dashed lines)."""
    stages = [stage for stage, _ in columns]
    data = [i for i, stage in enumerate(stages) if stage in ("input", "converted", "autocast")]
    parts: list[str] = []
    for a, b in itertools.pairwise(data):
        for row, step in enumerate(columns[a][1]):
            for target_row, target in enumerate(columns[b][1]):
                if step is not None and target is not None and step.index == target.index:
                    parts.append(_edge(places[(a, row)], places[(b, target_row)], step, target))
    if stages[-1] != "output":
        return parts
    out = len(columns) - 1
    outputs = columns[out][1]
    if data:
        last = data[-1]
        for row, step in enumerate(columns[last][1]):
            index = None if step is None else step.index
            target_row = next(
                (i for i, t in enumerate(outputs) if t is not None and t.index == index), 0
            )
            start, end = places[(last, row)], places[(out, target_row)]
            parts.append(_edge(start, end, step, outputs[target_row], curved=out - last > 1))
    if "variables" in stages:
        col = stages.index("variables")
        for row in range(len(columns[col][1])):
            parts.append(_edge(places[(col, row)], places[(out, 0)], None, None, dashed=True))
    return parts


def _edge(
    start: tuple[float, float],
    end: tuple[float, float],
    step: CastStep | None,
    target: CastStep | None,
    *,
    curved: bool = False,
    dashed: bool = False,
) -> str:
    """One arrow; accented when the dtype changes on the way (or the call raised)."""
    if dashed:
        colour, thick = _FG2, 1.0
    elif target is None:
        colour, thick = "var(--jp-error-color1, #d32f2f)", 2.5
    elif target.changed or (step is not None and target.dtype != step.dtype):
        colour, thick = _ACCENT, 2.5
    else:
        colour, thick = _FG2, 1.2
    x1, y1 = start[0] + _CHIP_W, start[1] + _CHIP_H / 2
    x2, y2 = end[0] - 6, end[1] + _CHIP_H / 2
    mid = (x1 + x2) / 2
    shape = f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}" if curved else f"M{x1},{y1} L{x2},{y2}"
    dash = ' stroke-dasharray="4 3"' if dashed else ""
    return (
        f'<path d="{shape}" fill="none" stroke="{colour}" stroke-width="{thick}"{dash}/>'
        f'<polygon points="{x2 - 1},{y2 - 4} {x2 + 6},{y2} {x2 - 1},{y2 + 4}" fill="{colour}"/>'
    )


def _node(step: CastStep | None, result: ProbeResult, x: float, y: float) -> str:
    if step is None:  # the call raised
        error = result.error
        label = error.type if error else result.status
        note = first_line(error.message) if error else result.status
        fill, text = "var(--jp-error-color1, #d32f2f)", label
    else:
        prefix = f"{step.name.rsplit('/', 1)[-1]}: " if step.name else ""
        fill, text, note = dtype_color(step.dtype), f"{prefix}{step.dtype}", step.note
    stroke = f' stroke="{_ACCENT}" stroke-width="2"' if step is not None and step.changed else ""
    title = _e(note if step is None or not step.name else f"{step.name}: {note}")
    lines = textwrap.wrap(note, 26)[:_NOTE_LINES]
    if len(textwrap.wrap(note, 26)) > _NOTE_LINES:
        lines[-1] = lines[-1][:23] + "..."
    notes = "".join(
        f'<text x="{x + _CHIP_W / 2}" y="{y + _CHIP_H + 12 + i * _NOTE_LINE}" font-size="10" '
        f'text-anchor="middle" fill="{_FG2}">{_e(line)}</text>'
        for i, line in enumerate(lines)
    )
    return (
        f"<g><title>{title}</title>"
        f'<rect x="{x}" y="{y}" width="{_CHIP_W}" height="{_CHIP_H}" rx="4" fill="{fill}"{stroke}/>'
        f'<text x="{x + _CHIP_W / 2}" y="{y + 15}" font-size="12" text-anchor="middle" '
        f'fill="#fff">{_e(_clip(text, 19))}</text>{notes}</g>'
    )


# ---------------------------------------------------------------------------- HTML cards


def result_html(result: ProbeResult) -> str:
    """The notebook card of one probe."""
    return f"<style>{_CSS}</style><div class='dx-card'>{_result_body(result)}</div>"


def _result_body(result: ProbeResult, *, header: bool = True) -> str:
    spec = result.spec
    parts = []
    if header:
        cached = " · cached" if result.cached else ""
        parts.append(
            "<div class='dx-head'>"
            f"<span class='dx-title'>{_e(spec.target)}</span>"
            f"<span class='dx-meta'>{_e(', '.join(spec.input_dtypes))} · policy "
            f"{_e(spec.policy)}{_floatx(spec.floatx)} · {_e(result.backend)} "
            f"({_e(result.device)}){cached}</span>{_badge(result.verdict)}</div>"
        )
    parts.append(cast_path_svg(result))
    parts.append(_views_table(result))
    if result.basis:
        items = "".join(f"<li>{_e(line)}</li>" for line in result.basis)
        parts.append(f"<div class='dx-meta'>Why (documented rule):</div><ul>{items}</ul>")
    if result.error is not None:
        parts.append(
            f"<details open><summary>{_e(result.error.type)} "
            f"(in {_e(result.error.where)})</summary><pre>{_e(result.error.message)}</pre>"
            "</details>"
        )
    if result.variables:
        rows = "".join(
            f"<tr><td>{_e(name)}</td><td>{chip(v.stored)}</td><td>{chip(v.read)}</td>"
            f"<td>{'yes' if v.autocast else 'no'}</td></tr>"
            for name, v in result.variables.items()
        )
        parts.append(
            "<details><summary>Variables</summary><table><tr><th>variable</th><th>stored</th>"
            f"<th>read in call()</th><th>autocast</th></tr>{rows}</table></details>"
        )
    if result.numerics is not None:
        parts.append(f"<div class='dx-meta'>Numerics: {_e(_numerics_text(result))}</div>")
    return "".join(parts)


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
        return f"<style>{_CSS}</style><div class='dx-card'>no results</div>"
    spec = results[0].spec
    verdict = probe_set.verdict
    head = (
        "<div class='dx-head'>"
        f"<span class='dx-title'>{_e(spec.target)}</span>"
        f"<span class='dx-meta'>{_e(', '.join(spec.input_dtypes))} · policy {_e(spec.policy)}"
        f"{_floatx(spec.floatx)} · {len(results)} backends</span>{_badge(verdict)}</div>"
    )
    banner = ""
    if verdict == "diverges":
        said = " · ".join(f"<b>{_e(r.backend)}</b> {_e(_outcome(r))}" for r in results)
        banner = f"<div class='dx-banner'>Backends disagree: {said}</div>"
    rows = []
    for r in results:
        error = f"{r.error.type}: {first_line(r.error.message)}" if r.error else ""
        rows.append(
            f"<tr><td><b>{_e(r.backend)}</b></td><td>{_e(r.status)}</td>"
            f"<td>{chip(r.output_dtype if r.ok else None)}</td>"
            f"<td>{chip(r.documented_dtype)}</td><td>{chip(r.declared_dtype)}</td>"
            f"<td>{_badge(r.verdict)}</td><td style='white-space:nowrap'>{_path_chips(r)}</td>"
            f"<td title='{_e(error)}'>{_e(_clip(error, 60))}</td></tr>"
        )
    table = (
        "<table><tr><th>backend</th><th>status</th><th>observed</th><th>documented</th>"
        f"<th>declared</th><th>verdict</th><th>cast path</th><th>error</th></tr>{''.join(rows)}"
        "</table>"
    )
    details = "".join(
        f"<details><summary>{_e(r.backend)}: details</summary>"
        f"{_result_body(r, header=False)}</details>"
        for r in results
    )
    return f"<style>{_CSS}</style><div class='dx-card'>{head}{banner}{table}{details}</div>"


def _path_chips(result: ProbeResult) -> str:
    """The changed steps of a cast path as chips: ``uint8 -> float32 -> float32``."""
    steps = [s for s in result.cast_path if s.stage == "input" or s.changed or s.stage == "output"]
    steps = [s for s in steps if s.stage != "variables"]
    chips = [chip(s.dtype, title=f"{s.stage}: {s.note}") for s in steps]
    if not result.ok:
        chips.append("<span class='dx-meta'>raises</span>")
    return " → ".join(chips)


# ------------------------------------------------------------------------------- surveys


def survey_figure(survey: Survey, policy: str | None = None) -> go.Figure:
    """Heatmap of a survey: targets x input dtypes coloured by class; a menu for policies."""
    import plotly.graph_objects as go

    if policy is not None and policy not in survey.policies:
        from dtype_explorer.errors import unknown

        raise unknown("policy in this survey", policy, survey.policies)
    policies = [policy] if policy else list(survey.policies)
    classes = list(CLASS_COLORS)
    figure = go.Figure()
    for i, name in enumerate(policies):
        z, labels, hover = [], [], []
        for target in survey.targets:
            cells = [_survey_cell(survey, target, d, name) for d in survey.input_dtypes]
            z.append([classes.index(c.classification) if c else None for c in cells])
            labels.append([_cell_label(c) for c in cells])
            hover.append([_survey_hover(c) for c in cells])
        figure.add_trace(
            _category_heatmap(
                z,
                survey.input_dtypes,
                survey.targets,
                labels,
                hover,
                CLASS_COLORS,
                classes,
                font_size=9,
                visible=i == 0,
                name=name,
            )
        )
    backends = ", ".join(survey.backends)
    figure.update_layout(
        title={"text": _survey_title(survey, policies[0]), "y": 0.995, "yanchor": "top"},
        height=max(340, 20 * len(survey.targets) + 200),
        width=max(560, 46 * len(survey.input_dtypes) + 360),
        xaxis={"side": "top", "type": "category", "title": f"input dtype  (backends: {backends})"},
        yaxis={"autorange": "reversed", "type": "category"},
        margin={"t": 170, "l": 10, "r": 10, "b": 20},
        plot_bgcolor="rgba(0,0,0,0)",
    )
    if len(policies) > 1:
        plot_height = figure.layout.height - 190
        buttons = [
            {
                "label": name,
                "method": "update",
                "args": [
                    {"visible": [j == i for j in range(len(policies))]},
                    {"title.text": _survey_title(survey, name)},
                ],
            }
            for i, name in enumerate(policies)
        ]
        figure.update_layout(
            updatemenus=[
                {
                    "type": "buttons",
                    "direction": "right",
                    "x": 0,
                    "xanchor": "left",
                    "y": 1 + 88 / plot_height,
                    "yanchor": "bottom",
                    "buttons": buttons,
                }
            ]
        )
    return figure


def _survey_cell(survey: Survey, target: str, dtype: str, policy: str) -> SurveyCell | None:
    try:
        return survey.cell(target, dtype, policy)
    except (KeyError, ValueError):
        return None


def _survey_title(survey: Survey, policy: str) -> str:
    return f"Layer survey: policy {policy} (compute {survey.compute_dtypes[policy]})"


def _cell_label(cell: SurveyCell | None) -> str:
    if cell is None:
        return ""
    outcomes = {_outcome(r) for r in cell.results.values()}
    if len(outcomes) > 1:
        return "≠"
    only = outcomes.pop()
    return "err" if only.startswith("raises") or only in ("timeout", "crashed") else _short(only)


def _survey_hover(cell: SurveyCell | None) -> str:
    if cell is None:
        return "not surveyed"
    lines = [
        f"<b>{_e(cell.target)}</b> · {_e(cell.input_dtype)} · {_e(cell.policy)} "
        f"(compute {_e(cell.compute_dtype)})",
        f"<b>{cell.classification}</b>",
    ]
    for backend, r in cell.results.items():
        from dtype_explorer.sweep import cast_path_text

        if r.ok:
            path = cast_path_text(r).replace(" -> ", " → ")
            mismatch = r.declared_dtype not in (None, r.output_dtype)
            declared = f" (declared {r.declared_dtype})" if mismatch else ""
            lines.append(f"{_e(backend)}: {_e(path)}{_e(declared)}")
        else:
            error = f"{r.error.type}: {first_line(r.error.message)}" if r.error else r.status
            lines.append(f"{_e(backend)}: {_e(r.status)} · {_e(_clip(error, 110))}")
    return "<br>".join(lines)


def survey_summary_html(survey: Survey) -> str:
    """Counts per class and policy, with the survey's scope (the notebook repr)."""
    counts = survey.counts()
    head = "".join(f"<th>{_e(p)}</th>" for p in counts.columns)
    rows = "".join(
        f"<tr><td><span class='dx-chip' style='background:{CLASS_COLORS[c]}'>{_e(c)}</span></td>"
        + "".join(f"<td>{int(v)}</td>" for v in counts.loc[c])
        + "</tr>"
        for c in counts.index
    )
    scope = (
        f"{len(survey.targets)} targets x {len(survey.input_dtypes)} dtypes x "
        f"{len(survey.policies)} policies x {len(survey.backends)} backends "
        f"({', '.join(survey.backends)}) = {len(survey.results)} probes in {survey.elapsed_s:g} s"
    )
    return (
        f"<style>{_CSS}</style><div class='dx-card'><div class='dx-head'>"
        f"<span class='dx-title'>Layer survey</span><span class='dx-meta'>{_e(scope)}</span>"
        f"</div><table><tr><th>cells</th>{head}</tr>{rows}</table>"
        "<div class='dx-meta'>.figure() for the map, .to_frame() for the table</div></div>"
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
        f"<div class='dx-card'><span class='dx-meta'>created {_e(survey.created)} · {_e(meta)}"
        f"</span></div>{figure}"
        + (
            f"<div class='dx-card'><b>Diverging or declared-mismatch cells</b>{table}</div>"
            if table
            else ""
        )
        + "</body></html>"
    )


# ----------------------------------------------------------------------------- promotion


def _category_heatmap(
    z: list,
    x,
    y,
    labels: list,
    hover: list,
    colors: dict[str, str],
    categories: list[str],
    *,
    font_size: int = 10,
    **trace: Any,
) -> go.Heatmap:
    """A heatmap whose z holds category indices, one colour per category, hover text per cell."""
    import plotly.graph_objects as go

    return go.Heatmap(
        z=z,
        x=list(x),
        y=list(y),
        text=labels,
        customdata=hover,
        texttemplate="%{text}",
        textfont={"size": font_size},
        hovertemplate="%{customdata}<extra></extra>",
        colorscale=_discrete_scale([colors[c] for c in categories]),
        zmin=-0.5,
        zmax=len(categories) - 0.5,
        xgap=1,
        ygap=1,
        colorbar={"tickvals": list(range(len(categories))), "ticktext": categories},
        **trace,
    )


def promotion_figure(table: PromotionTable) -> go.Figure:
    """A dtype x dtype grid of the documented dtype, coloured by who disagrees."""
    import plotly.graph_objects as go

    from dtype_explorer.promotion import KINDS

    kinds = list(KINDS)
    z, labels, hover = [], [], []
    for lhs in table.dtypes:
        cells = [table.cell(lhs, rhs) for rhs in table.dtypes]
        z.append([kinds.index(c.kind) for c in cells])
        labels.append([_short(c.shown) + ("*" if c.kind != "agrees" else "") for c in cells])
        hover.append([_promotion_hover(c, table) for c in cells])
    figure = go.Figure(
        _category_heatmap(z, table.dtypes, table.dtypes, labels, hover, KIND_COLORS, kinds)
    )
    side = max(420, 40 * len(table.dtypes) + 200)
    figure.update_layout(
        title={
            "text": f"{table.op}: documented result dtype (floatx {table.floatx}); "
            "* someone disagrees",
            "y": 0.995,
            "yanchor": "top",
        },
        width=side + 160,
        height=side,
        xaxis={"side": "top", "type": "category", "title": "rhs"},
        yaxis={"autorange": "reversed", "type": "category", "title": "lhs"},
        margin={"t": 160, "l": 10, "r": 10, "b": 20},
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return figure


def _promotion_hover(cell: PromotionCell, table: PromotionTable) -> str:
    lines = [
        f"<b>{_e(table.op)}({_e(cell.lhs)}, {_e(cell.rhs)})</b> → {_e(cell.shown)}",
        f"<b>{cell.kind}</b>",
    ]
    for value, who in cell.who_says().items():
        lines.append(f"{_e(value)}: {_e(', '.join(who))}")
    lines.extend(f"<i>{_e(k)}</i>: {_e(_clip(v, 100))}" for k, v in cell.errors().items())
    return "<br>".join(lines)


def promotion_html(table: PromotionTable) -> str:
    """Summary card of a promotion table: scope, cells per kind, the disagreements."""
    cells = table.cells()
    counts = {k: sum(c.kind == k for c in cells) for k in KIND_COLORS}
    count_chips = " ".join(
        f"<span class='dx-chip' style='background:{KIND_COLORS[k]};color:#222'>{_e(k)}: {n}</span>"
        for k, n in counts.items()
    )
    worst = [c for c in cells if c.kind in ("keras-disagrees", "backend-specific")][:40]
    rows = "".join(
        f"<tr><td>{_e(c.lhs)}</td><td>{_e(c.rhs)}</td><td>{chip(c.shown)}</td><td>{_e(c.kind)}</td>"
        f"<td>{_e(_who_says_text(c))}</td></tr>"
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
        f"<style>{_CSS}</style><div class='dx-card'><div class='dx-head'>"
        f"<span class='dx-title'>{_e(table.op)} promotion table</span><span class='dx-meta'>"
        f"{len(table.dtypes)}x{len(table.dtypes)} dtypes · floatx {_e(table.floatx)} · backends "
        f"{_e(', '.join(table.backends))} · references {_e(refs)}</span></div>"
        f"<div>{count_chips}</div>{body}"
        "<div class='dx-meta'>.figure() for the grid, .disagreements() for every cell</div></div>"
    )


# --------------------------------------------------------------------------------- helpers


def _who_says_text(cell: PromotionCell) -> str:
    return "; ".join(f"{value}: {', '.join(who)}" for value, who in cell.who_says().items())


def _discrete_scale(colors: Sequence[str]) -> list[list[float | str]]:
    """A plotly colorscale giving each integer 0..n-1 its own flat colour."""
    n = len(colors)
    return [[bound / n, colour] for i, colour in enumerate(colors) for bound in (i, i + 1)]


def _badge(verdict: str) -> str:
    colour = VERDICT_COLORS.get(verdict, _FG2)
    return f"<span class='dx-badge' style='background:{colour}'>{_e(verdict)}</span>"


def _outcome(result: ProbeResult) -> str:
    from dtype_explorer.sweep import outcome

    return outcome(result)


def _floatx(floatx: str | None) -> str:
    return f" · floatx {_e(floatx)}" if floatx else ""


_ABBREVIATIONS = (
    ("python_", "py_"),
    ("bfloat", "bf"),
    ("float8_", "f8"),
    ("float", "f"),
    ("complex", "c"),
    ("uint", "u"),
    ("int", "i"),
)


def _short(dtype: str) -> str:
    """``float16`` -> ``f16``, for labels inside small cells."""
    for long, short in _ABBREVIATIONS:
        if dtype.startswith(long):
            return short + dtype[len(long) :]
    return dtype


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


__all__ = [
    "cast_path_svg",
    "chip",
    "dtype_color",
    "probe_set_html",
    "promotion_figure",
    "promotion_html",
    "result_html",
    "survey_figure",
    "survey_html",
    "survey_summary_html",
]
