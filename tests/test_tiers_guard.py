"""The fast tier's guard (``tests/tiers.NoProcess``): a test the table reads as pure but
that starts a process fails, saying what to mark. Here, not in test_tiers.py: this test starts
a process itself, so it belongs to the rest tier."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
from tiers import NoProcess


def test_in_the_fast_tier_a_test_that_starts_a_process_fails_saying_what_to_mark():
    said = r"fast tier .* pytest\.mark\.subprocess"
    with (
        NoProcess(SimpleNamespace(nodeid="tests/x.py::test_y")),
        pytest.raises(AssertionError, match=said),
    ):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert subprocess.run([sys.executable, "-c", "pass"], check=True).returncode == 0


def test_a_program_a_library_runs_to_look_at_the_machine_is_let_through():
    """``platform.processor()`` runs ``uname -p``; on a fresh machine a font cache runs
    ``fc-list``: no test's own process, in any tier."""
    with NoProcess(SimpleNamespace(nodeid="tests/x.py::test_y")):
        said = subprocess.run(["uname", "-p"], capture_output=True, text=True, check=True)
    assert said.returncode == 0
