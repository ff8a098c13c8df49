"""Terminal views (rich): the records laid out as tables for a terminal, coloured only where
the console can show colour. What each cell says is the records' (``ProbeResult.headline``,
``PromotionCell.kind``, ``LayerCall.row``); the marks are the palette's (``palette.json``);
red is for errors and wrong answers, yellow for what deserves a look.

>>> import io
>>> from rich.console import Console
>>> from dtype_explorer.records import ProbeResult, ProbeSet, ProbeSpec
>>> spec = ProbeSpec(target="ops.add", input_dtypes=("int8", "float16"))
>>> rs = ProbeSet(results=tuple(ProbeResult(spec=spec.model_copy(update={"backend": b}),
...     status="ok", backend=b, output_dtype=d, verdict=v) for b, d, v in
...     [("jax", "float16", "as-documented"), ("torch", "float32", "deviates")]))
>>> console = Console(file=io.StringIO(), width=70, color_system=None)
>>> console.print(probe_set_table(rs))
>>> print("\\n".join(line.rstrip() for line in console.file.getvalue().splitlines()[2:9]))
┃ backend ┃ output  ┃ verdict         ┃ headline                     ┃
┡━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ jax     │ float16 │ ✓ as-documented │ float16, as documented       │
│ torch   │ float32 │ △ deviates      │ float32, deviates from the   │
│         │         │                 │ docs                         │
└─────────┴─────────┴─────────────────┴──────────────────────────────┘
across backends: diverges · 2 of 2 rows differ across jax and torch:
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from dtype_explorer.errors import printable
from dtype_explorer.records import KINDS, ROW_COLUMNS
from dtype_explorer.views._palette import PALETTE, mark
from dtype_explorer.views._text import audit_details, audit_rows

if TYPE_CHECKING:
    from dtype_explorer.records import AuditReport, ProbeSet, PromotionTable

#: The terminal's colour for a palette colour: its error red stays red, its ambers (a verdict
#: to look at, a backend-specific cell) become yellow; every other mark stays uncoloured.
_TERMINAL_STYLES = {
    PALETTE["statuses"]["error"]: "bold red",
    PALETTE["verdicts"]["deviates"]: "yellow",
    PALETTE["promotion_kinds"]["backend-specific"]: "yellow",
}
#: What each mark of a promotion cell means, in the grid's legend.
_KIND_WORDS = {
    "keras-disagrees": "a backend returns another dtype than Keras's rule, or raises",
    "backend-specific": "the backends' rules differ",
    "references-differ": "a reference library (NumPy, JAX, ...) says otherwise",
}
_SEVERITY_STYLES = {"error": "bold red", "warning": "yellow"}
#: The dtype-flow columns that tell in words (they take the room left).
_SENTENCES = ("variables", "events")


def _safe(text: str, style: str = "") -> Text:
    """A cell's text with its control characters escaped (``errors.printable``)."""
    return Text(printable(text), style=style)


def _style(section: str, name: str) -> str:
    return _TERMINAL_STYLES.get(PALETTE[section].get(name, ""), "")


def _marked(section: str, name: str) -> Text:
    glyph = mark(name)
    return _safe(f"{glyph} {name}" if glyph else name, style=_style(section, name))


def probe_set_table(outcome: ProbeSet) -> Table:
    """One line per backend (or mode): its label, output dtype, verdict and headline, the
    verdict across them and where they differ in the caption.

    Args:
        outcome: the ``ProbeSet`` of ``dx.probe(..., backend="all")``.

    Returns:
        A ``rich.table.Table``.
    """
    spec = outcome.results[0].spec
    title = f"{spec.target} ({', '.join(spec.input_dtypes)}), policy {spec.policy}"
    table = Table(
        title=printable(title), box=box.HEAVY_HEAD, title_style="bold", caption_justify="left"
    )
    table.add_column(outcome.axis.removesuffix("s") if " and " not in outcome.axis else "run")
    table.add_column("output")
    table.add_column("verdict")
    table.add_column("headline", overflow="fold", ratio=1)
    grid = outcome.comparison()  # each column's label, status and headline, said once
    for column, result in zip(grid.columns, outcome.results, strict=True):
        unsupported = column.status == "unsupported"
        table.add_row(
            _safe(column.label),
            _safe(result.output_dtype or "-", style="bold" if result.ok else ""),
            _marked("statuses", "unsupported")
            if unsupported
            else _marked("verdicts", result.shown_verdict),
            _safe(column.headline, style=_style("statuses", column.status)),
        )
    across = _safe(
        f"across {outcome.axis}: {outcome.shown_verdict}",
        style=_style("verdicts", outcome.shown_verdict),
    )
    across.append(printable(f" · {grid.summary}"), style="")
    table.caption = across
    return table


