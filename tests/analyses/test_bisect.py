"""``dx.bisect``: the search over releases, the releases a range names (from the real package
index: these tests fail, never skip, when it is unreachable), the record and its views.

The answers the search is tested on are the research's ground truth (every Keras 3 release
probed on numpy, /work/research/engines/NOTES.md §3): the search is pure and takes them as a
list; the engines themselves answer in tests/analyses/test_bisect_engines.py.
"""

import itertools
import json

import pytest
from typer.testing import CliRunner

import dtype_explorer as dx
from dtype_explorer.analyses import PackageIndexError, index_releases, resolve_versions
from dtype_explorer.analyses._bisect import planned_probes, search
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.frontends.cli import app
from dtype_explorer.records import BisectProbe, BisectResult, ProbeSpec

#: Every Keras 3 release up to 3.15.1, oldest first.
RELEASES = [
    *("3.0.0", "3.0.1", "3.0.2", "3.0.3", "3.0.4", "3.0.5", "3.1.0", "3.1.1", "3.2.0"),
    *("3.2.1", "3.3.0", "3.3.1", "3.3.2", "3.3.3", "3.4.0", "3.4.1", "3.5.0", "3.6.0"),
    *("3.7.0", "3.8.0", "3.9.0", "3.9.1", "3.9.2", "3.10.0", "3.11.0", "3.11.1", "3.11.2"),
    *("3.11.3", "3.12.0", "3.12.1", "3.12.2", "3.12.3", "3.12.4", "3.13.0", "3.13.1"),
    *("3.13.2", "3.14.0", "3.14.1", "3.15.0", "3.15.1"),
]


def _runs(*runs):
    """Answers per release from ``(first release, answer)`` runs, as the research lists them."""
    answers, starts = [], dict(runs)
    current = None
    for release in RELEASES:
        current = starts.get(release, current)
        answers.append(current)
    return answers


#: Discretization(bin_boundaries=[0.5, 1.5, 2.5], dtype="float32") on float32, numpy.
DISCRETIZATION = _runs(("3.0.0", "float32"), ("3.12.0", "int32"))
#: Conv1D(4, 3, dtype="float64") on float32, numpy: changes, then changes back.
CONV1D_F64 = _runs(("3.0.0", "float32"), ("3.7.0", "float64"), ("3.12.0", "float32"))
#: BatchNormalization on uint8, numpy: three answers.
BN_UINT8 = _runs(("3.0.0", "uint8"), ("3.0.3", "float64"), ("3.6.0", "float32"))


def _bisect(answers, *, exhaustive=False):
    asked = []

    def answer(i):
        asked.append(i)
        return answers[i]

    order = list(search(len(answers), answer, exhaustive=exhaustive))
    assert order == asked  # each index yielded right after it was asked
    return asked


def test_search_names_the_first_release_in_about_log2_probes():
    asked = _bisect(DISCRETIZATION)
    assert len(asked) == len(set(asked)) <= planned_probes(len(RELEASES)) == 8
    changed = [i for i in asked if DISCRETIZATION[i] == "int32"]
    assert RELEASES[min(changed)] == "3.12.0" and RELEASES[min(changed) - 1] in {
        RELEASES[i] for i in asked
    }


def test_search_finds_a_change_when_there_are_several():
    asked = sorted(_bisect(BN_UINT8))
    pairs = [(a, b) for a, b in itertools.pairwise(asked) if b == a + 1]
    found = {RELEASES[b] for a, b in pairs if BN_UINT8[a] != BN_UINT8[b]}
    assert found & {"3.0.3", "3.6.0"}  # a real change point, one of the two


def test_search_cannot_see_a_change_that_changes_back_but_exhaustive_does():
    assert _bisect(CONV1D_F64) == [0, len(RELEASES) - 1]  # the ends agree: nothing to bisect
    assert _bisect(CONV1D_F64, exhaustive=True) == list(range(len(RELEASES)))


def _result(answers, asked, *, exhaustive=False):
    spec = ProbeSpec(target="Conv1D", kwargs={"filters": 4, "kernel_size": 3, "dtype": "float64"})
    probes = tuple(
        BisectProbe(
            version=RELEASES[i],
            engine=f"keras=={RELEASES[i]}",
            result=dx.ProbeResult(spec=spec, status="ok", backend="numpy", output_dtype=answers[i]),
        )
        for i in asked
    )
    return BisectResult(spec=spec, versions=tuple(RELEASES), probes=probes, exhaustive=exhaustive)


