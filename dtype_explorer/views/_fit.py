"""A training run of several steps (``check_model(..., mode="fit", steps=N)``) laid out: a
compact table in text, a table in the HTML card. The facts (each step's loss, loss scale,
whether it was skipped, its inf/NaN gradients, where they first appear) are the record's
(``FitReport.steps``, ``steps_table``, ``steps_summary``); the figure is ``_figures``'.

>>> from dtype_explorer.records import FitReport, FitStep
>>> run = FitReport(loss="mse", optimizer="SGD", steps=(FitStep(step=1, loss=0.5),
...     FitStep(step=2, loss=0.25)))
>>> fit_steps_lines(run)[1].split()
['step', 'loss', 'loss', 'scale', 'skipped', 'inf/NaN']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer.views._markup import e
from dtype_explorer.views._palette import PALETTE

if TYPE_CHECKING:  # annotations only: a probe's text imports no audit record
    from dtype_explorer.records import FitReport

#: How many steps a text table shows at its head and at its tail (the rest: ``fit.steps``).
HEAD_ROWS, TAIL_ROWS = 10, 5
#: How many steps the HTML card lists (in a box that scrolls).
HTML_ROWS = 200
COLUMNS = ("step", "loss", "loss scale", "skipped", "inf/NaN")


def fit_steps_lines(fit: FitReport, indent: str = "  ") -> list[str]:
    """The steps of a run of several as text: the run in a sentence, then a compact table
    (its first and last steps where there are many); ``[]`` for one step."""
    if not fit.steps:
        return []
    rows = fit.steps_table()
    shown = rows
    if len(rows) > HEAD_ROWS + TAIL_ROWS:
        gap = {c: "" for c in COLUMNS} | {"step": f"... ({len(rows) - HEAD_ROWS - TAIL_ROWS} more)"}
        shown = [*rows[:HEAD_ROWS], gap, *rows[-TAIL_ROWS:]]
    widths = {c: max(len(c), *(len(r[c]) for r in shown)) for c in COLUMNS}
    head = "  ".join(c.ljust(widths[c]) for c in COLUMNS).rstrip()
    lines = [f"{indent}{fit.steps_summary()}", f"{indent}{head}"]
    lines += [indent + "  ".join(r[c].ljust(widths[c]) for c in COLUMNS).rstrip() for r in shown]
    if len(rows) > len(shown) - 1 and shown is not rows:
        lines.append(f"{indent}(every step: report.fit.steps; drawn: report.figure())")
    return lines


def fit_steps_html(fit: FitReport) -> str:
    """The steps of a run of several as a table in a ``<details>`` (``""`` for one step):
    skipped steps and inf/NaN counts in the palette's colours."""
    if not fit.steps:
        return ""
    colours = PALETTE["training"]
    body = []
    for row in fit.steps_table()[:HTML_ROWS]:
        cells = []
        for column in COLUMNS:
            text = row[column]
            flagged = (column == "skipped" and text) or (column == "inf/NaN" and text != "0")
            tone = colours["skipped" if column == "skipped" else "nonfinite"]
            style = f" style='color:{tone};font-weight:600'" if flagged else ""
            cells.append(f"<td{style}>{e(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = (
        f"<div class='dx-meta'>{len(fit.steps) - HTML_ROWS} more steps: report.fit.steps</div>"
        if len(fit.steps) > HTML_ROWS
        else ""
    )
    head = "".join(f"<th>{e(c)}</th>" for c in COLUMNS)
    return (
        f"<details open class='dx-fit-steps'><summary>{e(fit.steps_summary())}</summary>"
        f"<div style='max-height:18em;overflow:auto'><table><tr>{head}</tr>{''.join(body)}"
        f"</table></div>{more}<div class='dx-meta'>Drawn over the steps: report.figure()"
        "</div></details>"
    )
