"""The plotly figures fit their output and name what was surveyed (hand-built records)."""

from __future__ import annotations

from dtype_explorer.records import ErrorInfo, ProbeResult, ProbeSpec, Survey
from dtype_explorer.views._figures import HOVER_WIDTH, survey_figure


def _survey(targets: tuple[str, ...]) -> Survey:
    results = []
    for target in targets:
        for backend, ok in (("jax", True), ("torch", False)):
            spec = ProbeSpec(target=target, input_dtypes=("int8",), backend=backend)
            error = ErrorInfo(type="RuntimeError", message="a long reason " * 20)
            results.append(
                ProbeResult(
                    spec=spec,
                    status="ok",
                    backend=backend,
                    output_dtype="int8",
                    verdict="as-documented",
                )
                if ok
                else ProbeResult(spec=spec, status="error", backend=backend, error=error)
            )
    return Survey(
        targets=targets,
        input_dtypes=("int8",),
        policies=("float32",),
        backends=("jax", "torch"),
        compute_dtypes={"float32": "float32"},
        results=tuple(results),
    )


def test_a_survey_figure_fills_its_width_and_wraps_its_hover_inside():
    figure = survey_figure(_survey(("ops.add",)))
    assert figure.layout.autosize is True and figure.layout.width is None
    assert figure.layout.title.x == 0 and figure.layout.modebar.orientation == "v"
    assert figure.layout.hoverlabel.align == "left"
    hover = figure.data[0].customdata[0][0]
    lines = hover.split("<br>")
    assert any("RuntimeError" in line for line in lines)
    assert all(len(line) <= HOVER_WIDTH + 40 for line in lines[2:]), lines  # wrapped, not cut


def test_the_title_names_what_was_surveyed():
    assert survey_figure(_survey(("ops.add",))).layout.title.text.startswith("Op survey")
    assert survey_figure(_survey(("Dense",))).layout.title.text.startswith("Layer survey")
    mixed = survey_figure(_survey(("Dense", "ops.add"))).layout.title.text
    assert mixed.startswith("Survey of layers and ops")


def test_a_figure_draws_its_text_in_the_theme_it_is_given_with_aa_contrast():
    import plotly.io as pio
    import pytest

    from dtype_explorer.errors import InvalidSpecError
    from dtype_explorer.views import PALETTE
    from tests.views.test_palette import contrast

    survey = _survey(("ops.add", "Dense"))
    for theme in ("light", "dark"):
        colours = PALETTE["themes"][theme]
        layout = survey_figure(survey, theme=theme).layout
        # the figure's own background and text, both from the palette's theme
        background, text = layout.template.layout.paper_bgcolor, layout.template.layout.font.color
        assert (background, text) == (colours["bg"], colours["fg"])
        assert layout.template.layout.hoverlabel.font.color == colours["fg"]
        assert contrast(text, background) >= 4.5
        assert contrast(layout.template.layout.title.font.color, background) >= 4.5
    # no theme given: plotly's default template decides (a dark one: the dark theme)
    assert survey_figure(survey).layout.template.layout.paper_bgcolor == "#ffffff"
    default = pio.templates.default
    try:
        pio.templates.default = "plotly_dark"
        dark = PALETTE["themes"]["dark"]["bg"]
        assert survey.figure(theme=None).layout.template.layout.paper_bgcolor == dark
    finally:
        pio.templates.default = default
    with pytest.raises(InvalidSpecError, match=r"unknown theme 'drak'.*did you mean 'dark'"):
        survey_figure(survey, theme="drak")
