"""The command line over the same engine."""

import json

import pytest
from typer.testing import CliRunner

from dtype_explorer.frontends.cli import app

runner = CliRunner()


def test_probe_prints_the_cast_path_and_three_views():
    out = runner.invoke(
        app,
        [
            "probe",
            "Dense",
            "--input-dtype",
            "uint8",
            "--policy",
            "mixed_float16",
            "--backend",
            "numpy",
            "--kwargs",
            '{"units": 4}',
        ],
    )
    assert out.exit_code == 0, out.output
    assert "autocast" in out.output and "uint8 kept: not a float" in out.output
    assert "documented float16 | declared float16 | observed float16" in out.output
    assert "stored float32, read as float16 inside call()" in out.output


def test_probe_json_is_a_list_of_results():
    out = runner.invoke(
        app, ["probe", "ops.add", "--input-dtype", "int8,float16", "--backend", "numpy", "--json"]
    )
    assert out.exit_code == 0, out.output
    (result,) = json.loads(out.output)
    assert result["output_dtype"] == result["documented_dtype"] == "float16"


def test_bad_input_is_one_clear_line_and_exit_2():
    out = runner.invoke(app, ["probe", "Dens", "--backend", "numpy"])
    assert out.exit_code == 2
    assert "did you mean 'Dense'" in out.output
    out = runner.invoke(app, ["probe", "Dense", "--kwargs", "{units: 4}", "--backend", "numpy"])
    assert out.exit_code == 2 and "not valid JSON" in out.output


def test_survey_writes_json(tmp_path):
    target = tmp_path / "s.json"
    out = runner.invoke(
        app,
        [
            "survey",
            "--targets",
            "Flatten",
            "--input-dtypes",
            "uint8,float64",
            "--policies",
            "float32",
            "--backends",
            "numpy",
            "--out",
            str(target),
        ],
    )
    assert out.exit_code == 0, out.output
    cells = json.loads(target.read_text())
    assert cells


def test_table_lists_disagreements():
    out = runner.invoke(
        app, ["table", "add", "--dtypes", "uint64,int64", "--backends", "numpy", "--disagreements"]
    )
    assert out.exit_code == 0, out.output
    assert "uint64" in out.output


def test_check_audits_a_saved_model(tmp_path):
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((4,), dtype="float64"), keras.layers.Dense(2, name="d")])
    model(np.zeros((1, 4)))
    path = tmp_path / "m.keras"
    model.save(path)
    out = runner.invoke(app, ["check", str(path)])
    assert out.exit_code == 0, out.output
    assert "silent-downcast" in out.output
    # --mode fit: one real training step of a copy (the saved model is compiled by none)
    out = runner.invoke(app, ["check", str(path), "--mode", "fit"])
    assert out.exit_code == 0, out.output
    assert "training step (model.fit: one training step, compiled by tf.function)" in out.output
    assert "gradient d/kernel: float32" in out.output
    # --mode dataset: the real model.predict on a tf.data.Dataset of the sample (issue 39.14)
    out = runner.invoke(app, ["check", str(path), "--mode", "dataset"])
    assert out.exit_code == 0, out.output
    assert "model.predict on a tf.data.Dataset" in out.output and "silent-downcast" in out.output
    out = runner.invoke(app, ["check", str(path), "--mode", "sideways"])
    assert out.exit_code == 2 and "Valid: call, dataset, fit, predict, save, training" in out.output


def test_check_mode_save_of_a_model_that_cannot_run_answers(tmp_path):
    import keras
    import numpy as np

    inputs = keras.Input((8, 3), dtype="uint8")
    model = keras.Model(inputs, keras.layers.Conv1D(2, 3)(inputs))
    with pytest.raises(Exception) as raw:  # raw Keras refuses the model's own call
        model(np.full((2, 8, 3), 7, "uint8"))
    error = type(raw.value).__name__
    path = tmp_path / "m.keras"
    model.save(path)
    out = runner.invoke(app, ["check", str(path), "--mode", "save"])
    assert out.exit_code == 0, out.output
    assert f"the model's own call on the sample raised {error} (Keras's error)" in out.output


