"""Issue 41, item 1: the package runs on the lowest Keras release it claims
(``keras_release.LOWEST``, ``pyproject.toml``'s ``keras>=3.1.0,<4``) as the *kernel's* Keras,
not only as an engine: that release alone in a ``--target`` folder (made once per machine,
``made_envs.keras_site``) put first on ``PYTHONPATH`` of one process that runs the smoke set
(``keras_range_script.py``: a probe in the process and on every backend's worker, a model
audit, ``%dtype_check``, the explorer answering the page), each beside bare Keras; and the
release below it is refused at ``import dtype_explorer`` with one clear error. The rest of the
suite runs on the pinned development Keras (``constraints.txt``). Making a folder needs the
package index: without it these tests fail, never skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from made_envs import keras_site

from dtype_explorer import keras_release, pool
from dtype_explorer.records import UNSUPPORTED

ROOT = Path(__file__).resolve().parents[1]
#: The last release below the range: 3.0.x lacks ``keras.tree``.
BELOW_LOWEST = "3.0.5"


def _env(site: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DTYPE_EXPLORER_BACKENDS",)}
    return {
        **env,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "KERAS_BACKEND": "tensorflow",
        "KERAS_HOME": str(tmp / "keras-home"),  # Keras's defaults, not this user's keras.json
        "DTYPE_EXPLORER_CACHE_DIR": str(tmp / "cache"),
    }


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> dict:
    """The smoke set's facts, from one process running on the lowest release."""
    tmp = tmp_path_factory.mktemp("lowest")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "keras_range_script.py"), str(ROOT / "tests")],
        env=_env(keras_site(keras_release.LOWEST), tmp),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_kernel_runs_the_lowest_release(smoke):
    assert smoke["keras"] == smoke["found"] == keras_release.LOWEST


def test_a_probe_in_the_kernel_answers_as_bare_keras(smoke):
    answer = smoke["in_process"]
    assert answer["status"] == "ok", answer["error"]
    assert answer["keras"] == keras_release.LOWEST
    assert answer["output"] == answer["raw"]


def test_every_backends_worker_runs_the_same_release(smoke):
    """``backend="all"``: each installed backend's worker on the lowest release; a backend
    that release has not got (openvino came with Keras 3.8) is its answer, not supported
    there, named, never a failure of the tool (nor a worker that cannot import Keras)."""
    answers = smoke["every_backend"]
    assert "raised" not in answers, answers["raised"]
    assert set(answers) == set(pool.installed_backends())
    assert {"jax", "tensorflow", "torch", "numpy"} <= set(answers)
    for backend, answer in answers.items():
        assert answer["keras"] == keras_release.LOWEST, backend
        if backend == "openvino":
            assert answer["error"]["where"] == UNSUPPORTED, answer
            assert "(keras 3.1.0) has no openvino backend" in answer["error"]["message"]
        else:
            assert answer["status"] == "ok", (backend, answer["error"])


def test_a_mode_the_release_lacks_is_its_own_refusal(smoke):
    """float8 came with Keras 3.3.0: on the lowest release the answer is Keras's refusal, in
    its words (bare Keras raises the same), never a failure of the tool's code."""
    lacking = smoke["lacking"]
    assert lacking["status"] == "error" and lacking["error"]["where"] == "quantize"
    assert lacking["raw"] and lacking["error"]["message"].startswith(lacking["raw"])


def test_a_model_audit_and_the_magic_run_on_it(smoke):
    audit = smoke["check_model"]
    assert "raised" not in audit, audit
    assert audit["model"] == "small" and audit["keras"] == keras_release.LOWEST
    assert audit["output"] == [audit["raw"]]
    assert smoke["magic"] == {"type": "AuditReport", "policy": "mixed_float16"}


def test_the_explorer_answers_the_page_on_it(smoke):
    widget = smoke["widget"]
    assert "raised" not in widget, widget
    assert widget["page_error"] == ""
    assert widget["status"] == widget["published"] == "ok"
    assert widget["keras"] == keras_release.LOWEST


def test_a_release_below_the_range_is_refused_at_import_with_one_clear_error(tmp_path):
    """Keras 3.0.5 (real, from the package index): ``import dtype_explorer`` fails once,
    naming the range, the release found and the command that fixes it; Keras itself is not
    imported for it (3.0.5 would need dm-tree, not installed here)."""
    site = keras_site(BELOW_LOWEST)
    done = subprocess.run(
        [sys.executable, "-c", "import dtype_explorer"],
        env=_env(site, tmp_path), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("dtype_explorer.keras_release.KerasReleaseError: ")
    for said in (f"Keras {BELOW_LOWEST}", keras_release.REQUIREMENT, "pip install -U"):
        assert said in last, last
    assert str(site) in last
