"""The CLI's first run ever (a fresh cache directory: no Keras snapshot, no cached answer): the
question is checked against the Keras of the worker that answers it, which writes the snapshot,
and no second Keras is imported first (issue 27.2).

The front process runs the script's entry point (``frontends.command.main``) with one
tripwire: the quiet snapshot run (``keras_facts._run_snapshot_process``, a second Keras import
on the critical path) raises if it is started. At exit it reports whether Keras was imported in
the front. The workers, Keras and the check are real.
"""

import json

from dtype_explorer import keras_facts
from tests.front_process import run_front

WRAPPER = """
import atexit, json, os, sys
from dtype_explorer import keras_facts

def _refused():
    raise AssertionError("the snapshot was made by a second Keras import (a snapshot run)")

keras_facts._run_snapshot_process = _refused
atexit.register(lambda: open(os.environ["DX_FRONT_REPORT"], "w").write(
    json.dumps("keras" in sys.modules)))
from dtype_explorer.frontends.command import main
main()
"""


def _first_run(*args, cache_dir, tmp_path):
    return run_front(WRAPPER, args, cache_dir=cache_dir, report=tmp_path / "front-keras.json")


def _snapshot(cache_dir):
    (path,) = cache_dir.glob("keras-facts-*.json")
    data = json.loads(path.read_text())
    assert data["keras"] == keras_facts.keras_version()
    return data


def test_the_first_probe_is_answered_and_leaves_the_workers_snapshot(tmp_path):
    cache_dir = tmp_path / "cache"
    args = ["probe", "Dense", "--input-dtype", "uint8", "--backend", "numpy", "--json"]
    done, keras_in_front = _first_run(*args, cache_dir=cache_dir, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert keras_in_front is False
    (result,) = json.loads(done.stdout)
    assert result["status"] == "ok" and result["cached"] is False
    assert result["output_dtype"] == "float32"
    facts = _snapshot(cache_dir)  # written by the worker, in Keras's own words
    assert "uint8" in facts["allowed_dtypes"] and facts["policies"]["mixed_float16"] is True

    again, keras_in_front = _first_run(*args, cache_dir=cache_dir, tmp_path=tmp_path)
    assert again.returncode == 0 and keras_in_front is False
    assert json.loads(again.stdout)[0]["cached"] is True


def test_a_bad_question_on_the_first_run_is_refused_as_clearly_and_the_snapshot_is_made(
    tmp_path,
):
    cache_dir = tmp_path / "cache"
    done, keras_in_front = _first_run(
        "probe", "Dense", "--input-dtype", "flaot32", "--backend", "numpy",
        cache_dir=cache_dir, tmp_path=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    assert "unknown dtype 'flaot32'; did you mean 'float32'?" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert keras_in_front is False
    assert "float32" in _snapshot(cache_dir)["allowed_dtypes"]

    bad_policy, _ = _first_run(
        "probe", "Dense", "--policy", "mixed_flaot16", "--backend", "numpy",
        cache_dir=tmp_path / "other", tmp_path=tmp_path,
    )  # fmt: skip
    assert bad_policy.returncode != 0
    assert "unknown dtype policy 'mixed_flaot16'" in bad_policy.stderr, bad_policy.stderr
