"""The notebook cards of real probe results: cast-path SVG, views, verdict, error, banner."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dtype_explorer.records import ProbeResult, ProbeSet
from dtype_explorer.views import cast_path_svg, probe_set_html, result_html

SVG = "{http://www.w3.org/2000/svg}"
FAILED = "torch"  # a backend that raised, in the fixture


#: The page's fixtures: records of real probes (js/test/fixtures/generate.py), kept current by
#: tests/records/test_js_fixtures.py.
FIXTURES = Path(__file__).resolve().parents[2] / "js" / "test" / "fixtures"


def fixture_set(name: str, backends: tuple[str, ...] | None = None) -> ProbeSet:
    """The records of the page's fixture ``name`` (all its backends, or these)."""
    results = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))["results"]
    return ProbeSet(
        results=tuple(ProbeResult.from_dict(results[b]) for b in backends or tuple(results))
    )


@pytest.fixture(scope="module")
def conv_uint8() -> ProbeSet:
    """Conv1D on uint8: float32 on jax, an error on torch (scenario 1), as probed for the
    page's fixture ``conv1d-uint8.json`` (the cards need only the records)."""
    return fixture_set("conv1d-uint8", ("jax", FAILED))


def test_cast_path_svg_stages_chips_and_highlights() -> None:
    result = fixture_set("dense-float64-mixed")["jax"]  # float64 data, mixed_float16
    svg = ET.fromstring(cast_path_svg(result))
    labels = [t.text for t in svg.iter(f"{SVG}text")]
    stages = [s for s in ("input", "converted", "autocast", "variables", "output") if s in labels]
    assert stages == [
        s for s in ("input", "converted", "autocast", "variables", "output") if result.steps(s)
    ]
    assert "float64" in labels and "float16" in labels
    # the dtype changes on the way (float64 -> float32 -> float16): accented edges
    accented = [p for p in svg.iter(f"{SVG}path") if "--dx-warn" in p.get("style", "")]
    assert accented
    # each step's note is a hover title
    titles = " ".join(t.text or "" for t in svg.iter(f"{SVG}title"))
    assert any(step.note and step.note[:20] in titles for step in result.cast_path)


def test_result_card(conv_uint8: ProbeSet) -> None:
    ok = result_html(conv_uint8["jax"])
    assert "<svg" in ok and "Conv1D" in ok and "documented" in ok and "observed" in ok
    # the theme's variables: JupyterLab's, else VS Code's, else the palette's light or dark
    assert "--dx-bg: var(--jp-layout-color1, var(--vscode-editor-background, #ffffff))" in ok
    assert conv_uint8["jax"].verdict in ok
    for line in conv_uint8["jax"].basis:
        assert line.split(":")[0].replace("'", "&#x27;") in ok
    failed = conv_uint8[FAILED]
    card = failed._repr_html_()
    assert failed.error is not None and failed.error.type in card and "raised" in card
    # the error ends the cast path as a red node
    svg = ET.fromstring(cast_path_svg(failed))
    assert failed.error.type in [t.text for t in svg.iter(f"{SVG}text")]


def test_probe_set_card(conv_uint8: ProbeSet) -> None:
    card = probe_set_html(conv_uint8)
    assert conv_uint8.verdict == "diverges"
    assert "Backends disagree" in card
    assert card.count("<tr><td><b>") == 2
    assert card == conv_uint8._repr_html_()
    same = fixture_set("dense-four-backends")  # float16 on every backend
    assert "Backends disagree" not in probe_set_html(same)


def test_text_is_escaped(conv_uint8: ProbeSet) -> None:
    failed = conv_uint8[FAILED]
    nasty = failed.error.model_copy(update={"message": "<script>alert(1)</script>"})
    card = result_html(failed.model_copy(update={"error": nasty}))
    assert "<script>" not in card and "&lt;script&gt;" in card


def test_result_card_lists_the_trace_with_changes_edged_and_lines_linked(
    conv_uint8: ProbeSet,
) -> None:
    from dtype_explorer.views._markup import ACCENT

    card = result_html(conv_uint8["jax"])
    conv = next(s for s in conv_uint8["jax"].call_trace() if s.op == "ops.nn.conv")
    # the conv promotes uint8: its item is edged in the cast path's changed colour
    item = card.split(f"data-step='{conv.index}'", 1)
    assert len(item) == 2 and f"border-left-color:{ACCENT}" in item[0].rsplit("<li", 1)[1]
    assert "promoted: result_type(uint8, float32) = float32" in item[1].split("</li>")[0]
    release = conv_uint8["jax"].versions["keras"]  # the links name the release that ran
    url = f"https://github.com/keras-team/keras/blob/v{release}/keras/src/layers/"
    assert f"href='{url}convolutional/conv1d.py#L{conv.source.line}'" in card
    # the trace comes after the cast path in the card
    assert card.index("<svg") < card.index("class='dx-trace'")
    # across backends: the card names where the traces part
    assert "Traces part at <code>ops.nn.conv</code>" in probe_set_html(conv_uint8)


def test_first_nonfinite_step_stands_out_in_the_card_and_the_text() -> None:
    from dtype_explorer.views import format_result
    from dtype_explorer.views._markup import ERROR

    r = fixture_set("softmax-large-mixed")["jax"]  # large values, mixed_float16
    first = r.first_nonfinite_step()
    card = result_html(r)
    head = card.split(f"data-step='{first.index}'", 1)[0].rsplit("<li", 1)[1]
    assert f"border-left-color:{ERROR}" in head
    assert "first inf/NaN from finite inputs" in card
    text = str(r)
    assert f"first inf/NaN from finite values: #{first.index} {first.op}" in text
    assert "dtype_policies/dtype_policy.py" in text and "https://" not in text
    assert "https://github.com/keras-team/keras/blob/" in format_result(r, detail=True)


def test_the_card_and_the_text_list_what_the_tool_supplied_and_only_that() -> None:
    """Hand-built records: a line "supplied by dtype-explorer: ..." where parts were
    supplied (each part's reason kept), none where the user gave every part."""
    from dtype_explorer.records import ProbeResult, ProbeSpec, Supplied
    from dtype_explorer.views import format_result

    spec = ProbeSpec(target="Dense", filled=("policy",))
    supplied = (
        Supplied(part="policy", value="float32", why="no policy given"),
        Supplied(part="shape", value="(2, 4)", why="no shape given: the catalog's"),
    )
    result = ProbeResult(spec=spec, status="ok", backend="jax", supplied=supplied)
    line = "supplied by dtype-explorer: policy: float32 (no policy given); shape: (2, 4)"
    assert line in result_html(result) and line in format_result(result)
    given = result.model_copy(update={"supplied": ()})
    assert "supplied by" not in result_html(given) + format_result(given)
