"""Issue 24 at the front ends: the explorer widget's quantize picker (its request key, checked
Python-side), ``dtype-explorer survey --quantize`` and ``atlas build --quantize``. Real Keras
on numpy; the modes offered and the refusal are checked against raw Keras."""

from __future__ import annotations

import json
import re

import comm
import keras
import pytest
from keras.src.dtype_policies import dtype_policy
from page_comm import PageComm, request
from typer.testing import CliRunner

from dtype_explorer import pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.frontends import widget
from dtype_explorer.frontends._request import parse_request
from dtype_explorer.frontends.cli import app
from dtype_explorer.records import Survey, axis_policy

runner = CliRunner()
SLICE = ["--input-dtypes", "float32", "--policies", "float32", "--backends", "numpy"]


@pytest.fixture(autouse=True)
def recording_comms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", PageComm)


def _raw_modes() -> list[str]:
    """The installed Keras's modes that take no calibration config, asked of Keras."""
    return [m for m in dtype_policy.QUANTIZATION_MODES if m not in ("gptq", "awq")]


def test_the_widget_offers_the_modes_and_quantizes_the_layer_the_page_asks():
    explorer = widget.DtypeExplorer("Dense", backends=["numpy"], kwargs={"units": 4})
    try:
        explorer.wait(240)
        assert explorer.quantize_modes == _raw_modes() and "int8" in explorer.quantize_modes
        assert explorer.request["quantize"] is None
        assert explorer.results["numpy"]["quantization"] is None
        explorer.comm.page_sends(request=request(explorer, quantize="int8"))
        answer = explorer.wait(240)["numpy"]
        assert explorer.error == "" and answer.spec.quantize == "int8"
        assert answer.quantization.mode == "int8" and answer.quantization.status == "quantized"
        assert any(v.dtype == "int8" for v in answer.quantization.variables)
        explorer.comm.page_sends(request=request(explorer, quantize="int9"))
        assert "unknown quantization mode 'int9'; did you mean 'int8'?" in explorer.error
        explorer.comm.page_sends(request=request(explorer, target="ops.add", quantize="int8"))
        assert "ops.add has no weights to quantize" in explorer.error
    finally:
        explorer.close()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("int9", "unknown quantization mode 'int9'; did you mean 'int8'? Valid: None"),
        ("gptq", "quantize='gptq' calibrates on data"),
        (8, "quantize must be a mode's name or null; received: 8"),
        ("int4/0", "unknown quantization mode 'int4/0'"),
    ],
)
def test_a_bad_quantize_from_the_page_is_refused_saying_the_valid_ones(value, message):
    with pytest.raises(InvalidSpecError, match=message.replace("?", r"\?")):
        parse_request({**_request(), "quantize": value}, {}, {})


def test_a_good_quantize_reaches_the_spec():
    specs, _, _ = parse_request({**_request(), "quantize": "int4/32"}, {}, {})
    assert specs[0].quantize == "int4/32"
    specs, _, _ = parse_request({**_request(), "quantize": None}, {}, {})
    assert specs[0].quantize is None


def test_the_cli_survey_takes_a_quantize_axis_with_none(tmp_path):
    out = tmp_path / "q.json"
    args = ["survey", "--targets", "Dense,Conv2D", *SLICE, "--out", str(out)]
    done = runner.invoke(app, [*args, "--quantize", "none,int8"])
    assert done.exit_code == 0, done.output
    survey = Survey.load(out)
    label = axis_policy("float32", "int8")
    assert survey.quantize == (None, "int8") and survey.policies == ("float32", label)
    assert survey.cell("Dense", "float32", label).results["numpy"].quantization.mode == "int8"
    conv = survey.cell("Conv2D", "float32", label).results["numpy"]
    layer = keras.layers.Conv2D(2, 3)
    layer.build((1, 5, 5, 1))
    with pytest.raises(NotImplementedError) as raised:  # what raw Keras says
        layer.quantize("int8")
    assert conv.error.where == "quantize" and conv.error.message == str(raised.value)
    again = runner.invoke(app, [*args, "--quantize", "none", "--quantize", "int8"])
    assert again.exit_code == 0 and Survey.load(out).quantize == (None, "int8")
    empty = runner.invoke(app, [*args, "--quantize", ","])
    assert empty.exit_code == 2 and "--quantize names nothing" in empty.output


def test_the_cli_atlas_build_takes_a_quantize_axis(tmp_path):
    args = ["atlas", "build", "--targets", "Dense", *SLICE, "--out", str(tmp_path)]
    done = runner.invoke(app, [*args, "--quantize", "int8", "--no-progress"])
    assert done.exit_code == 0, done.output
    policies = json.loads((tmp_path / "atlas.json").read_text())["policies"]
    assert policies == [axis_policy("float32", "int8")]


def test_the_help_shows_the_quantize_axis_with_an_example():
    for command in (["survey", "--help"], ["atlas", "build", "--help"]):
        shown = runner.invoke(app, command, env={"COLUMNS": "120"})
        assert shown.exit_code == 0, shown.output
        words = " ".join(re.sub("[│╭╮╰╯─]", " ", shown.output).split())  # the box, unwrapped
        assert "--quantize" in words and "(e.g. --quantize none,int8)" in words


def _request() -> dict:
    return {
        "target": "Dense",
        "kwargs": '{"units": 2}',
        "input_dtypes": ["float32"],
        "preset": "default",
        "shape": "",
        "policy": "float32",
        "backends": ["numpy"],
    }


def teardown_module():
    pool.shutdown(zygotes=False)
