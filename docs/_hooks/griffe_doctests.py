"""A griffe extension for the API reference: a docstring's doctest runs (``>>>`` lines and their
output, up to a blank line) become ``pycon`` code blocks, as ``pydoc`` and Sphinx show them.
Without it Markdown reads ``['float32']`` in an output line as a link. The docstrings are left
as they are (the doctests run under ``--doctest-modules``); only the site's copy is changed.
"""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """Wrap every doctest run of ``text`` in a ``pycon`` fence at the run's indentation."""
    if "```" in text:
        return text
    out: list[str] = []
    indent: str | None = None
    for line in text.splitlines():
        stripped = line.lstrip()
        if indent is None and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
        elif indent is not None and not stripped:
            out.append(f"{indent}```")
            indent = None
        out.append(line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


class FenceDoctests(griffe.Extension):
    def on_instance(self, *, node: Any, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
