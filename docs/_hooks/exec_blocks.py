"""The site's runnable examples: find the ``python exec`` fences of a page, run them, and lay out
each block with what it printed. Shared by the build hook (``examples.py``) and the gallery test
(``tests/docs/test_gallery.py``), so both run exactly what the page shows.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import linecache
import re
import traceback
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
#: The facts each gallery page shows (dtypes, verdicts), as committed; a change is a failure.
FACTS_FILE = ROOT / "tests" / "docs" / "gallery_facts.json"
FENCE = re.compile(r"^```python exec[^\n]*\n(?P<code>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
MAX_OUTPUT = 6000
_BLOCKS = itertools.count(1)


class BlockError(RuntimeError):
    """A block of a page raised: the site would show an example that does not run."""


def blocks(markdown: str) -> list[str]:
    """The code of each ``python exec`` fence, in page order."""
    return [m.group("code") for m in FENCE.finditer(markdown)]


def run(code: str, namespace: dict[str, Any]) -> str:
    """Run one block in ``namespace`` and return what it printed (stdout and stderr). The
    block's lines are kept under its own file name (``<docs example 3>``), as a notebook's
    cells are, so that tracebacks and ``dx.trace`` show them."""
    out = io.StringIO()
    filename = f"<docs example {next(_BLOCKS)}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(compile(code, filename, "exec"), namespace)
    except Exception as exc:
        raise BlockError(
            f"this block raised {type(exc).__name__}: {exc}\n{code}\n{traceback.format_exc()}"
        ) from exc
    return out.getvalue()


def render(markdown: str) -> tuple[str, dict[str, Any]]:
    """The page with every ``python exec`` fence run and followed by its output; and the
    namespace the blocks ran in (a gallery page's ``facts`` are read from it)."""
    namespace: dict[str, Any] = {"__name__": "__main__"}

    def one(match: re.Match) -> str:
        code = match.group("code")
        printed = run(code, namespace).rstrip()
        if len(printed) > MAX_OUTPUT:
            printed = printed[:MAX_OUTPUT] + "\n..."
        shown = f"```python\n{code}```\n"
        if printed:
            fence = "````" if "```" in printed else "```"
            shown += f'\n{fence}text title="Output, computed when this site was built"\n'
            shown += f"{printed}\n{fence}\n"
        return shown

    return FENCE.sub(one, markdown), namespace


def slug(src_uri: str) -> str:
    """``gallery/conv1d-uint8.md`` -> ``conv1d-uint8``."""
    return Path(src_uri).stem


def jsonable(facts: Any) -> Any:
    """The facts as JSON would give them back (tuples become lists)."""
    return json.loads(json.dumps(facts, sort_keys=True))


def expected_facts() -> dict[str, Any]:
    return json.loads(FACTS_FILE.read_text(encoding="utf-8"))


def gallery_pages() -> list[Path]:
    return sorted(p for p in (DOCS / "gallery").glob("*.md") if p.name != "index.md")
