"""The gallery's answers (issue 29): each gallery page's probe runs again, exactly as the page
shows it, and the facts it collects (dtypes, verdicts) must be the committed ones in
``gallery_facts.json``. A Keras release that changes one fails here (and fails the site build)
until the page's text and the facts are updated together."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_hooks"))

import exec_blocks  # noqa: E402

PAGES = exec_blocks.gallery_pages()


def test_every_gallery_page_has_committed_facts_and_is_listed():
    expected = exec_blocks.expected_facts()
    assert sorted(exec_blocks.slug(p.name) for p in PAGES) == sorted(expected)
    index = (ROOT / "docs" / "gallery" / "index.md").read_text(encoding="utf-8")
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in PAGES:
        assert f"({page.name})" in index, f"{page.name} is not in the gallery's index"
        assert f"gallery/{page.name}" in mkdocs, f"{page.name} is not in mkdocs.yml's nav"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_gallery_answer_is_unchanged(page):
    code = exec_blocks.blocks(page.read_text(encoding="utf-8"))
    assert code, f"{page.name} has no ```python exec block"
    namespace: dict = {"__name__": "__main__"}
    printed = "".join(exec_blocks.run(block, namespace) for block in code)
    assert "facts" in namespace, f"{page.name}'s probe sets no `facts`"
    facts = exec_blocks.jsonable(namespace["facts"])
    assert facts == exec_blocks.expected_facts()[page.stem], (
        f"{page.name}: Keras's answer changed:\n{json.dumps(facts, indent=2)}\n{printed}"
    )


def test_render_runs_each_block_and_shows_its_output():
    page = "intro\n\n```python exec\nx = 6 * 7\nprint(x)\n```\n\n"
    page += "```python exec\nprint(x + 1)\n```\n"
    rendered, namespace = exec_blocks.render(page)
    assert namespace["x"] == 42
    assert "```python\nx = 6 * 7\nprint(x)\n```" in rendered
    assert rendered.count('title="Output, computed when this site was built"') == 2
    assert "\n42\n" in rendered and "\n43\n" in rendered and "exec" not in rendered


def test_a_block_that_raises_names_itself():
    with pytest.raises(exec_blocks.BlockError, match="ZeroDivisionError"):
        exec_blocks.render("```python exec\n1 / 0\n```\n")
