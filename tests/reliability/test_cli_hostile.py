"""The command line used carelessly: every user error exits non-zero with one clear line on
stderr (no traceback unless ``--debug``), before any work is done, and nothing blocks."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import keras
import pytest
from typer.testing import CliRunner

from dtype_explorer.frontends.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


class Unregistered(keras.layers.Layer):
    """A custom layer the loading process does not know (not registered)."""

    def call(self, x):
        return x * 2.0


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    inputs = keras.Input((4,), name="x")
    good = folder / "good.keras"
    keras.Model(inputs, keras.layers.Dense(3)(inputs)).save(good)
    data = good.read_bytes()
    files = {"good": good, "folder": folder}
    (folder / "text.keras").write_text("hello, not a model")
    files["text"] = folder / "text.keras"
    (folder / "truncated.keras").write_bytes(data[: len(data) // 2])
    files["truncated"] = folder / "truncated.keras"
    corrupt = folder / "corrupt.keras"
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(corrupt, "w") as target:
        for item in source.infolist():
            body = source.read(item)
            target.writestr(item, b"\x00junk" * 100 if item.filename.endswith(".h5") else body)
    files["corrupt"] = corrupt
    custom = folder / "custom.keras"
    keras.Model(inputs, Unregistered()(inputs)).save(custom)
    files["custom"] = custom
    (folder / "model.txt").write_bytes(data)
    files["wrong_suffix"] = folder / "model.txt"
    files["missing"] = folder / "missing.keras"
    deep = folder / "a folder whose name alone is longer than the sixty characters reprlib keeps"
    deep.mkdir()  # the error repeats the path whole, however long the machine's tmp folder is
    fifo = deep / "fifo.keras"
    os.mkfifo(fifo)
    files["fifo"] = fifo
    return files


def _refused(args: list[str], phrase: str, code: int = 2) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == code, (args, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert phrase in lines[0], lines[0]
    assert "Traceback" not in result.output
    assert len(lines[0]) < 600


PROBE_CASES = [
    (["--backend", ","], "--backend names nothing"),
    (["--backend", ""], "--backend names nothing"),
    (["--backend", "numpy", "--timeout", "-5"], "--timeout must be a positive number"),
    (["--backend", "numpy", "--timeout", "0"], "--timeout must be a positive number"),
    (["--backend", "numpy", "--timeout", "nan"], "--timeout must be a positive number"),
    (["--backend", "numpy", "--input-dtype", ","], "--input-dtype names nothing"),
    (["--backend", "numpy", "--input-dtype", "FLOAT32"], "did you mean 'float32'"),
    (["--backend", "numpy", "--shape", "a,b"], "--shape: 'a' at character 1 is not part of a"),
    (["--backend", "numpy", "--shape", "2,-4"], "valid: a shape as 2x8x3, (2, 8, 3) or [2, 8"),
    (["--backend", "numpy", "--shape", "2x0"], "each shape is one or more positive sizes"),
    (["--backend", "numpy", "--kwargs", "[" * 100_000], "--kwargs nest deeper than 32 levels"),
    (["--backend", "numpy", "--kwargs", '{"a": ' * 50 + "1" + "}" * 50], "deeper than 32"),
    (["--backend", "numpy", "--kwargs", "x" * 1_000_000], "--kwargs is not valid JSON"),
    (["--backend", "numpy", "--values", "huge"], "unknown value preset"),
    (["--backend", "numpy", "--policy", "p" * 100_000], "unknown dtype policy"),
]


@pytest.mark.parametrize(("options", "phrase"), PROBE_CASES)
def test_bad_probe_options_exit_2_with_one_line(options, phrase):
    _refused(["probe", "Dense", *options], phrase)


def test_a_skipped_target_exits_2():
    _refused(["probe", "Lambda", "--backend", "numpy"], "cannot be probed standalone")


def test_a_probe_keras_rejects_exits_1_after_printing_it():
    result = runner.invoke(
        app, ["probe", "Dense", "--backend", "numpy", "--kwargs", '{"units": "four"}']
    )
    assert result.exit_code == 1, result.output
    assert "invalid" in result.stdout
    assert result.stderr.strip().startswith("error: no answer from Keras on numpy: invalid")


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        ("text", "could not load"),
        ("truncated", "could not load"),
        ("corrupt", "could not load"),
        ("custom", "could not load"),
        ("wrong_suffix", "is not a saved Keras model"),
        ("missing", "no such file"),
        ("folder", "not a regular file"),
        ("fifo", "not a regular file"),
    ],
)
def test_check_refuses_what_is_not_a_model(models, name, phrase):
    _refused(["check", str(models[name])], phrase)


def test_check_still_audits_a_good_model(models):
    result = runner.invoke(app, ["check", str(models["good"])])
    assert result.exit_code == 0, result.output


def test_debug_shows_the_traceback(models):
    result = runner.invoke(app, ["--debug", "check", str(models["text"])])
    assert result.exit_code != 0
    assert not isinstance(result.exception, SystemExit)  # the error itself, with its traceback


@pytest.mark.parametrize(
    ("out", "phrase"),
    [
        ("missing-folder/survey.html", "no such folder"),
        ("survey.txt", "--out must end in"),
        ("survey", "--out must end in"),
        ("a-folder.html", "is a folder"),
    ],
)
def test_survey_checks_its_output_before_the_work(tmp_path, out, phrase):
    (tmp_path / "a-folder.html").mkdir()
    result = runner.invoke(
        app,
        ["survey", "--targets", "Flatten", "--backends", "numpy", "--out", str(tmp_path / out)],
    )
    assert result.exit_code == 2, result.output
    assert phrase in result.stderr
    assert "survey:" not in result.stderr  # no progress bar: no probe ran


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["table", "add", "--dtypes", ","], "--dtypes names nothing"),
        (["table", "add", "--dtypes", "int8,flaot32", "--backends", "numpy"], "float32"),
        (["survey", "--backends", ",", "--out", "x.json"], "--backends names nothing"),
    ],
)
def test_other_commands_refuse_empty_and_unknown_names(args, phrase):
    _refused(args, phrase)


def test_a_fifo_model_file_does_not_block_a_real_process(models):
    """As a user runs it: a separate process, a FIFO nobody writes to; it must answer."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERAS_BACKEND": "numpy"}
    done = subprocess.run(
        [sys.executable, "-m", "dtype_explorer", "check", str(models["fifo"])],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: not a regular file (a folder, FIFO or device): '{models['fifo']}'; "
        "give a saved model (.keras, .h5, .hdf5)"
    ]
