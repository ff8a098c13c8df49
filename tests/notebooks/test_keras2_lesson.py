"""Lesson 7b, run live on the Keras 2 kernel: ``dx.engines.create("tf_keras")`` registers the
kernel (into the session's temporary ``JUPYTER_DATA_DIR``), nbclient runs the committed
notebook on it (``kernel_name=Engine.kernel_name``), every checked cell must print what the
notebook committed, and the cells of plain tf.keras code (first line ``# tf.keras``) are run
again as a plain tf_keras script (the engine's site alone, ``TF_USE_LEGACY_KERAS=1``, no
dtype-explorer): every dtype they put in ``facts`` must be the one the notebook printed.

Not part of the Binder run (``test_notebooks``): Binder's kernel is Keras 3. Creating the
engine needs the package index: without it these tests fail, never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.timeout(900)

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "07b_keras2_kernel.ipynb"
CHECK = "# NBVAL_CHECK_OUTPUT"
PLAIN = "# tf.keras"
FACTS = "DX-FACTS "
#: What the plain cells need from the notebook's first cell (no dtype-explorer, no Keras 3).
PREAMBLE = (
    "import json\nimport tempfile\n\nimport numpy as np\nimport tensorflow as tf\n\nfacts = {}\n"
)


def _code(cell) -> str:
    return "".join(cell["source"])


def _stdout(cell) -> str:
    return "".join(o["text"] for o in cell.get("outputs", []) if o.get("name") == "stdout")


def _facts(cells) -> dict:
    printed = [line for c in cells for line in _stdout(c).splitlines() if line.startswith(FACTS)]
    assert printed, "the notebook printed no facts"
    return json.loads(printed[-1].removeprefix(FACTS))


@pytest.fixture(scope="module")
def executed(tf_keras_engine, executed_lessons):
    """The committed notebook, run once on the Keras 2 engine's kernel (``tests/lesson_runs.py``:
    the docs site is built from the same run)."""
    if not any(p.startswith("tensorflow-hub==") for p in tf_keras_engine.packages):
        pytest.fail(
            f"the engine {tf_keras_engine.spec} was created before tensorflow-hub joined its "
            f"packages ({tf_keras_engine.packages}): dx.engines.remove('tf_keras') and rerun"
        )
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert notebook.metadata["kernelspec"]["name"] == tf_keras_engine.kernel_name
    return executed_lessons.executed(NOTEBOOK.name)


def test_every_checked_cell_prints_what_the_notebook_committed(executed):
    committed = nbformat.read(NOTEBOOK, as_version=4).cells
    checked = [(c, r) for c, r in zip(committed, executed.cells, strict=True)]
    checked = [(c, r) for c, r in checked if c.cell_type == "code" and _code(c).startswith(CHECK)]
    assert len(checked) >= 8
    for before, now in checked:
        assert _stdout(now) == _stdout(before), _code(before)[:300]
    survey = next(r for c, r in checked if 'facts["survey"]' in _code(c))
    assert _stdout(survey).startswith("True "), _stdout(survey)  # the survey's Keras 2 answers


def test_every_dtype_is_the_one_a_plain_tf_keras_script_gets(executed, tf_keras_engine, tmp_path):
    plain = [_code(c) for c in executed.cells if c.cell_type == "code"]
    plain = [code for code in plain if code.startswith(PLAIN)]
    assert len(plain) == 5 and not any(
        "dx." in code or "keras." in code.replace("tf.keras.", "") for code in plain
    )
    script = tmp_path / "plain_tf_keras.py"
    script.write_text(
        PREAMBLE + "\n\n".join(plain) + f'\nprint("{FACTS}" + json.dumps(facts, sort_keys=True))\n'
    )
    env = dict(os.environ, PYTHONPATH=tf_keras_engine.site, TF_USE_LEGACY_KERAS="1")
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dtype_explorer" not in done.stdout
    plain_facts = json.loads(done.stdout.split(FACTS)[-1])
    assert plain_facts == _facts(executed.cells)
    assert plain_facts["hub_error"][0] == "TypeError" and "float16" in plain_facts["hub_error"][1]
    assert plain_facts["float64"]["set_floatx"] == ["float64", "float64"]
