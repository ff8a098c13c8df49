"""One visual language: one palette for the cards, the figures and the widget, and stylesheets
scoped to their own roots."""

from __future__ import annotations

import re
from pathlib import Path

from dtype_explorer import dtypes
from dtype_explorer.records import CLASSIFICATIONS, KINDS, SEVERITIES
from dtype_explorer.views import PALETTE, dtype_color, dtype_kind
from dtype_explorer.views._markup import CSS as CARDS_CSS

ROOT = Path(__file__).resolve().parents[2]
HEX = re.compile(r"#[0-9a-fA-F]{3,8}\b")


def _selectors(css: str) -> list[str]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    css = re.sub(r"@keyframes[^{]*\{(?:[^{}]*\{[^}]*\})*[^}]*\}", "", css)
    css = re.sub(r"@media[^{]*\{((?:[^{}]*\{[^}]*\})*)[^}]*\}", r"\1", css)  # its rules, kept
    return [s.strip() for block in re.findall(r"([^{}]+)\{[^}]*\}", css) for s in _split(block)]


def _split(selectors: str) -> list[str]:
    """A selector list split at its top-level commas (not those inside ``:is(...)``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(selectors):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(selectors[start:i])
            start = i + 1
    return [*parts, selectors[start:]]


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
    # the widget's and the cards' stylesheets hold none either: their colours are the theme's
    for css in (ROOT / "js" / "src" / "widget.css", ROOT / "dtype_explorer/views/cards.css"):
        assert not HEX.search(css.read_text()), f"{css.name} holds a colour literal"
    # the package holds no script of its own beside the bundles js/ builds
    assert not list((ROOT / "dtype_explorer" / "views").glob("*.js"))
    for css in (ROOT / "js" / "src" / "widget.css", ROOT / "dtype_explorer/views/atlas.css"):
        for colour in [
            c for section in ("dtype_kinds", "survey_classes") for c in PALETTE[section].values()
        ]:
            assert colour not in css.read_text(), f"{colour} is the palette's, not {css.name}'s"


def test_each_stylesheet_is_scoped_to_its_own_root():
    cards = CARDS_CSS  # the theme's variables (light, dark where the page says so), then the rules
    assert "@media (prefers-color-scheme: dark)" in cards
    widget = (ROOT / "js" / "src" / "widget.css").read_text()
    assert all(s.startswith(".dx-card") for s in _selectors(cards)), _selectors(cards)
    assert all(s.startswith(".dx-root") for s in _selectors(widget)), [
        s for s in _selectors(widget) if not s.startswith(".dx-root")
    ]
    # the widget's own cards are not .dx-card, so the static cards' rules cannot reach them
    assert not re.search(r"\.dx-card\b", widget)


def _hex(colour: str) -> str:
    """A palette colour's hex (a CSS expression's fallback: ``var(--jp-x, #c62828)``)."""
    found = HEX.search(colour)
    assert found, f"{colour!r} names no hex colour to check"
    return found[0] if len(found[0]) == 7 else "#" + "".join(2 * c for c in found[0][1:4])


def _luminance(colour: str) -> float:
    channels = [int(_hex(colour)[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: str, bg: str) -> float:
    """The WCAG contrast ratio of two colours (1 to 21)."""
    high, low = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _tint(colour: str, share: float, over: str = "#ffffff") -> str:
    """``colour`` mixed into ``over`` (CSS ``color-mix(in srgb, colour share%, over)``)."""
    a, b = _hex(colour), _hex(over)
    mixed = [
        round(int(a[i : i + 2], 16) * share + int(b[i : i + 2], 16) * (1 - share))
        for i in (1, 3, 5)
    ]
    return "#" + "".join(f"{c:02x}" for c in mixed)


def test_every_text_and_background_pair_of_the_palette_meets_wcag_aa():
    failing = []
    white, ink = "#ffffff", _hex(PALETTE["ui"]["foreground"])
    # every fill with the text colour the palette draws on it (figures, atlas, cards)
    for fill, text in PALETTE["text_on"].items():
        failing += [(text, fill)] if contrast(text, fill) < 4.5 else []
    fills = [
        c
        for section in ("dtype_kinds", "verdicts", "statuses", "survey_classes", "promotion_kinds")
        for c in PALETTE[section].values()
    ]
    assert set(fills) <= set(PALETTE["text_on"]), set(fills) - set(PALETTE["text_on"])
    # verdict badges and status marks: their colour as text on its 10% tint, and on white
    for section in ("verdicts", "statuses"):
        for colour in PALETTE[section].values():
            for bg in (white, _tint(colour, 0.10)):
                failing += [(colour, bg)] if contrast(colour, bg) < 4.5 else []
    # the widget's chips: ink on each dtype's 16% tint; errors, warnings and muted text on white
    for colour in PALETTE["dtype_kinds"].values():
        failing += [(ink, c)] if contrast(ink, c := _tint(colour, 0.16)) < 4.5 else []
    for colour in (*PALETTE["severities"].values(), PALETTE["ui"]["error"], PALETTE["ui"]["muted"]):
        failing += [(colour, white)] if contrast(colour, white) < 4.5 else []
    assert not failing, [f"{fg} on {bg}: {contrast(fg, bg):.2f}" for fg, bg in failing]


def test_a_contrast_ratio_is_computed_as_wcag_defines_it():
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0
    assert round(contrast("#777777", "#ffffff"), 2) == 4.48  # the classic just-failing grey


def test_dtype_colours_are_for_dtypes_only_and_red_only_for_errors():
    dtype_colours = set(PALETTE["dtype_kinds"].values())
    for section in ("verdicts", "statuses", "survey_classes", "promotion_kinds"):
        shared = dtype_colours & {_hex(c) for c in PALETTE[section].values()}
        assert not shared, f"{section} uses dtype colours {shared}"
    red = _hex(PALETTE["ui"]["error"])
    reds = {
        f"{section}.{name}"
        for section in ("verdicts", "statuses", "survey_classes", "promotion_kinds")
        for name, c in PALETTE[section].items()
        if _hex(c) == red
    }
    assert reds == {
        "verdicts.error",
        "statuses.error",
        "statuses.invalid",
        "statuses.crashed",
        "statuses.timeout",
        "survey_classes.raises",
        "promotion_kinds.keras-disagrees",
    }
    # documented casts and promotions are neutral, mismatches amber: none of them red
    for name in ("casts-to-compute", "keeps-input", "other-dtype", "declared-mismatch"):
        assert _hex(PALETTE["survey_classes"][name]) != red
    # every verdict and class has a mark of its own beside its colour
    for section in ("verdicts", "survey_classes", "promotion_kinds"):
        assert set(PALETTE[section]) <= set(PALETTE["marks"]), section


def test_each_theme_reads_at_aa_contrast_text_controls_and_tones_included():
    """The light and the dark colours (palette.json "themes"), as the widget and the cards draw
    them where the host has no colours of its own, and the verdicts and statuses the widget
    writes as text (their "on_dark" colours on a dark background)."""
    failing = []
    for name, theme in PALETTE["themes"].items():
        assert set(theme) == set(PALETTE["themes"]["light"]), name  # the same roles in each
        for bg in (theme["bg"], theme["bg2"], theme["input-bg"]):
            for role in ("fg", "fg0", "fg2", "accent", "error", "warn", "success", "info"):
                failing += [(name, role, bg)] if contrast(theme[role], bg) < 4.5 else []
        on_accent = contrast(theme["on-accent"], theme["accent"])  # a button's text
        failing += [(name, "on-accent", theme["accent"])] if on_accent < 4.5 else []
        # a dtype chip: the strongest text on the dtype's 16% tint of the background
        for colour in PALETTE["dtype_kinds"].values():
            tint = _tint(colour, 0.16, theme["bg"])
            failing += [(name, "fg0", tint)] if contrast(theme["fg0"], tint) < 4.5 else []
        tones = PALETTE["on_dark"] if name == "dark" else PALETTE
        for section in ("verdicts", "statuses"):
            assert set(tones[section]) == set(PALETTE[section]), (name, section)
            for verdict, colour in tones[section].items():
                for bg in (theme["bg"], _tint(colour, 0.10, theme["bg"])):
                    failing += [(name, verdict, bg)] if contrast(colour, bg) < 4.5 else []
    assert not failing, failing
    # dark is dark and light is light
    assert (
        _luminance(PALETTE["themes"]["dark"]["bg"])
        < 0.05
        < _luminance(PALETTE["themes"]["light"]["bg"])
    )


def test_a_training_runs_colours_are_plain_and_not_a_dtypes():
    colours = PALETTE["training"]
    assert set(colours) == {"loss", "loss_scale", "skipped", "nonfinite"}
    assert all(HEX.fullmatch(c) for c in colours.values())  # plotly draws them
    assert not set(colours.values()) & set(PALETTE["dtype_kinds"].values())
    for theme in PALETTE["themes"].values():  # a line reads on either theme's background
        assert all(contrast(c, theme["bg"]) >= 3 for c in colours.values()), theme["bg"]
