"""Text contrast as the reader sees it, measured in the page: for every visible piece of text
under an element (its HTML text and its SVG labels), the WCAG contrast ratio between the
computed text colour and the colour actually behind it (every translucent background up to
the first opaque one, composited, across shadow roots; an SVG label on a chip: the chip's
fill). Shared by the browser tests of JupyterLab's and marimo's light and dark themes.
"""

from __future__ import annotations

from pathlib import Path

#: WCAG AA for body text.
AA = 4.5

#: The measuring function (page_contrast.js), its leading comment dropped: Playwright calls a
#: string that starts as a function does.
_SOURCE = Path(__file__).with_name("page_contrast.js").read_text(encoding="utf-8")
_MEASURE = "\n".join(line for line in _SOURCE.splitlines() if not line.startswith("//"))


def text_contrasts(locator) -> list[dict]:
    """Each visible text under ``locator`` (a Playwright locator): ``what`` (tag and classes),
    ``text``, ``fg`` and ``bg`` (the RGB drawn) and ``ratio`` (WCAG, 1 to 21)."""
    return locator.evaluate(_MEASURE)


def below_aa(locator) -> tuple[list[dict], int]:
    """The texts under ``locator`` below WCAG AA (4.5:1), and how many texts were measured."""
    measured = text_contrasts(locator)
    return [m for m in measured if m["ratio"] < AA], len(measured)
