"""The atlas site opened from the file system in Debian's Chromium (issue 17): nothing is
fetched from anywhere but the files, the search finds a target and opens its page, and a
heatmap cell shows each backend's cast path, error, device and versions as the atlas says."""

from __future__ import annotations

import pytest

from dtype_explorer.analyses import build_atlas

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("atlas-site")
    atlas = build_atlas(
        ["Dense", "Conv1D", "ops.add"],
        ["float32", "uint8"],
        ["float32", "mixed_float16"],
        backends="numpy",
        progress=False,
        out=out,
    )
    return atlas, out


def test_search_then_a_cell_shows_its_cast_path(site, browser, artifacts):
    atlas, out = site
    page = browser.new_page()
    fetched, failures = [], []
    page.on("request", lambda request: fetched.append(request.url))
    page.on("pageerror", lambda error: failures.append(str(error)))
    page.goto((out / "index.html").as_uri())
    assert page.get_by_test_id("target-row").count() == 3

    page.get_by_test_id("search").fill("conv")
    assert page.locator("[data-testid=target-row]:visible").count() == 1  # the table filters
    hit = page.get_by_test_id("search-hit")
    assert hit.all_inner_texts() == ["Conv1D"]
    hit.click()
    page.wait_for_url("**/targets/Conv1D.html")
    assert page.get_by_test_id("target").inner_text() == "Conv1D"

    expected = atlas.cell("Conv1D", "uint8", "mixed_float16")
    cell = page.locator("[data-testid=heatmap] td[data-dtype=uint8][data-policy=mixed_float16]")
    assert cell.get_attribute("data-class") == expected.classification
    cell.click()
    detail = page.get_by_test_id("detail")
    # the click answers where the eye is: the detail is scrolled into the window, highlighted
    page.wait_for_function(
        """() => { const r = document.querySelector('[data-testid=detail]').getBoundingClientRect();
                   return r.top >= 0 && r.top < window.innerHeight - 100; }""",
        timeout=10_000,
    )
    box, window = detail.bounding_box(), page.viewport_size
    assert 0 <= box["y"] < window["height"] - 100, (box, window)  # its top, and some of it, shown
    assert box["x"] >= 0 and box["x"] + box["width"] <= window["width"], (box, window)
    assert "ax-focus" in (detail.get_attribute("class") or "")
    page.screenshot(path=str(artifacts / "atlas-cell-clicked.png"))  # what the window shows
    assert (
        "Conv1D on uint8 under mixed_float16" in detail.get_by_test_id("detail-title").inner_text()
    )
    run = detail.locator("[data-testid=run][data-run=numpy]")
    answer = expected.runs["numpy"]
    steps = run.get_by_test_id("cast-path").locator(".ax-step .ax-chip").all_inner_texts()
    assert steps == [s.dtype for s in answer.cast_path]
    if answer.error_type:
        assert answer.error_type in run.get_by_test_id("error").inner_text()
    versions = run.get_by_test_id("versions").inner_text()
    assert f"keras {atlas.versions['numpy']['keras']}" in versions and "device cpu" in versions
    page.screenshot(path=str(artifacts / "atlas-cell.png"), full_page=True)

    # the page's runs came from its own data file, asked when it opened; no other target's
    assert any(url.endswith("/data/Conv1D.js") for url in fetched), fetched
    assert not any(url.endswith(("/data/Dense.js", "/data/ops.add.js")) for url in fetched)
    page.get_by_test_id("search").fill("ops.a")
    page.keyboard.press("Enter")
    page.wait_for_url("**/targets/ops.add.html")
    assert page.get_by_test_id("target").inner_text() == "ops.add"
    assert all(url.startswith("file://") for url in fetched), fetched
    assert failures == []
    page.close()


def test_a_target_page_holds_its_grid_and_loads_its_runs_on_demand(site, browser):
    """The pages hold what the grids need; a target's runs are in data/<name>.js, loaded from
    file:// when its page opens (the index asks none); the detail needs them."""
    atlas, out = site
    assert "cast_path" not in (out / "targets" / "Dense.html").read_text()
    assert "cast_path" in (out / "data" / "Dense.js").read_text()
    page = browser.new_page()
    fetched = []
    page.on("request", lambda request: fetched.append(request.url))
    page.goto((out / "index.html").as_uri())
    assert not any("/data/" in url for url in fetched), fetched
    cell = atlas.cells_of("Dense")[0]
    page.goto((out / "targets" / "Dense.html").as_uri() + f"#{cell.input_dtype}/{cell.policy}")
    page.wait_for_selector("[data-testid=detail][data-loaded=true]", timeout=10_000)
    title = page.get_by_test_id("detail-title").inner_text()
    assert f"Dense on {cell.input_dtype} under {cell.policy}" in title
    assert page.locator("[data-testid=run]").count() == len(cell.runs)
    assert [u for u in fetched if "/data/" in u] == [(out / "data" / "Dense.js").as_uri()]
    assert all(url.startswith("file://") for url in fetched), fetched
    page.close()


