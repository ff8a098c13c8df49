"""The page's fixtures (``js/test/fixtures/*.json``, made from real probes) still read into the
current records, and say what the records say today: a record change that would break the
page's tests fails here too. After a change that only adds or rewords a computed fact,
``python js/test/fixtures/generate.py --records`` brings the fixtures up to date (no Keras)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dtype_explorer.frontends._contract import REQUEST_KEYS, TRAITS
from dtype_explorer.records import AtlasCell, ProbeResult, ProbeSet, TraceDivergence

FIXTURES = Path(__file__).resolve().parents[2] / "js" / "test" / "fixtures"
PROBES = sorted(p for p in FIXTURES.glob("*.json") if "results" in json.loads(p.read_text()))
STALE = "the fixture was written by other records: rerun js/test/fixtures/generate.py --records"


def test_every_fixture_is_checked():
    names = {p.name for p in FIXTURES.glob("*.json")}
    assert {p.name for p in PROBES} | {"widget-state.json", "atlas-pages.json"} == names
    assert len(PROBES) >= 8


@pytest.mark.parametrize("path", PROBES, ids=lambda p: p.stem)
def test_a_probe_fixture_reads_into_the_records_and_back(path: Path):
    fixture = json.loads(path.read_text())
    results = {b: ProbeResult.from_dict(r) for b, r in fixture["results"].items()}
    for backend, result in results.items():
        assert result.backend == backend
        assert result.to_dict() == fixture["results"][backend], STALE
    assert (
        ProbeSet(results=tuple(results.values())).comparison().to_dict() == (fixture["comparison"])
    ), STALE
    assert ProbeSet(results=tuple(results.values())).as_code().to_dict() == fixture["code"], STALE
    # a backend that cannot run the request (fit on numpy) has a card, not a say in the verdict
    ran = tuple(r for r in results.values() if not r.unsupported)
    answers = ProbeSet(results=ran)
    if len(answers) > 1:
        assert answers.shown_verdict == fixture["verdict"]
        part = answers.first_divergence()
        assert (part.to_dict() if part else {}) == fixture["trace_divergence"]
        if part:
            assert TraceDivergence.from_dict(fixture["trace_divergence"]) == part
    else:
        assert fixture["verdict"] == "" and fixture["trace_divergence"] == {}


def test_the_widget_state_fixture_holds_the_contract_s_control_traits():
    state = json.loads((FIXTURES / "widget-state.json").read_text())
    assert set(state) == {name for name, t in TRAITS.items() if t["controls"]}
    assert set(state["request"]) == set(REQUEST_KEYS)


def test_the_atlas_pages_fixture_reads_into_atlas_cells():
    """The cells a target's data file decodes to (``expected``: what js/test/atlas.test.js
    checks the page's decoding against) read into the records as the atlas made them."""
    pages = json.loads((FIXTURES / "atlas-pages.json").read_text())
    assert set(pages) == {"Conv1D", "Softmax"}
    for target, data in pages.items():
        raws = [{**c, "target": target} for c in data["expected"]]  # the file drops the name
        cells = [AtlasCell.model_validate(c) for c in raws]
        assert cells and all(c.target == target for c in cells)
        for cell, raw in zip(cells, raws):
            dumped = cell.model_dump(mode="json", exclude_none=True)
            runs = {  # a data file leaves out what the page never shows (path_text)
                name: {k: v for k, v in dumped["runs"][name].items() if k in run}
                for name, run in raw["runs"].items()
            }
            assert {**{k: dumped[k] for k in raw}, "runs": runs} == raw, STALE
    cell = AtlasCell.model_validate({**pages["Softmax"]["expected"][0], "target": "Softmax"})
    softmax = next(iter(cell.runs.values()))
    assert softmax.first_nonfinite and softmax.trace_flags