def test_check_errors_name_what_the_command_line_can_do_and_no_escape_codes(tmp_path):
    """An unbuilt Sequential was called 'a subclassed model or a layer' and the CLI advised
    '%dtype_check model --sample x', the magic's option; Keras's bold codes were printed as
    '\\x1b[1m'; engine='keras=3.11' was offered 'tf_keras'."""
    import keras
    import numpy as np

    unbuilt = tmp_path / "unbuilt.keras"
    keras.Sequential([keras.layers.Dense(2)]).save(unbuilt)
    out = runner.invoke(app, ["check", str(unbuilt)])
    assert out.exit_code == 2, out.output
    assert "a Sequential with no keras.Input" in out.output
    assert "subclassed" not in out.output and "%dtype_check" not in out.output
    assert "pass a sample: --sample x.npy" in out.output  # what this command takes
    # raw Keras: Conv1D refuses uint8 on tensorflow, its message in bold escape codes
    inputs = keras.Input((8, 3), dtype="uint8")
    conv = keras.Model(inputs, keras.layers.Conv1D(2, 3)(inputs))
    try:
        conv(np.zeros((2, 8, 3), "uint8"))
    except Exception as error:
        raw = str(error)
    assert "\x1b[1m" in raw
    conv.save(tmp_path / "conv.keras")
    out = runner.invoke(app, ["check", str(tmp_path / "conv.keras"), "--mode", "save"])
    assert out.exit_code == 0 and "Value for attr 'T' of uint8" in out.output
    assert "x1b" not in out.output and "\x1b" not in out.output
    out = runner.invoke(app, ["check", str(unbuilt), "--engine", "keras=3.11"])
    assert out.exit_code == 2 and "did you mean 'keras==3.11.Y'?" in out.output


def test_probe_trace_shows_every_op_its_line_and_where_backends_part():
    args = ["probe", "Conv1D", "--input-dtype", "uint8", "--backend", "jax,torch"]
    args += ["--kwargs", '{"filters": 2, "kernel_size": 3}']
    plain = runner.invoke(app, args)
    out = runner.invoke(app, [*args, "--trace"])
    assert out.exit_code == 0, out.output
    assert "trace:" not in plain.output
    assert "ops.nn.conv(uint8[" in out.output
    assert "promoted: result_type(uint8, float32) = float32" in out.output
    assert "at keras/src/layers/convolutional/conv1d.py:" in out.output
    assert "https://github.com/keras-team/keras/blob/v" in out.output
    assert "traces part at ops.nn.conv (jax: float32, torch: raises RuntimeError)" in out.output


