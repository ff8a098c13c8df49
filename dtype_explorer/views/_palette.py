"""The one palette (``palette.json``, also bundled into the widget): colours for dtype kinds,
verdicts, survey classes, promotion kinds and audit severities.

>>> dtype_kind("bfloat16"), dtype_kind("uint8"), dtype_kind("python_int")
('bfloat16', 'uint', 'python')
>>> dtype_color("float16") == PALETTE["dtype_kinds"]["float16"]
True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dtype_explorer import dtypes

PALETTE: dict[str, Any] = json.loads(
    (Path(__file__).with_name("palette.json")).read_text(encoding="utf-8")
)


def dtype_kind(name: str | None) -> str:
    """The colour kind of a dtype: each 16/32/64-bit float its own, every other dtype its family
    (``int``, ``uint``, ``float8``, ``complex``, ``bool``, ``string``, ``python``, ``other``)."""
    family = dtypes.family(name)
    return str(name) if family == "float" else family


def dtype_color(name: str | None) -> str:
    """The colour of a dtype's chip."""
    return PALETTE["dtype_kinds"][dtype_kind(name)]


def color(section: str, name: str) -> str:
    """A colour of ``section`` (``verdicts``, ``survey_classes``, ...), the muted one if absent."""
    return PALETTE[section].get(name, PALETTE["ui"]["muted"])


def text_on(fill: str) -> str:
    """The text colour the palette draws on ``fill`` (AA contrast, ``tests/views``).

    >>> text_on(color("survey_classes", "raises")), text_on(color("survey_classes", "keeps-input"))
    ('#ffffff', '#212121')
    """
    return PALETTE["text_on"].get(fill, "#212121")


def fill_style(section: str, name: str) -> str:
    """``background:...;color:...`` for a fill of ``section`` and its text colour."""
    fill = color(section, name)
    return f"background:{fill};color:{text_on(fill)}"


def mark(name: str) -> str:
    """The glyph that marks a verdict, class or kind (``✓``, ``≠``, ``✕``), or ``""``."""
    return PALETTE["marks"].get(name, "")
