"""``dx.bisect`` on real engines: the Discretization question of issue 16 (float32 up to
3.11.3, int32 from 3.12.0, numpy backend) names 3.12.0.

Each engine is a real Keras release layered over the installed backends (about 1.5 s and
15 MiB to make, most of a creation being the import check), made in the machine's test engines
folder (tests/conftest.py) on first use and reused by every later test and session. Making one
needs the package index: when it is unreachable these tests fail, they never skip.
"""

import pytest
from packaging.version import Version
from typer.testing import CliRunner

import dtype_explorer as dx
from dtype_explorer.frontends.cli import app
from dtype_explorer.runtime import engines
from dtype_explorer.versions import library_version

QUESTION = {
    "target": "Discretization",
    "input_dtype": "float32",
    "backend": "numpy",
    "kwargs": {"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"},
}
INSTALLED = library_version("keras")
#: Bisection over these asks the ends, then 3.12.0, then 3.11.3: 3.13.0 is never asked.
RELEASES = ["3.10.0", "3.11.3", "3.12.0", "3.13.0", INSTALLED]


#: Whether an earlier session made 3.13.0's engine (engines outlive sessions, conftest.py).
MADE_BEFORE: dict[str, bool] = {}


@pytest.fixture(scope="session")
def discretization_bisect():
    assert Version(INSTALLED) > Version("3.13.0"), "the installed Keras ends the range"
    MADE_BEFORE["3.13.0"] = engines.get("keras==3.13.0") is not None
    return dx.bisect(**QUESTION, versions=RELEASES, progress=False)


def _made(versions: list[str]) -> dict[str, str]:
    """When each of these releases' engines was made."""
    return {e.version: e.created for e in engines.list() if e.version in versions}


def test_bisect_names_the_first_release_with_the_new_answer(discretization_bisect):
    b = discretization_bisect
    change = b.first_change
    assert (change.before_version, change.before) == ("3.11.3", "float32")
    assert (change.after_version, change.after) == ("3.12.0", "int32")
    assert b.answers() == {
        "3.10.0": "float32",
        "3.11.3": "float32",
        "3.12.0": "int32",
        INSTALLED: "int32",
    }


def test_each_release_answered_through_its_own_engine(discretization_bisect):
    for probe in discretization_bisect.probes:
        assert probe.result.versions["keras"] == probe.version
        assert probe.engine == (None if probe.version == INSTALLED else f"keras=={probe.version}")
        assert probe.result.spec.engine == probe.engine


def test_bisect_asks_only_the_releases_it_needs(discretization_bisect):
    assert discretization_bisect.probed_count == 4 < len(RELEASES)
    assert "3.13.0" not in discretization_bisect.answers()
    never_made = engines.get("keras==3.13.0") is None  # bisection did not need it
    assert MADE_BEFORE["3.13.0"] or never_made
    assert "changed back" in discretization_bisect.caveat


def test_exhaustive_asks_every_release_and_reuses_the_engines(discretization_bisect):
    made = _made(RELEASES[:3])
    full = dx.bisect(**QUESTION, versions=RELEASES[:3], exhaustive=True, progress=False)
    assert list(full.answers()) == RELEASES[:3] and full.exhaustive
    assert [(c.after_version, c.exact) for c in full.changes] == [("3.12.0", True)]
    assert _made(RELEASES[:3]) == made  # no engine made again
    assert all(p.result.cached for p in full.probes)  # the same questions: from the cache


def test_cli_bisect_prints_the_change_with_both_answers(discretization_bisect):
    out = CliRunner().invoke(
        app,
        [
            "bisect",
            "Discretization",
            "--dtype",
            "float32",
            "--backend",
            "numpy",
            "--kwargs",
            '{"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"}',
            "--versions",
            "3.11.3,3.12.0",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "first changed in Keras 3.12.0: float32 (3.11.3) -> int32 (3.12.0)" in out.output
