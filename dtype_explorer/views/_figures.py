"""plotly figures: the survey heatmap and the promotion grid, each cell coloured by its class
or kind from the palette, with every backend's answer on hover; a training run's loss and
loss scale over its steps (``fit_figure``); each drawn in the light or dark theme's colours
(``views._theme.template``)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dtype_explorer.records import (
    ANY_POLICY,
    ARRAYS_ONLY,
    CLASSIFICATIONS,
    KINDS,
    AuditReport,
    FitReport,
    PromotionCell,
    PromotionTable,
    Survey,
    SurveyCell,
)
from dtype_explorer.views._markup import clip, e, short
from dtype_explorer.views._palette import PALETTE, mark
from dtype_explorer.views._theme import chosen_theme, template

if TYPE_CHECKING:
    import plotly.graph_objects as go


def survey_figure(
    survey: Survey, policy: str | None = None, *, theme: str | None = None
) -> go.Figure:
    """Heatmap of a survey: targets x input dtypes coloured by class; a menu for policies. An
    op of a survey of layers and ops is coloured in its one policy's tab (``op_policy``); in
    the others its row says ``any`` (it reads no policy), with where its answer is. A layer's
    cells on the weak Python scalars there say ``arrays`` (:data:`records.ARRAYS_ONLY`: a
    layer is not probed on one), uncoloured: no answer, no failure. ``theme``: ``"light"``,
    ``"dark"``, or ``None`` (plotly's default template decides: :func:`chosen_theme`)."""
    import plotly.graph_objects as go

    theme = chosen_theme(theme)
    policies = [policy] if policy else list(survey.policies)
    classes, dtypes = list(CLASSIFICATIONS), survey.input_dtypes
    figure = go.Figure()
    for i, name in enumerate(policies):
        z, labels, hover = [], [], []
        for target in survey.targets:
            cells = [_survey_cell(survey, target, d, name) for d in survey.input_dtypes]
            if survey.takes_no_policy((target, "", name)):  # its one answer: another tab's
                z.append([None] * len(cells))
                labels.append(["any"] * len(cells))
                hover.append([_policy_free_hover(c, target, d) for c, d in zip(cells, dtypes)])
                continue
            arrays = [survey.arrays_only((target, d, name)) for d in dtypes]
            z.append([classes.index(c.classification) if c else None for c in cells])
            labels.append(["arrays" if a else _cell_label(c) for c, a in zip(cells, arrays)])
            hover.append(
                [
                    _arrays_only_hover(target, d) if a else _survey_hover(c)
                    for c, d, a in zip(cells, dtypes, arrays)
                ]
            )
        figure.add_trace(
            _category_heatmap(
                z,
                survey.input_dtypes,
                survey.targets,
                labels,
                hover,
                PALETTE["survey_classes"],
                classes,
                font_size=9,
                visible=i == 0,
                name=name,
            )
        )
    backends = ", ".join(survey.backends)
    if len(survey.modes) > 1:  # a cell whose answer depends on the mode is "diverges"
        backends += f"; modes: {', '.join(survey.modes)}"
    figure.update_layout(
        title=_title(_survey_title(survey, policies[0])),
        height=max(340, 20 * len(survey.targets) + 200),
        xaxis={"side": "top", "type": "category", "title": f"input dtype  (backends: {backends})"},
        yaxis={"autorange": "reversed", "type": "category"},
        margin={"t": 170, "l": 10, "r": 10, "b": 20},
        template=template(theme),
        **FITS,
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


def _policy_free_hover(cell: SurveyCell | None, target: str, dtype: str) -> str:
    """An op's hover under a policy it was not probed under, in a survey of layers and ops."""
    where = f"policy {cell.policy}" if cell else "its one policy"
    return (
        f"<b>{e(target)}</b> · {e(dtype)}<br>{e(ANY_POLICY)}: probed once, under "
        f"{e(where)} (that tab has its answer)"
    )


def _arrays_only_hover(target: str, dtype: str) -> str:
    """A layer's hover on a weak Python scalar of a survey of layers and ops."""
    return f"<b>{e(target)}</b> · {e(dtype)}<br>{e(ARRAYS_ONLY)} (an op's input: not probed)"


def _survey_cell(survey: Survey, target: str, dtype: str, policy: str) -> SurveyCell | None:
    try:
        return survey.cell(target, dtype, policy)
    except (KeyError, ValueError):
        return None


#: Every figure fills its output's width (plotly's autosize; the notebook renderer and
#: ``to_html(config=CONFIG)`` keep it responsive), its hover labels left-aligned inside it,
#: the modebar upright at the right edge, off the title (which starts at the left).
FITS: dict = {
    "autosize": True,
    "hoverlabel": {"align": "left", "namelength": -1, "font": {"size": 11}},
    "modebar": {"orientation": "v"},
}
#: The plotly config that keeps a figure responsive when written to HTML.
CONFIG = {"responsive": True, "displaylogo": False}
#: Characters per line of a hover label: wrapped there, so it stays inside the figure.
HOVER_WIDTH = 64


def _title(text: str) -> dict:
    return {"text": text, "x": 0, "xanchor": "left", "y": 0.995, "yanchor": "top"}


def what_was_surveyed(targets: Sequence[str]) -> str:
    """``Op survey``, ``Layer survey`` or ``Survey of layers and ops``, by the targets.

    >>> what_was_surveyed(["ops.add", "ops.matmul"]), what_was_surveyed(["Dense", "ops.add"])
    ('Op survey', 'Survey of layers and ops')
    """
    ops = [t.startswith("ops.") for t in targets]
    if all(ops):
        return "Op survey"
    return "Layer survey" if not any(ops) else "Survey of layers and ops"


def wrap(line: str, width: int = HOVER_WIDTH) -> str:
    """An escaped hover line, wrapped with ``<br>`` every ``width`` characters or so.

    >>> wrap("a" * 5 + " <b> " + "c" * 5, width=6)
    'aaaaa<br>&lt;b&gt;<br>ccccc'
    """
    return "<br>".join(e(part) for part in textwrap.wrap(line, width) or [""])


def _survey_title(survey: Survey, policy: str) -> str:
    kind = what_was_surveyed(survey.targets)
    title = f"{kind}: policy {policy} (compute {survey.compute_dtypes[policy]})"
    if survey.op_policy is not None:  # each op probed once: it reads no policy
        title += f"; ops under {survey.op_policy} only ({ANY_POLICY})"
    return title


def _cell_label(cell: SurveyCell | None) -> str:
    if cell is None:
        return ""
    outcomes = {r.outcome for r in cell.results.values()}
    if len(outcomes) > 1:
        return "≠"
    only = outcomes.pop()
    return "err" if only.startswith("raises") or only in ("timeout", "crashed") else short(only)


def _survey_hover(cell: SurveyCell | None) -> str:
    if cell is None:
        return "not surveyed"
    lines = [
        f"<b>{e(cell.target)}</b> · {e(cell.input_dtype)} · {e(cell.policy)} "
        f"(compute {e(cell.compute_dtype)})",
        f"<b>{cell.classification}</b>",
    ]
    for backend, r in cell.results.items():
        if r.ok:
            path = r.path_text().replace(" -> ", " → ")
            mismatch = r.declared_dtype not in (None, r.output_dtype)
            declared = f" (declared {r.declared_dtype})" if mismatch else ""
            lines.append(wrap(f"{backend}: {path}{declared}"))
        else:
            error = r.error_text() or r.status
            lines.append(wrap(f"{backend}: {r.status} · {clip(error, 300)}"))
    return "<br>".join(lines)


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
        colorbar={
            "tickvals": list(range(len(categories))),
            "ticktext": [f"{mark(c)} {c}".strip() for c in categories],
        },
        **trace,
    )


def promotion_figure(table: PromotionTable, *, theme: str | None = None) -> go.Figure:
    """A dtype x dtype grid of the documented dtype, coloured by who disagrees, in ``theme``'s
    colours (``None``: plotly's default template decides)."""
    import plotly.graph_objects as go

    theme = chosen_theme(theme)
    kinds = list(KINDS)
    z, labels, hover = [], [], []
    for lhs in table.dtypes:
        cells = [table.cell(lhs, rhs) for rhs in table.rhs_dtypes]
        z.append([kinds.index(c.kind) for c in cells])
        labels.append([short(c.shown) + ("*" if c.kind != "agrees" else "") for c in cells])
        hover.append([_promotion_hover(c, table) for c in cells])
    figure = go.Figure(
        _category_heatmap(
            z, table.rhs_dtypes, table.dtypes, labels, hover, PALETTE["promotion_kinds"], kinds
        )
    )
    side = max(420, 40 * len(table.dtypes) + 200)
    figure.update_layout(
        title=_title(
            f"Promotion table of {table.op}: the documented result dtype (floatx "
            f"{table.floatx}); * where someone disagrees"
        ),
        height=side,
        xaxis={"side": "top", "type": "category", "title": "rhs"},
        yaxis={"autorange": "reversed", "type": "category", "title": "lhs"},
        margin={"t": 160, "l": 10, "r": 10, "b": 20},
        template=template(theme),
        **FITS,
    )
    return figure


def _promotion_hover(cell: PromotionCell, table: PromotionTable) -> str:
    lines = [
        f"<b>{e(table.op)}({e(cell.lhs)}"
        + ("" if table.arity == 1 else f", {e(cell.rhs)}")
        + f")</b> → {e(cell.shown)}",
        f"<b>{cell.kind}</b>",
    ]
    for value, who in cell.who_says().items():
        lines.append(f"{e(value)}: {e(', '.join(who))}")
    lines.extend(wrap(f"{k}: {clip(v, 300)}") for k, v in cell.errors().items())
    return "<br>".join(lines)


def _discrete_scale(colors: Sequence[str]) -> list[list[float | str]]:
    """A plotly colorscale giving each integer 0..n-1 its own flat colour."""
    n = len(colors)
    return [[bound / n, colour] for i, colour in enumerate(colors) for bound in (i, i + 1)]


def fit_figure(record: AuditReport | FitReport) -> go.Figure:
    """A training run of several steps (``check_model(..., mode="fit", steps=N)``): the loss
    and the loss scale over the steps (two axes, the scale on a log2 axis), skipped steps
    marked on the loss, the first step with inf/NaN gradients annotated with its variable."""
    import plotly.graph_objects as go

    fit = record.fit if isinstance(record, AuditReport) else record
    if fit is None or not fit.steps:
        raise ValueError("no training steps to draw: check_model(..., mode='fit', steps=N)")
    colours = PALETTE["training"]
    steps = [s.step for s in fit.steps]
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=steps,
            y=[s.loss for s in fit.steps],
            name=f"loss ({fit.loss})",
            mode="lines+markers",
            line={"color": colours["loss"]},
            hovertemplate="step %{x}<br>loss %{y:.4g}<extra></extra>",
        )
    )
    if fit.loss_scaling:
        figure.add_trace(
            go.Scatter(
                x=steps,
                y=[s.loss_scale for s in fit.steps],
                name="loss scale (after the step)",
                mode="lines",
                line={"color": colours["loss_scale"], "dash": "dash", "shape": "hv"},
                yaxis="y2",
                hovertemplate="step %{x}<br>loss scale %{y:g}<extra></extra>",
            )
        )
    skipped = [s for s in fit.steps if s.skipped]
    if skipped:
        figure.add_trace(
            go.Scatter(
                x=[s.step for s in skipped],
                y=[s.loss for s in skipped],
                name="skipped (inf/NaN gradients)",
                mode="markers",
                marker={"color": colours["skipped"], "symbol": "x", "size": 10},
                hovertemplate="step %{x}: skipped<extra></extra>",
            )
        )
    first = fit.first_nonfinite()
    if first is not None:
        at = fit.steps[first[0] - 1]
        figure.add_annotation(
            x=first[0],
            y=at.loss if at.loss is not None else 0,
            text=e(f"first inf/NaN gradient: step {first[0]}, {first[1]}"),
            font={"color": colours["nonfinite"]},
            arrowcolor=colours["nonfinite"],
        )
    figure.update_layout(
        title=_title(e(clip(f"{fit.optimizer} on {fit.loss}: {fit.steps_summary()}", 200))),
        xaxis={"title": "step"},
        yaxis={"title": "loss"},
        yaxis2={"title": "loss scale", "overlaying": "y", "side": "right", "type": "log"},
        legend={"orientation": "h", "y": -0.2},
        height=420,
        **FITS,
    )
    return figure
