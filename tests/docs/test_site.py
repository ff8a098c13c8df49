"""The documentation site (issue 29), built as ``./dev.sh docs`` builds it (``--strict``: a
warning fails the build), opened from the file system in Debian's Chromium (the ``browser``
fixture of tests/conftest.py, as the JupyterLab tests launch it): the search finds a page, the
pages show the examples' output computed at build time, a lesson's widget is drawn from its
saved state as a snapshot that answers clicks (no kernel), nothing is fetched from anywhere but
the files, and no page logs an error. A missing component (mkdocs, a plugin, Chromium,
playwright) fails these tests; none skips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    "index.html",
    "getting-started.html",
    "guide/releases.html",
    "gallery/conv1d-uint8.html",
    "lessons/01_explorer.html",
    "reference/api.html",
    "reference/cli.html",
]


@pytest.fixture(scope="session")
def site(tmp_path_factory, executed_lessons) -> Path:
    """The site, built once a run from the lessons' one execution in it (``executed_lessons``:
    ``DTYPE_EXPLORER_DOCS_EXECUTED``; session-scoped: whatever order its tests run in, the site
    is built once); the build's log is kept beside it (``build.log``)."""
    out = tmp_path_factory.mktemp("docs") / "site"
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "PYTHONPATH": str(ROOT),
        "DTYPE_EXPLORER_DOCS_EXECUTED": str(executed_lessons.folder),
    }
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    (out.parent / "build.log").write_text(done.stderr, encoding="utf-8")
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


@pytest.fixture(scope="module")
def artifacts() -> Path:
    path = ROOT / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


class Watched:
    """A page whose requests and console errors are recorded."""

    def __init__(self, browser):
        self.page = browser.new_page()
        self.fetched: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda request: self.fetched.append(request.url))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)

    def left_the_files(self) -> list[str]:
        # blob:null/ : a module the page made in memory (a snapshot's `_esm`), from a file:// page.
        local = ("file://", "data:", "about:", "blob:null/")
        return [url for url in self.fetched if not url.startswith(local)]


def test_search_finds_the_page_that_answers(site, browser, artifacts):
    watched = Watched(browser)
    page = watched.page
    page.goto((site / "index.html").as_uri())
    page.locator("input.md-search__input").click()
    page.keyboard.type("bisect")  # keystrokes: the search answers as the user types
    hits = page.locator(".md-search-result__item a")
    hits.first.wait_for(timeout=20_000)
    targets = hits.evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert any("guide/releases.html" in href for href in targets), targets
    page.screenshot(path=str(artifacts / "docs-search.png"))
    page.locator(".md-search-result__item a[href*='guide/releases.html']").first.click()
    page.wait_for_url("**/guide/releases.html*")
    assert "first changed in Keras 3.12.0" in page.locator("article.md-content__inner").inner_text()
    assert watched.left_the_files() == []
    assert watched.errors == []
    page.close()


@pytest.mark.parametrize("path", PAGES)
def test_page_fetches_nothing_and_logs_no_error(site, browser, path):
    watched = Watched(browser)
    watched.page.goto((site / path).as_uri())
    watched.page.wait_for_load_state("load")
    text = watched.page.locator("article.md-content__inner").inner_text()
    assert text.strip()
    assert watched.left_the_files() == []
    assert watched.errors == []
    watched.page.close()


def test_lesson_widget_is_a_snapshot_that_answers_clicks(site, browser, artifacts):
    watched = Watched(browser)
    page = watched.page
    page.goto((site / "lessons" / "01_explorer.html").as_uri())
    page.wait_for_selector("html[data-widget-snapshots=rendered]", timeout=30_000)
    # Colab's badge is a link in the site's style: its image would be fetched from Colab
    colab = page.locator("a.md-button[href^='https://colab.research.google.com/github/']")
    assert colab.inner_text() == "Open in Colab"
    explorer = page.locator(".dx-snapshot [data-testid=explorer]")
    assert explorer.count() == 1  # the explorer's own DOM, drawn by its `_esm` from the state
    note = page.locator(".dx-snapshot-note").inner_text()
    assert "responds to clicks, but nothing is recomputed" in note
    # The answers the lesson's kernel gave when the site was built, not "probing…".
    assert explorer.locator("[data-testid=status]").inner_text() == "done"
    assert "Backends diverge" in explorer.locator("[data-testid=divergence]").inner_text()
    cards = explorer.locator("[data-testid=results] .dx-answer-head")
    assert cards.count() == 0  # side by side: no stacked card yet
    explorer.locator("[data-testid=view-detail]").click()  # drawn in the page, no kernel asked
    assert explorer.get_attribute("data-view") == "detail"
    assert cards.count() == 3  # a card per backend the lesson ran (jax, tensorflow, numpy)
    page.screenshot(path=str(artifacts / "docs-widget-snapshot.png"), full_page=True)
    assert any(url.startswith("blob:null/") for url in watched.fetched)  # `_esm` from a blob
    assert watched.left_the_files() == []
    assert watched.errors == []
    page.close()


