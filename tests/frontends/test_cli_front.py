"""The CLI as a user runs it: a real ``dtype-explorer`` process (and its real workers), its
stdout and stderr read whole, and which frameworks its own process imported.

The front process is run through a tiny wrapper that calls the script's entry point
(``frontends.command.main``, as pyproject.toml's ``[project.scripts]`` names it) and, at exit,
writes which of keras/tensorflow/jax/torch its ``sys.modules`` holds (and, beside it, every
module it imported): nothing in the product is patched or mocked.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dtype_explorer.frontends import command
from dtype_explorer.runtime import _store, cache_read, pool, printed
from tests.cache_rows import forge_rows
from tests.front_process import run_front

#: Runs the CLI exactly as the ``dtype-explorer`` script does (its entry point), and reports
#: this process's frameworks at exit to the file named by $DX_FRONT_REPORT.
WRAPPER = """
import atexit, json, os, sys

def _report():
    frameworks = [m for m in ("keras", "tensorflow", "jax", "torch") if m in sys.modules]
    with open(os.environ["DX_FRONT_REPORT"], "w") as f:
        json.dump(frameworks, f)
    with open(os.environ["DX_FRONT_REPORT"] + ".modules", "w") as f:
        json.dump(sorted(sys.modules), f)

atexit.register(_report)
from dtype_explorer.frontends.command import main
main()
"""
#: Lines frameworks print while they start (TensorFlow's C++ logging through absl, oneDNN,
#: CUDA stubs, XLA, torch and jax warnings).
NOISE = (
    "absl::InitializeLog",
    "oneDNN",
    "cpu_feature_guard",
    "cuda",
    "TF-TRT",
    "Unable to register",
    "computation_placer",
    "I0000",
    "W0000",
    "E0000",
    "UserWarning",
    "FutureWarning",
)
ROOT = Path(__file__).resolve().parents[2]
DENSE = ["probe", "Dense", "--input-dtype", "uint8", "--kwargs", '{"units": 4}']


def _cli(*args, cache_dir, tmp_path, env=None):
    report = tmp_path / "front-modules.json"
    report.unlink(missing_ok=True)
    dropped = ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL")
    return run_front(WRAPPER, args, cache_dir=cache_dir, report=report, dropped=dropped, env=env)


def _modules(tmp_path):
    """Every module the last ``_cli`` run's front process had imported at exit."""
    return set(json.loads((tmp_path / "front-modules.json.modules").read_text()))


def _noise(stderr):
    return [line for line in stderr.splitlines() if any(n in line for n in NOISE)]


@pytest.fixture(scope="module")
def answered(tmp_path_factory):
    """A cache holding the live answer to ``DENSE`` on numpy and its printed text, asked once
    through the real command (a worker started once for the tests below, not each time)."""
    where = tmp_path_factory.mktemp("answered")
    live, _ = _cli(*DENSE, "--backend", "numpy", cache_dir=where / "cache", tmp_path=where)
    assert live.returncode == 0, live.stderr
    return where / "cache", live


def _copy_of(answered, tmp_path):
    """This test's own copy of the ``answered`` cache, and the live run's output."""
    source, live = answered
    shutil.copytree(source, tmp_path / "cache")
    return tmp_path / "cache", live


def test_a_worker_probe_imports_no_framework_in_the_front_and_json_is_one_document(tmp_path):
    cache_dir = tmp_path / "cache"  # empty: no Keras snapshot, no cached answer yet
    live, frameworks = _cli(
        *DENSE, "--backend", "numpy", "--json", cache_dir=cache_dir, tmp_path=tmp_path
    )
    assert live.returncode == 0, live.stderr
    assert frameworks == [], f"the front process imported {frameworks}"
    (result,) = json.loads(live.stdout)  # stdout is one JSON document, nothing else
    assert result["status"] == "ok" and result["cached"] is False
    assert result["output_dtype"] == "float32"
    assert live.stderr == "", live.stderr

    cached, frameworks = _cli(
        *DENSE, "--backend", "numpy", "--json", cache_dir=cache_dir, tmp_path=tmp_path
    )
    assert cached.returncode == 0, cached.stderr
    assert frameworks == []
    (again,) = json.loads(cached.stdout)
    assert again["cached"] is True
    assert {**again, "cached": False} == result  # the cached answer is the live one