def test_the_grids_drawn_from_the_page_open_a_run_with_its_data_loaded_on_demand(site, browser):
    """The page carries its grids as a compact list of cells (no pre-rendered table); the
    script draws both heatmaps, and a click on a backend's cell opens that cell's detail from
    the data file it loaded, every request a file:// one. Without JavaScript the page says so."""
    atlas, out = site
    html = (out / "targets" / "Conv1D.html").read_text()
    assert "data-cell" not in html and "<noscript>" in html  # no grid drawn in Python
    cells = atlas.cells_of("Conv1D")
    page = browser.new_page()
    fetched, failures = [], []
    page.on("request", lambda request: fetched.append(request.url))
    page.on("pageerror", lambda error: failures.append(str(error)))
    page.goto((out / "targets" / "Conv1D.html").as_uri())
    page.wait_for_selector("[data-testid=detail][data-loaded=true]", timeout=10_000)
    assert page.locator("[data-testid=heatmap] td[data-cell]").count() == len(cells)
    runs = sorted({r for c in cells for r in c.runs})
    drawn = sum(len(c.runs) for c in cells)
    assert page.locator("[data-testid=heatmap-runs] td[data-cell]").count() == drawn
    expected = atlas.cell("Conv1D", "float32", "mixed_float16")
    grid = page.get_by_test_id("heatmap-runs")
    cell = grid.locator("td[data-dtype=float32][data-policy=mixed_float16]").nth(
        runs.index("numpy")
    )
    answer = expected.runs["numpy"]
    assert cell.get_attribute("data-class") == answer.classification
    assert (
        cell.get_attribute("title")
        == f"float32 under mixed_float16 on numpy: {answer.classification}"
    )
    cell.click()
    detail = page.get_by_test_id("detail")
    title = detail.get_by_test_id("detail-title").inner_text()
    assert "Conv1D on float32 under mixed_float16" in title and expected.classification in title
    run = detail.locator("[data-testid=run][data-run=numpy]")
    steps = run.get_by_test_id("cast-path").locator(".ax-step .ax-chip").all_inner_texts()
    assert steps == [s.dtype for s in answer.cast_path]
    assert page.evaluate("location.hash") == "#float32/mixed_float16"
    assert [u for u in fetched if "/data/" in u] == [(out / "data" / "Conv1D.js").as_uri()]
    assert all(url.startswith("file://") for url in fetched), fetched
    assert failures == []
    page.close()
    context = browser.new_context(java_script_enabled=False)
    plain = context.new_page()
    plain.goto((out / "targets" / "Conv1D.html").as_uri())
    assert "turn it on" in plain.get_by_test_id("noscript").inner_text()
    context.close()


def test_an_op_page_shows_one_policy_column_said_to_be_any_policy(site, browser, artifacts):
    """ops.add in an atlas of layers and ops was probed under float32 only (it reads no
    policy): its page draws one column headed "any policy", no empty columns for the rest."""
    atlas, out = site
    page = browser.new_page()
    page.goto((out / "targets" / "ops.add.html").as_uri())
    page.wait_for_selector("[data-testid=detail][data-loaded=true]", timeout=10_000)
    heads = page.locator("[data-testid=heatmap] tr:first-child th")
    assert heads.count() == 2  # the row header, then float32
    assert "any policy: an op reads none" in heads.nth(1).inner_text()
    assert page.locator("[data-testid=heatmap] td.ax-none").count() == 0
    assert page.locator("[data-testid=heatmap] td[data-cell]").count() == 2
    meta = page.get_by_test_id("meta").first.inner_text()
    assert "2 layers x 2 input dtypes x 2 policies + 1 op x 2 input dtypes" in meta
    assert f"= {len(atlas.cells)} cells" in meta
    page.screenshot(path=str(artifacts / "atlas-op-page.png"), full_page=True)
    page.close()


def test_a_layer_page_of_an_atlas_with_weak_scalars_has_no_such_rows(browser, tmp_path):
    """An atlas of layers and ops on a weak Python scalar: ops.add's page has its python_int
    row; Dense's (a layer takes arrays only) has none, its caption says why."""
    atlas = build_atlas(
        ["Dense", "ops.add"], ["int8", "python_int"], ["float32"], backends="numpy",
        progress=False, out=tmp_path,
    )  # fmt: skip
    assert len(atlas.cells) == 3 and atlas.op_dtypes == ("python_int",)
    page = browser.new_page()
    for target, rows in (("Dense", ["int8"]), ("ops.add", ["int8", "python_int"])):
        page.goto((tmp_path / "targets" / f"{target}.html").as_uri())
        page.wait_for_selector("[data-testid=detail][data-loaded=true]", timeout=10_000)
        assert page.locator("[data-testid=heatmap] th.ax-row").all_inner_texts() == rows
        note = page.locator("[data-testid=heatmap] [data-testid=dtype-note]")
        assert note.count() == (target == "Dense")
        if target == "Dense":
            assert "no python_int: arrays only" in note.inner_text()
        assert page.locator("[data-testid=heatmap] td.ax-none").count() == 0
    page.close()