def test_examples_show_their_output_computed_at_build_time(site):
    page = (site / "gallery" / "conv1d-uint8.html").read_text(encoding="utf-8")
    assert "Output, computed when this site was built" in page
    assert "across backends: diverges" in page
    api = (site / "reference" / "api.html").read_text(encoding="utf-8")
    for name in ("probe", "survey", "promotion_table", "check_model", "bisect", "DtypeExplorer"):
        assert f'id="dtype_explorer.{name}"' in api, name
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "dtype-explorer probe" in cli and "--input-dtype" in cli
    lesson = (site / "lessons" / "01_explorer.html").read_text(encoding="utf-8")
    assert "jp-OutputArea" in lesson


def test_every_lesson_ran_once_in_this_run_and_the_site_shows_that_run(site, executed_lessons):
    """Each lesson's page is its execution in this run (every cell executed after the run
    began, none raised), and the build published it without executing it again."""
    log = (site.parent / "build.log").read_text(encoding="utf-8")
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        executed = ROOT / ".cache" / "lessons" / notebook.name  # docs/_hooks/lessons.py
        cells = json.loads(executed.read_text(encoding="utf-8"))["cells"]
        ran = [c for c in cells if c["cell_type"] == "code" and c.get("execution_count")]
        assert ran and all(not _errors(c) for c in ran), notebook.name
        stamps = [c["metadata"]["execution"]["iopub.execute_input"] for c in ran]
        assert min(map(_seconds, stamps)) >= executed_lessons.started, notebook.name
        assert f"lessons/{notebook.name}: published as executed earlier in this run" in log
        page = (site / "lessons" / f"{notebook.stem}.html").read_text(encoding="utf-8")
        assert "jp-OutputArea" in page, notebook.name
    assert "lessons executed in" not in log  # none executed by the build itself
    quantized = (site / "lessons" / "08_quantized_and_hub.html").read_text(encoding="utf-8")
    assert "int8: 5936 bytes stored, float32 12112" in quantized


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _errors(cell: dict) -> list[dict]:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def test_the_whole_map_is_drawn_into_the_site_from_its_store(site, browser):
    """The stored whole map (docs/atlas/whole-map.parquet) is drawn at build time: its index
    lists every target the store holds, the map guide links to it, and a target's page draws
    its grid from its own data file, fetching nothing else, with no error."""
    from dtype_explorer.records import Atlas

    first = next(Atlas.load_parts(ROOT / "docs" / "atlas" / "whole-map.parquet"))
    index = (site / "atlas" / "index.html").read_text()
    assert index.count("data-testid='target-row'") == len(first.targets)
    assert {"Dense", "ops.add", "losses.MeanSquaredError"} <= set(first.targets)
    guide = (site / "guide" / "map.html").read_text()
    assert 'href="../atlas/index.html"' in guide
    assert (site / "atlas" / "atlas.parquet").is_file()
    assert not (site / "atlas" / "atlas.json").exists()  # the store is the download
    watched = Watched(browser)
    watched.page.goto((site / "atlas" / "targets" / "ops.add.html").as_uri())
    watched.page.wait_for_selector("[data-testid=detail][data-loaded=true]", timeout=20_000)
    cells = watched.page.locator("[data-testid=heatmap] td[data-cell]").count()
    assert cells == len(first.dtypes_of("ops.add"))  # one policy column: an op reads none
    assert watched.left_the_files() == []
    assert watched.errors == []
    watched.page.close()
