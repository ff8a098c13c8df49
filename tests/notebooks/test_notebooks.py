"""The teaching notebooks, built and run the way Binder builds and runs them.

The Binder demo is rebuilt in a fresh virtual environment on this machine, as repo2docker
builds it, and each lesson runs once there (``tests/lesson_runs.py``: the same run builds the docs
site). A broken Binder build fails here. The cells marked ``# NBVAL_CHECK_OUTPUT`` must print
what the committed notebook shows (nbval's ``--nbval-lax`` rule), the notebook must finish
within 5 minutes with a cold result cache, and the kernel with the workers it starts must stay
under Binder's 2 GB (see ``notebook_memory``).
"""

from __future__ import annotations

import json
import json
import re
from pathlib import Path

import nbformat
import pytest
from lesson_runs import (
    BUILD_TIMEOUT,
    KERAS2_NOTEBOOKS,
    NOTEBOOKS,
    TIME_LIMIT,
    lesson_execution,
)
from notebook_memory import MIB

ROOT = Path(__file__).resolve().parents[2]
CHECK = lesson_execution.CHECK
MEMORY_LIMIT = 2 * 1024**3  # Binder's


def cells(name: str) -> list[dict]:
    return json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))["cells"]


def code(cell: dict) -> str:
    return "".join(cell["source"])


# ------------------------------------------------------------------ the notebooks as files


def test_every_notebook_is_a_listed_lesson():
    listed = sorted(NOTEBOOKS + KERAS2_NOTEBOOKS)
    assert sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")) == listed


@pytest.mark.parametrize("name", NOTEBOOKS + KERAS2_NOTEBOOKS)
def test_notebook_sets_its_kernel_backend_first_and_has_checked_outputs(name):
    code_cells = [c for c in cells(name) if c["cell_type"] == "code"]
    assert code_cells[0]["id"] == "colab"  # the Colab cell first (its own test below)
    own = code(code_cells[1])
    assert re.search(r'os\.environ\["KERAS_BACKEND"\] = "\w+"', own)
    assert own.index("KERAS_BACKEND") < own.index("import keras")
    checked = [c for c in code_cells if code(c).startswith(CHECK)]
    assert checked, "no cell states a checked fact"
    empty = [code(c).splitlines()[1] for c in checked if not c["outputs"]]
    assert not empty, f"checked cells without committed outputs (run the notebook): {empty}"


def test_readme_badge_opens_the_first_lesson_in_jupyterlab():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    badge = re.search(r"\(https://mybinder\.org/v2/gh/[^)]*\?urlpath=lab/tree/([^)]+)\)", readme)
    assert badge and badge.group(1) == "notebooks/01_explorer.ipynb"
    assert (ROOT / badge.group(1)).exists()


def _binder_repository() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"https://mybinder\.org/v2/gh/([^/]+/[^/]+)/", readme).group(1)


def _colab_links(text: str) -> list[str]:
    return re.findall(r"\(https://colab\.research\.google\.com/github/([^)]+)\)", text)


def test_readme_has_a_colab_badge_beside_binders_for_the_same_repository():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = readme.splitlines()[2]  # the badges' line, under the title
    assert "mybinder.org" in first and "colab-badge.svg" in first
    assert _colab_links(first) == [f"{_binder_repository()}/blob/main/notebooks/01_explorer.ipynb"]


@pytest.mark.parametrize("name", NOTEBOOKS + KERAS2_NOTEBOOKS)
def test_every_lesson_opens_in_colab_and_its_colab_cell_is_guarded(name):
    """The first markdown cell's badge opens this very lesson from the repository Binder
    builds; the first code cell runs only on Colab (a no-op in the lessons' runs here, so it
    has no output), as the package's setup (``dtype_explorer.colab.setup``, tested in
    tests/frontends/test_colab.py), which 7b asks to make the kernel its Keras 2 kernel."""
    every = cells(name)
    markdown = next(c for c in every if c["cell_type"] == "markdown")
    assert _colab_links(code(markdown)) == [f"{_binder_repository()}/blob/main/notebooks/{name}"]
    colab = next(c for c in every if c["cell_type"] == "code")
    lines = code(colab).splitlines()
    assert lines[1] == 'if "google.colab" in sys.modules:'
    assert all(line.startswith("    ") for line in lines[2:]), "all of it under the guard"
    assert "    %pip install --quiet dtype-explorer" in lines
    setup = "keras2=True" if name in KERAS2_NOTEBOOKS else ""
    assert lines[-1] == f"    dtype_explorer.colab.setup({setup})"
    assert colab["outputs"] == [] and colab["execution_count"] is None


# --------------------------------------------------------------------- the notebooks, run


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT + len(NOTEBOOKS) * 2 * TIME_LIMIT + 900)
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_binder_within_time_and_memory(executed_lessons, name):
    """Each lesson, executed once in the rebuilt Binder environment with a cold result cache
    (``tests/lesson_runs.py``), finishes, within Binder's time and memory."""
    run = executed_lessons.runs.get(name)
    assert run is not None, f"Binder build failed:\n{executed_lessons.binder_error}"
    usage = run.usage
    assert usage.returncode == 0, usage.output[-8000:]
    assert run.executed is not None, usage.output[-8000:]
    assert usage.peak_pss < MEMORY_LIMIT, f"{usage.peak_pss / MIB:.0f} MiB: {usage.describe()}"
    assert usage.seconds < TIME_LIMIT, usage.describe()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_checked_cell_shows_what_the_lesson_committed(executed_lessons, name):
    """The ``# NBVAL_CHECK_OUTPUT`` cells of the Binder run show the committed outputs, by
    nbval's ``--nbval-lax`` rule (``lesson_execution.checked_differences``)."""
    committed = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    executed = executed_lessons.executed(name)
    assert lesson_execution.checked_differences(executed, committed) == []


def test_a_changed_checked_output_is_a_difference():
    """The comparison can fail: a checked cell printing another dtype, or one output more."""
    lesson = nbformat.read(ROOT / "notebooks" / "03_float64_autocast.ipynb", as_version=4)
    changed = nbformat.read(ROOT / "notebooks" / "03_float64_autocast.ipynb", as_version=4)
    checked = [c for c in changed.cells if code(c).startswith(CHECK) and c.outputs]
    stream = next(o for c in checked for o in c.outputs if o.output_type == "stream")
    stream.text = stream.text.replace("float", "bfloat", 1)
    assert len(lesson_execution.checked_differences(changed, lesson)) == 1
    checked[-1].outputs.append(nbformat.v4.new_output("stream", name="stderr", text="warning\n"))
    assert len(lesson_execution.checked_differences(changed, lesson)) == 2
    assert lesson_execution.checked_differences(lesson, lesson) == []
