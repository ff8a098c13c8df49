"""``./dev.sh bench --check`` reads its claims from ``benchmarks/README.md``: the table and the
script agree on the figures, and a figure over its goal or 25 % off its claim is flagged (what
is measured is never asserted here: no timed test)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import check  # noqa: E402  (benchmarks/check.py)


def test_every_headline_figure_of_the_readme_is_one_the_script_measures_and_has_a_goal():
    table = check.claims()
    assert set(table) == set(check.FIGURES)
    assert all(row["goal"] for row in table.values()), table
    dev = (ROOT / "dev.sh").read_text()
    assert "benchmarks/check.py" in dev and "--check" in dev


def test_a_figure_over_its_goal_or_off_its_claim_is_flagged():
    claim = {"goal": 2.0, "recorded": 1.6}
    assert check.verdict(claim, {"median": 1.7}) == "ok"
    assert check.verdict(claim, {"median": 2.1}) == "OVER OFF"
    assert check.verdict(claim, {"median": 1.1}) == "OFF"  # better than claimed: the README lags
    assert check.verdict({"goal": 2.0, "recorded": None}, {"median": 1.9}) == "ok"