def test_one_backend_has_no_across_backends_line_and_a_cached_text_answer_matches(
    answered, tmp_path
):
    cache_dir, live = _copy_of(answered, tmp_path)
    cached, frameworks = _cli(*DENSE, "--backend", "numpy", cache_dir=cache_dir, tmp_path=tmp_path)
    assert live.returncode == cached.returncode == 0, live.stderr + cached.stderr
    assert frameworks == []
    assert "documented float32 | declared float32 | observed float32" in live.stdout
    assert "across backends" not in live.stdout
    assert cached.stdout == live.stdout


def test_no_framework_start_up_lines_reach_the_terminal(tmp_path):
    """A TensorFlow worker prints absl/oneDNN/cpu_feature_guard lines as it starts: they stay
    in its log, and the front never imports TensorFlow at all."""
    done, frameworks = _cli(
        *DENSE, "--backend", "numpy,tensorflow", cache_dir=tmp_path / "cache", tmp_path=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert frameworks == []
    assert _noise(done.stderr) == [] and done.stderr == "", done.stderr
    assert "across backends: as-documented" in done.stdout  # two backends: the shared verdict


def test_a_warning_about_the_layer_asked_is_kept_and_verbose_shows_the_worker_log(tmp_path):
    args = ["probe", "Dense", "--kwargs", '{"units": 4, "input_shape": [4]}', "--backend", "numpy"]
    quiet, _ = _cli(*args, cache_dir=tmp_path / "cache", tmp_path=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "warning: UserWarning: Do not pass an `input_shape`" in quiet.stdout
    assert quiet.stderr == "", quiet.stderr

    loud, _ = _cli(
        *args,
        "--no-cache",
        cache_dir=tmp_path / "cache",
        tmp_path=tmp_path,
        env={"DTYPE_EXPLORER_VERBOSE": "1"},
    )
    assert loud.returncode == 0, loud.stderr
    assert "--- numpy worker log" in loud.stderr and "Do not pass an `input_shape`" in loud.stderr


def test_a_bad_policy_is_refused_without_importing_keras_once_a_snapshot_exists(tmp_path):
    cache_dir = tmp_path / "cache"
    first, frameworks = _cli(
        *DENSE[:2],
        "--input-dtype",
        "uint9",
        "--backend",
        "numpy",
        cache_dir=cache_dir,
        tmp_path=tmp_path,
    )  # no snapshot yet: one quiet run on the numpy backend writes it, out of this process
    assert first.returncode == 2 and "did you mean 'uint8'" in first.stderr, first.stderr
    assert frameworks == []
    assert list(cache_dir.glob("keras-facts-*.json"))
    done, frameworks = _cli(
        *DENSE,
        "--backend",
        "numpy",
        "--policy",
        "mixed_flaot16",
        cache_dir=cache_dir,
        tmp_path=tmp_path,
    )
    assert done.returncode == 2
    assert "did you mean 'mixed_float16'" in done.stderr
    assert frameworks == []


def test_check_imports_tensorflow_in_the_front_quietly(tmp_path):
    """``check`` audits a model in its own process (Keras's default backend, TensorFlow here):
    TensorFlow's start-up lines go to workers/cli.log, not to the terminal."""
    import keras

    path = tmp_path / "tiny.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).save(path)
    done, frameworks = _cli("check", str(path), cache_dir=tmp_path / "cache", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tensorflow" in frameworks  # this command does run Keras here
    assert "dense" in done.stdout.lower()
    assert _noise(done.stderr) == [] and done.stderr == "", done.stderr


#: What a cached answer never needs: the other analyses, the records and views of other
#: questions, the probe's own code (it runs in the workers), and the heavy libraries.
NOT_FOR_A_CACHED_ANSWER = {
    *(f"dtype_explorer.analyses._{m}" for m in ("atlas", "bisect", "cluster")),
    "dtype_explorer.analyses.audit._check",
    *(f"dtype_explorer.analyses._{m}" for m in ("promotion", "run", "survey")),
    *(f"dtype_explorer.records._{m}" for m in ("atlas", "bisect", "promotion", "survey")),
    *(f"dtype_explorer.views._{m}" for m in ("atlas", "figures", "html", "svg")),
    *(f"dtype_explorer.keras_run.probe._{m}" for m in ("run", "layer")),
    "dtype_explorer.keras_run.trace._op_trace",
    "dtype_explorer.keras_run._numerics",
    "pandas",
    "plotly",
    "pyarrow",
    "duckdb",
    "IPython",
    "anywidget",
    "ml_dtypes",  # ~60 % of a cached answer once (issue 44): built only for a bfloat16/float8
    # the full command and what only a miss needs: the worker pool, the cache's storage
    "dtype_explorer.frontends.cli",
    "dtype_explorer.runtime.pool",
    "dtype_explorer.runtime.cache",
    "dtype_explorer.runtime.engines",
    "typer",
    "click",
    "rich",
    "diskcache",
    "filelock",
    "tqdm",
}


#: What the printed lane (the command line asked again) never imports: all of the above, and
#: what lane 2 needs (NumPy, pydantic, the records, the spec check, the views, Keras's facts).
NOT_FOR_A_PRINTED_ANSWER = {
    *NOT_FOR_A_CACHED_ANSWER,
    "numpy",
    "pydantic",
    "dtype_explorer.records",
    "dtype_explorer.views",
    "dtype_explorer.keras_run",
    "dtype_explorer.keras_facts",
    "dtype_explorer.runtime.cache_read",
    "dtype_explorer.frontends._cached_answer",
}


def _printed_rows(cache_dir, drop=False):
    """How many printed answers the cache holds (removed first when ``drop``)."""
    db = sqlite3.connect(cache_dir / "cache.db", isolation_level=None)
    try:
        if drop:
            db.execute("DELETE FROM Cache WHERE key LIKE ?", (printed.PREFIX + "%",))
        where = "SELECT COUNT(*) FROM Cache WHERE key LIKE ?"
        return db.execute(where, (printed.PREFIX + "%",)).fetchone()[0]
    finally:
        db.close()


def test_the_same_command_again_prints_its_kept_answer_with_the_standard_library_alone(
    answered, tmp_path
):
    cache_dir, live = _copy_of(answered, tmp_path)
    args = [*DENSE, "--backend", "numpy"]
    assert _printed_rows(cache_dir) == 1  # kept once the live answer was stored
    again, frameworks = _cli(*args, cache_dir=cache_dir, tmp_path=tmp_path)
    assert again.returncode == 0 and again.stdout == live.stdout, again.stderr
    assert again.stderr == ""
    modules = _modules(tmp_path)
    assert frameworks == []
    assert {"dtype_explorer.runtime.printed", "dtype_explorer.runtime._mac"} <= modules
    assert sorted(modules & NOT_FOR_A_PRINTED_ANSWER) == []
    ours = {m for m in modules if m.startswith("dtype_explorer")}
    # lane 1: the command's entry, the printed row's key (versions, settings) and signed read
    assert len(ours) <= 20, "\n".join(sorted(ours))
    as_json, _ = _cli(*args, "--json", cache_dir=cache_dir, tmp_path=tmp_path)
    (first,) = json.loads(as_json.stdout)  # another command line: lane 2, then kept
    assert first["cached"] is True and _printed_rows(cache_dir) == 2
    kept, _ = _cli(*args, "--json", cache_dir=cache_dir, tmp_path=tmp_path)
    assert kept.stdout == as_json.stdout and "numpy" not in _modules(tmp_path)


def test_the_input_dtype_as_probes_second_argument_is_the_same_question(answered, tmp_path):
    """``probe Dense uint8`` (as ``dx.probe("Dense", "uint8")``) was refused: "Got unexpected
    extra argument(s)". It asks what ``--input-dtype uint8`` asks: the stored answer, printed
    by the fast path, as the live run printed it; given both ways and differently, refused."""
    cache_dir, live = _copy_of(answered, tmp_path)
    positional = ["probe", "Dense", "uint8", *DENSE[4:], "--backend", "numpy"]
    assert command.question(positional)["input_dtype"] == "uint8"
    again, frameworks = _cli(*positional, cache_dir=cache_dir, tmp_path=tmp_path)
    assert again.returncode == 0 and again.stdout == live.stdout, again.stderr
    assert frameworks == []
    both, _ = _cli(*positional, "--input-dtype", "int8", cache_dir=cache_dir, tmp_path=tmp_path)
    assert both.returncode == 2 and both.stdout == ""
    assert "the input dtype is given twice, as 'uint8' and as --input-dtype 'int8'" in both.stderr


def test_a_reader_that_went_away_ends_a_cached_answer_quietly(answered, tmp_path):
    """``dtype-explorer probe ... | head``: stdout's reader is gone before the answer is
    written (a pipe whose read end is closed): status 1 and nothing on stderr, as click does."""
    cache_dir, _ = _copy_of(answered, tmp_path)
    args = [*DENSE, "--backend", "numpy"]
    read_end, write_end = os.pipe()
    os.close(read_end)
    report = tmp_path / "front-modules.json"
    environ = {
        **os.environ,
        "DTYPE_EXPLORER_CACHE_DIR": str(cache_dir),
        "PYTHONPATH": str(ROOT),
        "DX_FRONT_REPORT": str(report),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-c", WRAPPER, *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=environ,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (1, "")
    assert "dtype_explorer.frontends.cli" not in _modules(tmp_path)  # the printed answer's lane


def test_a_stored_answer_imports_only_the_spec_check_the_cache_and_the_text_view(
    answered, tmp_path
):
    cache_dir, live = _copy_of(answered, tmp_path)
    args = [*DENSE, "--backend", "numpy"]
    assert _printed_rows(cache_dir, drop=True) == 0  # as after dx.probe: an answer, no text
    cached, frameworks = _cli(*args, cache_dir=cache_dir, tmp_path=tmp_path)
    assert cached.returncode == 0 and cached.stdout == live.stdout, cached.stderr
    assert cached.stderr == ""
    modules = _modules(tmp_path)
    assert frameworks == []
    # what it does need is there: the spec check, the cache read and the text view
    needed = {"dtype_explorer.keras_run._spec", "dtype_explorer.runtime.cache_read"}
    assert needed | {"dtype_explorer.views._text", "dtype_explorer.runtime._mac"} <= modules
    # the storage stack comes in only after the answer is printed, to keep what it printed
    keeping = {"dtype_explorer.runtime.cache", "dtype_explorer.runtime.engines"}
    keeping |= {"diskcache", "filelock", "tqdm"}
    assert sorted(modules & (NOT_FOR_A_CACHED_ANSWER - keeping)) == []
    assert _printed_rows(cache_dir) == 1


def test_a_tampered_row_is_not_served_by_the_fast_path_and_the_live_answer_replaces_it(
    answered, tmp_path, monkeypatch
):
    cache_dir, live = _copy_of(answered, tmp_path)
    args = [*DENSE, "--backend", "numpy"]
    monkeypatch.setenv("DTYPE_EXPLORER_CACHE_DIR", str(cache_dir))
    assert command.cached_text(args) == live.stdout  # signed: served, as the full command
    assert forge_rows(cache_dir / "cache.db", "float32", "float64")  # a lie, same MAC
    assert command.cached_text(args) is None
    again, _ = _cli(*args, cache_dir=cache_dir, tmp_path=tmp_path)
    assert again.returncode == 0 and again.stdout == live.stdout, again.stderr
    assert "dtype_explorer.runtime.pool" in _modules(tmp_path)  # asked live, on the full path
    assert command.cached_text(args) == live.stdout  # the live answer replaced the lie


def test_the_fast_path_leaves_what_it_does_not_answer_to_the_full_command():
    assert (cache_read.DB_FILE, cache_read.ENV_BACKENDS) == (_store.FILE, pool.ENV_BACKENDS)
    scripts = (ROOT / "pyproject.toml").read_text()
    assert 'dtype-explorer = "dtype_explorer.frontends.command:main"' in scripts
    for argv in (
        ["probe", "Dense", "--no-cache", "--backend", "numpy"],
        ["probe", "Dense", "--engine", "keras==3.11.3"],
        ["probe", "Dense", "--help"],
        ["--debug", "probe", "Dense"],
        ["table", "add"],
    ):
        assert command.question(argv) is None, argv
    # several backends or modes, or a question the spec check refuses: the full command's
    for argv in (
        ["probe", "Dense"],
        ["probe", "Dense", "--backend", "numpy,jax"],
        ["probe", "Dense", "--backend", "numpy", "--mode", "call,model"],
        ["probe", "Dense", "--backend", "numpy", "--input-dtype", "uint9"],
        ["probe", "Dense", "--backend", "numpy", "--kwargs", "{units"],
    ):
        assert command.cached_text(argv) is None, argv