def test_probe_takes_modes_and_says_the_verdict_across_them():
    out = runner.invoke(
        app,
        [
            "probe",
            "Dense",
            "--input-dtype",
            "float64",
            "--kwargs",
            '{"units": 2}',
            "--backend",
            "numpy",
            "--mode",
            "call,model",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "mode model: Model.__call__" in out.output
    assert "across modes: as-documented" in out.output
    bad = runner.invoke(app, ["probe", "ReLU", "--backend", "numpy", "--mode", "training"])
    assert bad.exit_code == 2 and "takes no `training` argument" in bad.output


def test_probe_takes_your_values_and_call_kwargs_as_json():
    out = runner.invoke(
        app,
        [
            "probe",
            "ops.power",
            "--input-dtype",
            "int32",
            "--values",
            "[[2, 3], [-1, -2]]",
            "--backend",
            "numpy",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    (result,) = json.loads(out.output)
    assert result["spec"]["input_dtypes"] == ["int32", "int32"]
    assert [v["shape"] for v in result["spec"]["user_values"]] == [[2], [2]]
    out = runner.invoke(
        app,
        [
            "probe",
            "Dropout",
            "--kwargs",
            '{"rate": 0.5}',
            "--call-kwargs",
            '{"training": true}',
            "--backend",
            "numpy",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    (result,) = json.loads(out.output)
    assert result["spec"]["call_kwargs"] == {"training": True}
    out = runner.invoke(
        app,
        ["probe", "ops.abs", "--values", "[[-1]]", "--input-dtype", "uint8", "--backend", "numpy"],
    )
    assert out.exit_code == 2 and "becomes 255 as uint8" in out.output


def test_probe_survey_and_check_take_an_engine(keras_3_11_engine, tmp_path):
    kwargs = '{"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"}'
    asked = ["probe", "Discretization", "--backend", "numpy", "--kwargs", kwargs, "--json"]
    out = runner.invoke(app, [*asked, "--engine", "keras==3.11.3"])
    assert out.exit_code == 0, out.output
    (old,) = json.loads(out.output)
    out = runner.invoke(app, asked)
    (new,) = json.loads(out.output)
    assert (old["versions"]["keras"], old["output_dtype"]) == ("3.11.3", "float32")
    assert new["output_dtype"] == "int32"  # 3.12.0 on
    out = runner.invoke(
        app,
        [
            "survey",
            "--targets",
            "Dense",
            "--input-dtypes",
            "uint8",
            "--policies",
            "float32",
            "--backends",
            "numpy",
            "--engine",
            "keras==3.11.3",
            "--out",
            str(tmp_path / "s.json"),
        ],
    )
    assert out.exit_code == 0, out.output
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["engine"] == "keras==3.11.3"
    out = runner.invoke(app, ["probe", "Dense", "--backend", "numpy", "--engine", "keras==9"])
    assert out.exit_code == 2 and "keras==9" in out.output


def test_help_shows_flags_as_flags_and_says_the_shape_syntax():
    for args in (["--help"], ["probe", "--help"], ["atlas", "build", "--help"]):
        out = runner.invoke(app, args, env={"COLUMNS": "120"})
        assert out.exit_code == 0, out.output
        assert "<bool>" not in out.output, out.output
        assert "--help" in out.output
    probe_help = runner.invoke(app, ["probe", "--help"], env={"COLUMNS": "120"}).output
    assert "2x8x3, (2, 8, 3) or [2, 8, 3]" in probe_help
    assert "--trace " in probe_help and "<str>" in probe_help  # options with values keep theirs


def test_shape_takes_every_spelling_and_a_bad_one_is_refused_before_any_work():
    args = ["probe", "Conv1D", "--backend", "numpy", "--json"]
    args += ["--kwargs", '{"filters": 2, "kernel_size": 3}']
    answers = []
    for shape in ("2x8x3", "(2, 8, 3)", "[2, 8, 3]"):
        out = runner.invoke(app, [*args, "--shape", shape])
        assert out.exit_code == 0, out.output
        (result,) = json.loads(out.output)
        answers.append(result["spec"]["shapes"])
    assert answers == [[[2, 8, 3]]] * 3
    bad = runner.invoke(app, [*args, "--shape", "2x8y3"])
    assert bad.exit_code == 2
    assert "--shape: 'y' at character 4 is not part of a shape" in bad.output


def test_check_takes_a_sample_from_a_numpy_file(tmp_path):
    # integer ids through a float16 keras.Input: the default sample (in the Input's dtype)
    # shows nothing; the user's own ids show the rounding, as check_model(model, ids) does
    import keras
    import numpy as np

    keras.config.set_floatx("float16")
    try:
        inputs = keras.Input((3,))
        emb = keras.layers.Embedding(5000, 2, dtype="float32", name="emb")
        model = keras.Model(inputs, emb(inputs))
    finally:
        keras.config.set_floatx("float32")
    model.save(tmp_path / "ids.keras")
    ids = np.array([[2049, 4097, 5]], "int64")
    np.save(tmp_path / "ids.npy", ids)
    weights = keras.ops.convert_to_numpy(emb.embeddings)
    assert np.array_equal(keras.ops.convert_to_numpy(model(ids))[0, 0], weights[2048])  # raw
    out = runner.invoke(app, ["check", str(tmp_path / "ids.keras")])
    assert out.exit_code == 0 and "lossy-cast" not in out.output
    out = runner.invoke(
        app, ["check", str(tmp_path / "ids.keras"), "--sample", str(tmp_path / "ids.npy")]
    )
    assert out.exit_code == 0, out.output
    assert "lossy-cast" in out.output and "2049 -> 2048" in out.output
    # what it cannot read is said, and never unpickled
    np.savez(tmp_path / "objects.npz", a=np.array(["x", None], object))
    out = runner.invoke(
        app, ["check", str(tmp_path / "ids.keras"), "--sample", str(tmp_path / "objects.npz")]
    )
    assert out.exit_code == 2 and "Object arrays cannot be loaded" in out.output
    out = runner.invoke(app, ["check", str(tmp_path / "ids.keras"), "--sample", __file__])
    assert out.exit_code == 2 and "--sample takes a .npy file (np.save)" in out.output
