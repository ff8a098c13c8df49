"""One visual language: one palette for the cards, the figures and the widget, and stylesheets
scoped to their own roots."""

from __future__ import annotations

import re
from pathlib import Path

from dtype_explorer import dtypes
from dtype_explorer.records import CLASSIFICATIONS, KINDS, SEVERITIES
from dtype_explorer.views import PALETTE, dtype_color, dtype_kind

ROOT = Path(__file__).resolve().parents[2]
HEX = re.compile(r"#[0-9a-fA-F]{3,8}\b")


def _selectors(css: str) -> list[str]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    css = re.sub(r"@keyframes[^{]*\{(?:[^{}]*\{[^}]*\})*[^}]*\}", "", css)
    return [s.strip() for block in re.findall(r"([^{}]+)\{[^}]*\}", css) for s in block.split(",")]


def test_the_palette_names_every_kind_the_records_know():
    assert set(PALETTE["survey_classes"]) == set(CLASSIFICATIONS)
    assert set(PALETTE["promotion_kinds"]) == set(KINDS)
    assert set(PALETTE["severities"]) == set(SEVERITIES)
    kinds = {dtype_kind(name) for name in dtypes.all_input_dtypes()}
    assert kinds <= set(PALETTE["dtype_kinds"]), kinds - set(PALETTE["dtype_kinds"])
    # plotly draws survey classes and promotion kinds: they must be plain colours
    for section in ("survey_classes", "promotion_kinds", "dtype_kinds"):
        assert all(HEX.fullmatch(c) for c in PALETTE[section].values()), section


def test_the_families_table_covers_every_keras_dtype():
    assert set(dtypes.keras_dtypes()) | set(dtypes.PYTHON_SCALARS) == set(dtypes._FAMILY_OF)
    assert dtype_color("float16") != dtype_color("bfloat16")


def test_the_widget_reads_the_same_palette_and_holds_no_colour_of_its_own():
    palette_js = (ROOT / "js" / "src" / "palette.js").read_text()
    assert "dtype_explorer/views/palette.json" in palette_js
    sources = {source.name: source.read_text() for source in (ROOT / "js" / "src").glob("*.js")}
    assert "atlas.js" in sources  # the atlas site's script is one of them, checked alike
    assert 'from "./palette.js"' in sources["atlas.js"]
    for name, text in sources.items():
        assert not HEX.search(text), f"{name} holds a colour literal"
    # the package holds no script of its own beside the bundles js/ builds
    assert not list((ROOT / "dtype_explorer" / "views").glob("*.js"))
    for css in (ROOT / "js" / "src" / "widget.css", ROOT / "dtype_explorer/views/atlas.css"):
        for colour in [
            c for section in ("dtype_kinds", "survey_classes") for c in PALETTE[section].values()
        ]:
            assert colour not in css.read_text(), f"{colour} is the palette's, not {css.name}'s"


def test_each_stylesheet_is_scoped_to_its_own_root():
    cards = (ROOT / "dtype_explorer" / "views" / "cards.css").read_text()
    widget = (ROOT / "js" / "src" / "widget.css").read_text()
    assert all(s.startswith(".dx-card") for s in _selectors(cards)), _selectors(cards)
    assert all(s.startswith(".dx-root") for s in _selectors(widget)), [
        s for s in _selectors(widget) if not s.startswith(".dx-root")
    ]
    # the widget's own cards are not .dx-card, so the static cards' rules cannot reach them
    assert not re.search(r"\.dx-card\b", widget)
