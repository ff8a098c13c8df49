"""The atoms every HTML and SVG view is made of: escaping, clipping, short dtype names, chips
and badges, and the stylesheet of the static cards.

>>> short("bfloat16"), short("python_int")
('bf16', 'py_int')
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

from dtype_explorer.views._palette import PALETTE, color, dtype_color, mark, text_on
from dtype_explorer.views._theme import theme_css

if TYPE_CHECKING:
    from dtype_explorer.records import TraceStep

#: The static cards' stylesheet, every rule scoped to ``.dx-card`` (the widget has its own,
#: scoped to its root): a card never restyles the widget, nor the widget a card. The theme's
#: ``--dx-*`` variables (light or dark, from the palette) come first.
CSS = theme_css(".dx-card") + Path(__file__).with_name("cards.css").read_text(encoding="utf-8")
STYLE = f"<style>{CSS}</style>"
FG2 = PALETTE["ui"]["muted"]
ACCENT = PALETTE["ui"]["changed"]
ERROR = PALETTE["ui"]["error"]

_ABBREVIATIONS = (
    ("python_", "py_"),
    ("bfloat", "bf"),
    ("float8_", "f8"),
    ("float", "f"),
    ("complex", "c"),
    ("uint", "u"),
    ("int", "i"),
)


def e(text: object) -> str:
    """``text`` escaped for HTML (quotes included)."""
    return html.escape(str(text), quote=True)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short(dtype: str) -> str:
    """``float16`` -> ``f16``, for labels inside small cells."""
    for long, abbreviation in _ABBREVIATIONS:
        if dtype.startswith(long):
            return abbreviation + dtype[len(long) :]
    return dtype


def chip(dtype: str | None, *, odd: bool = False, title: str = "") -> str:
    """An inline dtype chip; ``odd`` outlines it (a value that disagrees)."""
    text = dtype if dtype is not None else "—"
    cls = "dx-chip dx-odd" if odd else "dx-chip"
    tip = f' title="{e(title)}"' if title else ""
    fill = dtype_color(dtype)
    style = f"background:{fill};color:{text_on(fill)}"
    return f'<span class="{cls}" style="{style}"{tip}>{e(text)}</span>'


def badge(verdict: str) -> str:
    """A verdict badge."""
    tone = color("verdicts", verdict)
    said = f"{mark(verdict)} {verdict}".strip()
    return (
        f"<span class='dx-badge' style='background:{tone};color:{text_on(tone)}' "
        f"title='{e(verdict)}'>{e(said)}</span>"
    )


def floatx_text(floatx: str | None) -> str:
    return f" · floatx {e(floatx)}" if floatx else ""


def trace_step_item(step: TraceStep, meta: str = "", where: str = "") -> str:
    """One op-trace step as a list item: its inputs' and outputs' dtype chips (or what it
    raised), what changed, its flags, then ``meta`` (more ``dx-meta`` markup) and ``where``
    (the source markup). One layout for the probe's trace and the user's own code's.

    Args:
        step: a ``records.TraceStep``.
        meta: markup put after the flags (e.g. the kernel path).
        where: the source line's markup.

    Returns:
        The ``<li>`` markup.
    """
    ins = " ".join(chip(t.dtype, title=f"{t.name}: {t.text()}") for t in step.inputs)
    if step.error:
        outs = f"<span style='color:{ERROR}'>raised {e(clip(step.error, 160))}</span>"
    else:
        outs = " ".join(chip(t.dtype, title=t.text()) for t in step.outputs)
    said = step.change_text() + (f" ({', '.join(step.conversions)})" if step.conversions else "")
    edge = ERROR if step.first_nonfinite else ACCENT if step.changes_dtype else ""
    style = f" style='border-left-color:{edge}'" if edge else ""
    flag = (
        f" <span class='dx-flag' style='color:{ERROR}'>{e(step.flag_text())}</span>"
        if step.flags
        else ""
    )
    return (
        f"<li{style} data-step='{step.index}'><code>#{step.index} {e(step.op)}</code> {ins} → "
        f"{outs} <span class='dx-meta'>{e(said)}</span>{flag}{meta}{where}</li>"
    )
