"""The cast path as an inline SVG diagram: a column per stage, a chip per tensor, edges
accented where the dtype changed."""

from __future__ import annotations

import itertools
import textwrap

from dtype_explorer.errors import first_line
from dtype_explorer.records import STAGES, CastStep, ProbeResult
from dtype_explorer.views._markup import ACCENT, ERROR, FG2, clip, e
from dtype_explorer.views._palette import color, dtype_color, text_on

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
            f'style="fill:{FG2}">{stage}</text>'
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
    """Data flows input -> converted -> (model) -> autocast by tensor index, then into the
    output (past the variables column, whose chips feed the output with dashed lines)."""
    stages = [stage for stage, _ in columns]
    data = [
        i
        for i, stage in enumerate(stages)
        if stage in ("input", "asked", "converted", "model", "autocast")
    ]
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
        colour, thick = FG2, 1.0
    elif target is None:
        colour, thick = ERROR, 2.5
    elif target.changed or (step is not None and target.dtype != step.dtype):
        colour, thick = ACCENT, 2.5
    else:
        colour, thick = FG2, 1.2
    x1, y1 = start[0] + _CHIP_W, start[1] + _CHIP_H / 2
    x2, y2 = end[0] - 6, end[1] + _CHIP_H / 2
    mid = (x1 + x2) / 2
    shape = f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}" if curved else f"M{x1},{y1} L{x2},{y2}"
    dash = ' stroke-dasharray="4 3"' if dashed else ""
    return (
        f'<path d="{shape}" fill="none" style="stroke:{colour}" stroke-width="{thick}"{dash}/>'
        f'<polygon points="{x2 - 1},{y2 - 4} {x2 + 6},{y2} {x2 - 1},{y2 + 4}" '
        f'style="fill:{colour}"/>'
    )


def _node(step: CastStep | None, result: ProbeResult, x: float, y: float) -> str:
    if step is None:  # the call raised
        error = result.error
        label = error.type if error else result.status
        note = first_line(error.message) if error else result.status
        fill, text = color("statuses", "error"), label  # a filled chip: one colour any theme
    else:
        prefix = f"{step.name.rsplit('/', 1)[-1]}: " if step.name else ""
        fill, text, note = dtype_color(step.dtype), f"{prefix}{step.dtype}", step.note
    stroke = f";stroke:{ACCENT};stroke-width:2" if step is not None and step.changed else ""
    title = e(note if step is None or not step.name else f"{step.name}: {note}")
    lines = textwrap.wrap(note, 26)[:_NOTE_LINES]
    if len(textwrap.wrap(note, 26)) > _NOTE_LINES:
        lines[-1] = lines[-1][:23] + "..."
    notes = "".join(
        f'<text x="{x + _CHIP_W / 2}" y="{y + _CHIP_H + 12 + i * _NOTE_LINE}" font-size="10" '
        f'text-anchor="middle" style="fill:{FG2}">{e(line)}</text>'
        for i, line in enumerate(lines)
    )
    return (
        f"<g><title>{title}</title>"
        f'<rect x="{x}" y="{y}" width="{_CHIP_W}" height="{_CHIP_H}" rx="4" '
        f'style="fill:{fill}{stroke}"/>'
        f'<text x="{x + _CHIP_W / 2}" y="{y + 15}" font-size="12" text-anchor="middle" '
        f'style="fill:{text_on(fill)}">{e(clip(text, 19))}</text>{notes}</g>'
    )