def promotion_grid(result: PromotionTable) -> RenderableType:
    """The lhs x rhs grid of the documented dtype (Keras's ``result_type``), each cell where
    someone disagrees marked with its kind's glyph, and a legend of the marks used.

    Args:
        result: a ``PromotionTable`` (``dx.promotion_table``).

    Returns:
        A ``rich.console.Group``: the title, the grid, the legend.
    """
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("lhs \\ rhs", style="bold", no_wrap=True)
    for rhs in result.rhs_dtypes:
        table.add_column(rhs, no_wrap=True)
    seen: set[str] = set()
    for lhs in result.dtypes:
        cells = []
        for rhs in result.rhs_dtypes:
            cell = result.cell(lhs, rhs)
            if cell.kind == "agrees":
                cells.append(_safe(cell.shown))
                continue
            seen.add(cell.kind)
            style = _style("promotion_kinds", cell.kind) or "dim"
            cells.append(_safe(f"{cell.shown} {mark(cell.kind)}", style=style))
        table.add_row(lhs, *cells)
    op = f"ops.{result.op.removeprefix('ops.')}"
    title = f"{op}: the result dtype for lhs (row) and rhs (column), floatx {result.floatx}"
    legend = [f"  {mark(k)} {_KIND_WORDS[k]}" for k in reversed(KINDS) if k in seen]
    said = f"keras.backend.result_type on {', '.join(result.backends)}; unmarked: all agree"
    if legend:
        said += " (who says what: --disagreements, or --long for every answer)"
    return Group(_safe(title, style="bold"), table, _safe(said), *(_safe(line) for line in legend))


def audit_renderables(report: AuditReport) -> RenderableType:
    """A model check for the terminal: the summary, the dtype flow (a table whose cells wrap
    at their words, or, on a terminal too narrow for that, one block per layer: no cell is
    ever cut), then the predict and training-step lines, the findings with their fixes, and
    the notes.

    Args:
        report: an ``AuditReport`` (``dx.check_model``).

    Returns:
        A ``rich.console.Group``.
    """
    parts: list[RenderableType] = [_safe(report.summary(), style="bold")]
    if report.sample:
        parts.append("sample: " + ", ".join(f"{t.shape} {t.dtype}" for t in report.sample))
    parts.append(_Flow(audit_rows(report)))
    for line in audit_details(report):
        severity = next((s for s in _SEVERITY_STYLES if line.startswith(f"[{s}]")), None)
        parts.append(_safe(line, style=_SEVERITY_STYLES.get(severity or "", "")))
    return Group(*parts)


class _Flow:
    """The dtype-flow rows: a table where its cells can wrap at their words, else a block per
    layer (``path  layer  policy: given → received → output`` and its variables and events)."""

    def __init__(self, rows: list[dict[str, str]]) -> None:
        self.rows = rows

    def table(self) -> Table:
        flow = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for column in ROW_COLUMNS:
            flow.add_column(column, ratio=1 if column in _SENTENCES else None)
        for row in self.rows:
            flow.add_row(*(printable(row[c]) for c in ROW_COLUMNS))
        return flow

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table()
        wide = options.update_width(10_000)
        if Measurement.get(console, wide, table).minimum <= options.max_width:
            yield table
            return
        yield _safe("")
        for row in self.rows:
            flow = " → ".join(row[c] or "-" for c in ("given", "received", "output"))
            yield _safe(f"{row['path']}  {row['layer']}  {row['policy']}: {flow}")
            for column in _SENTENCES:
                if row[column]:
                    yield _safe(f"    {column}: {row[column]}")
