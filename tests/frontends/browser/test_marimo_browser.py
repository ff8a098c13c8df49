"""The explorer in a real marimo notebook (notebooks/explorer_marimo.py, served by ``marimo run``)
driven through Debian's Chromium: marimo shows it as its own anywidget (every control inside
it), a layer picked in the widget is answered on numpy as raw Keras answers it, the next cell
reads the answer from the widget's traits, and marimo's light and dark modes both read at WCAG
AA contrast. Screenshots land in ``test-artifacts/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.frontends.browser.page_contrast import below_aa

pytestmark = pytest.mark.browser

PROBE_TIMEOUT_MS = 180_000
FIRST_ANSWER = """root => root.dataset.pending === "0"
  && root.querySelectorAll('[data-testid="column-numpy"]').length > 0"""
SENT = "([root, before]) => root.dataset.sent !== before"
ANSWERED = """root => root.dataset.requestId === root.dataset.sent
  && root.dataset.pending === "0" """
#: Raw Keras on numpy, the ground truth: the layer built and called as the widget says it was;
#: its outcome as ``ProbeResult.outcome`` words it (the output dtype, or "raises <error>"), and
#: the policy's compute dtype.
RAW_KERAS = """\
import json, sys
import keras, numpy as np
target, kwargs, shape, dtype, policy = json.loads(sys.argv[1])
try:
    out = getattr(keras.layers, target)(**kwargs, dtype=policy)(np.ones(shape, dtype=dtype))
    outcome = keras.backend.standardize_dtype(out.dtype)
except Exception as error:
    outcome = f"raises {type(error).__name__}"
print(json.dumps([outcome, keras.DTypePolicy(policy).compute_dtype]))
"""


def _open(browser, url: str, artifacts, name: str):
    """A page on ``url`` with the explorer drawn and its first answer in."""
    context = browser.new_context(viewport={"width": 1400, "height": 2000})
    page = context.new_page()
    try:
        page.goto(url)
        root = page.locator('[data-testid="explorer"]')
        root.wait_for(timeout=PROBE_TIMEOUT_MS)
        page.wait_for_function(FIRST_ANSWER, arg=root.element_handle(), timeout=PROBE_TIMEOUT_MS)
    except Exception:
        page.screenshot(path=artifacts / f"marimo-{name}-failed-to-show.png")
        context.close()
        raise
    return context, page, root


def _change(page, root, action) -> None:
    """Do ``action`` (a control change) and wait until numpy answered the request it sent."""
    before = root.get_attribute("data-sent") or ""
    action()
    page.wait_for_function(SENT, arg=[root.element_handle(), before], timeout=10_000)
    page.wait_for_function(ANSWERED, arg=root.element_handle(), timeout=PROBE_TIMEOUT_MS)


@pytest.fixture(scope="module")
def marimo_page(marimo_app, browser, artifacts):
    """The marimo notebook open in its light mode (marimo's default), the explorer answered."""
    context, page, root = _open(browser, marimo_app.open_url(), artifacts, "light")
    yield page, root
    context.close()


def test_a_layer_picked_in_the_widget_is_answered_as_raw_keras_answers(marimo_page, artifacts):
    page, root = marimo_page
    # marimo's own anywidget element holds the explorer (not an ipywidgets output)
    assert root.evaluate("el => el.getRootNode().host?.tagName") == "MARIMO-ANYWIDGET"
    _change(page, root, lambda: page.select_option('[data-testid="target"]', "Conv1D"))
    if page.input_value('[data-testid="input-dtype-0"]') != "float32":
        _change(page, root, lambda: page.select_option('[data-testid="input-dtype-0"]', "float32"))
    asked = [
        "Conv1D",
        json.loads(page.input_value('[data-testid="kwargs"]')),
        json.loads(page.input_value('[data-testid="shape"]'))[0],
        "float32",
        page.input_value('[data-testid="policy"]'),  # the notebook's mixed_float16
    ]
    raw = subprocess.run(
        [sys.executable, "-c", RAW_KERAS, json.dumps(asked)],
        env={**os.environ, "KERAS_BACKEND": "numpy"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    expected, compute = json.loads(raw.stdout.strip().splitlines()[-1])

    page.click('[data-testid="view-detail"]')
    card = page.locator('[data-testid="result-numpy"]')
    assert card.get_attribute("data-status") == "ok"
    assert card.locator('[data-testid="output-dtype"]').inner_text() == expected
    path = card.locator('[data-testid="cast-path"]')
    assert path.locator('.dx-node[data-stage="input"]').get_attribute("data-dtype") == "float32"
    assert path.locator('.dx-node[data-stage="autocast"]').get_attribute("data-dtype") == compute
    assert path.locator('.dx-node[data-stage="output"]').get_attribute("data-dtype") == expected
    # the next cell reran on the widget's new request and read its answer from the traits
    said = f"Conv1D on float32 under {asked[4]} returns {expected}"
    page.get_by_text(said).wait_for(timeout=PROBE_TIMEOUT_MS)
    page.screenshot(path=artifacts / "marimo-conv1d-mixed-float16.png", full_page=True)


def test_marimo_light_and_dark_modes_keep_every_text_at_aa_contrast(
    marimo_page, marimo_app, browser, artifacts
):
    """marimo's light mode (the notebook as opened) and its dark mode (``?theme=dark``, a
    session of its own): the explorer follows marimo's theme, every text at WCAG AA."""
    _, root = marimo_page
    context, dark_page, dark_root = _open(
        browser, marimo_app.open_url("&theme=dark"), artifacts, "dark"
    )
    try:
        failing, backgrounds = [], {}
        for theme, shown in (("light", root), ("dark", dark_root)):
            assert shown.get_attribute("data-theme") == theme
            shown.screenshot(path=artifacts / f"marimo-explorer-{theme}.png")
            low, measured = below_aa(shown)
            assert measured >= 20, (theme, measured)
            failing += [f"{theme}: {t['what']} {t['text']!r} {t['ratio']}" for t in low]
            backgrounds[theme] = shown.evaluate("el => getComputedStyle(el).backgroundColor")
        dark_page.screenshot(path=artifacts / "marimo-page-dark.png", full_page=True)
        assert not failing, "\n".join(failing)
        assert backgrounds["light"] != backgrounds["dark"]
    finally:
        context.close()