def test_result_says_honestly_what_bisection_cannot_see():
    blind = _result(CONV1D_F64, _bisect(CONV1D_F64))
    assert blind.first_change is None and blind.changes == ()
    assert "changed back" in blind.caveat and "exhaustive=True" in blind.caveat
    assert "no change found" in str(blind) and "changed back" in str(blind)

    full = _result(CONV1D_F64, _bisect(CONV1D_F64, exhaustive=True), exhaustive=True)
    assert [(c.after_version, c.before, c.after) for c in full.changes] == [
        ("3.7.0", "float32", "float64"),
        ("3.12.0", "float64", "float32"),
    ]
    assert all(c.exact for c in full.changes) and "every change" in full.caveat
    assert "also first changed in Keras 3.12.0: float64 (3.11.3) -> float32" in str(full)


def test_result_round_trips_as_json_and_draws_a_card():
    found = _result(DISCRETIZATION, _bisect(DISCRETIZATION))
    assert found.first_change.after_version == "3.12.0"
    assert found.first_change.before_version == "3.11.3"
    back = BisectResult.from_json(found.to_json())
    assert back == found and back.first_change == found.first_change
    data = json.loads(found.to_json())
    assert data["first_change"]["after"] == "int32"  # computed facts travel in the JSON
    card = found._repr_html_()
    assert "class='dx-card'" in card and "Keras 3.12.0" in card and ">int32<" in card


def test_probes_outside_the_versions_are_refused():
    with pytest.raises(ValueError, match="not in versions"):
        BisectResult(
            spec=ProbeSpec(target="Dense"),
            versions=("3.10.0", "3.12.0"),
            probes=(
                BisectProbe(
                    version="3.11.0",
                    result=dx.ProbeResult(
                        spec=ProbeSpec(target="Dense"), status="ok", backend="numpy"
                    ),
                ),
            ),
        )


def test_a_range_is_resolved_from_the_package_index():
    releases = index_releases()
    assert "3.12.0" in releases and "3.0.0" in releases
    assert resolve_versions("3.10.0..3.13.0") == (
        "3.10.0",
        "3.11.0",
        "3.11.1",
        "3.11.2",
        "3.11.3",
        "3.12.0",
        "3.12.1",
        "3.12.2",
        "3.12.3",
        "3.12.4",
        "3.13.0",
    )
    # Keras 2 and 3.0.x (no keras.tree: engines probe from 3.1.0) left out
    assert resolve_versions("..3.1.1") == ("3.1.0", "3.1.1")


def test_an_unreachable_index_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(PackageIndexError, match="offline, or the index is unreachable"):
        index_releases.__wrapped__()


@pytest.mark.parametrize(
    ("versions", "message"),
    [
        ("3.12.0", "at least two releases"),
        (["3.12.0", "2.15.0"], "Keras 3 releases"),
        (["3.0.5", "3.12.0"], "Keras 3.1.0 and later"),
        (["3.12.0", "three"], "not a Keras release: 'three'"),
        ("3.13.0..3.10.0", "runs backwards"),
        ("3.10.0..3.11.9", "3.11.9 is not a release the package index lists; did you mean '3.11."),
        (42, "a list of at most"),
    ],
)
def test_bad_versions_are_refused_with_what_was_received(versions, message):
    with pytest.raises(InvalidSpecError, match=message):
        dx.bisect("Dense", versions=versions, progress=False)


def test_bad_questions_are_refused_before_any_engine_is_made():
    with pytest.raises(InvalidSpecError, match="did you mean 'Discretization'"):
        dx.bisect("Discretisation", versions=["3.0.0", "3.1.0"], progress=False)
    with pytest.raises(InvalidSpecError, match="one backend"):
        dx.bisect("Dense", backend="all", versions=["3.0.0", "3.1.0"], progress=False)


def test_cli_refuses_bad_versions_in_one_line():
    out = CliRunner().invoke(app, ["bisect", "Dense", "--versions", "3.12.0..2.0"])
    assert out.exit_code == 2 and "Keras 3 releases" in out.output
