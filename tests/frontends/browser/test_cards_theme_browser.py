"""A probe set's notebook card outside JupyterLab, in Debian's Chromium: with no JupyterLab
variables, it takes the palette's light or dark colours from what the page says (VS Code's
body class, Colab's and marimo's marks) or, where it says nothing, from the system's
preference, and every text in it stays at WCAG AA contrast. No server: the card's HTML is the
page (the records of real probes, js/test/fixtures)."""

from __future__ import annotations

import pytest

from dtype_explorer.views import PALETTE, probe_set_html
from tests.frontends.browser.page_contrast import below_aa
from tests.views.test_html import fixture_set

pytestmark = pytest.mark.browser

#: (the system's preference, <html> attributes, <body> attributes, the theme the card takes)
PAGES = [
    ("light", "", "", "light"),
    ("dark", "", "", "dark"),  # a plain page says nothing: the system's preference
    ("dark", "", "class='vscode-light'", "light"),  # VS Code's light theme wins over it
    ("light", "", "class='vscode-dark'", "dark"),
    ("light", "theme='dark'", "", "dark"),  # Colab
    ("light", "", "class='dark dark-theme' data-theme='dark'", "dark"),  # marimo
    ("dark", "", "class='light light-theme' data-theme='light'", "light"),
]


def test_a_card_takes_the_pages_theme_outside_jupyterlab_at_aa_contrast(browser, artifacts):
    card = probe_set_html(fixture_set("conv1d-uint8"))  # jax answers, torch raises
    failing = []
    for scheme, html, body, theme in PAGES:
        context = browser.new_context(viewport={"width": 1000, "height": 900}, color_scheme=scheme)
        page = context.new_page()
        try:
            page.set_content(f"<!doctype html><html {html}><body {body}>{card}</body></html>")
            shown = page.locator(".dx-card").first
            background = shown.evaluate("el => getComputedStyle(el).backgroundColor")
            colour = PALETTE["themes"][theme]["bg"]
            expected = "rgb({}, {}, {})".format(*(int(colour[i : i + 2], 16) for i in (1, 3, 5)))
            assert background == expected, (scheme, html, body, background)
            low, measured = below_aa(shown)
            assert measured >= 10, (scheme, html, body, measured)
            page_said = f"{scheme} {html} {body}"
            failing += [f"{page_said}: {t['what']} {t['text']!r} {t['ratio']}" for t in low]
            if not html and not body:
                shown.screenshot(path=artifacts / f"card-outside-jupyterlab-{theme}.png")
        finally:
            context.close()
    assert not failing, "\n".join(failing)
