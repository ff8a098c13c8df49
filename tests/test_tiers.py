"""The test tiers (tests/tiers.py, hooked in by tests/conftest.py): every marker the table
gives is registered in pyproject.toml (``--strict-markers``), and the table reads what a module
uses from its text."""

from __future__ import annotations

from pathlib import Path

from tiers import TIER_MARKERS, USES, module_uses

ROOT = Path(__file__).resolve().parents[1]


def test_every_tier_marker_is_registered_as_the_table_describes_it(pytestconfig):
    registered = dict(line.split(": ", 1) for line in pytestconfig.getini("markers"))
    assert set(TIER_MARKERS) <= set(registered)
    assert {marker: registered[marker] for marker in USES} == {m: u.about for m, u in USES.items()}


def test_a_module_is_read_for_what_it_uses():
    tests = ROOT / "tests"
    assert module_uses(tests / "runtime" / "test_pool.py") >= {"workers", "subprocess"}
    assert "browser" in module_uses(tests / "frontends" / "browser" / "test_atlas_browser.py")
    assert "notebook" in module_uses(tests / "notebooks" / "test_notebooks.py")
    assert "docs" in module_uses(tests / "docs" / "test_site.py")
    assert "engine" in module_uses(tests / "analyses" / "test_bisect_engines.py")
    assert module_uses(tests / "test_shapes.py") == set()


def test_a_record_built_with_a_backend_is_not_a_worker():
    """``backend="torch"`` in a hand-built record ran no worker, but the table read it as one:
    the rules', records' and views' tests were left out of the daily tier."""
    tests = ROOT / "tests"
    assert module_uses(tests / "analyses" / "test_audit_rules.py") == set()
    assert module_uses(tests / "records" / "test_code_trace.py") == set()
