"""``precision=`` at the front ends (issue 28): the CLI's ``--precision`` and the widget's
request key and picker, down to the answer's settings."""

from __future__ import annotations

import json

import comm
import pytest
from page_comm import PageComm
from typer.testing import CliRunner

from dtype_explorer import pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.frontends import widget
from dtype_explorer.frontends._request import parse_request
from dtype_explorer.frontends.cli import app
from dtype_explorer.records import PRECISIONS

runner = CliRunner()


@pytest.fixture(autouse=True)
def recording_comms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", PageComm)


def test_the_cli_asks_for_a_precision_and_prints_the_settings_in_effect():
    args = ["probe", "Dense", "--backend", "torch", "--kwargs", '{"units": 2}', "--no-cache"]
    out = runner.invoke(app, [*args, "--precision", "tf32"])
    assert out.exit_code == 0, out.output
    assert "ran with: CPU · torch.backends.cuda.matmul.allow_tf32 True" in out.output
    assert "torch.float32_matmul_precision high" in out.output
    assert "(precision=tf32 asked)" in out.output
    as_json = runner.invoke(app, [*args, "--precision", "highest", "--json"])
    [answer] = json.loads(as_json.output)
    assert answer["spec"]["precision"] == "highest"
    assert answer["environment"]["torch.float32_matmul_precision"] == "highest"
    bad = runner.invoke(app, [*args, "--precision", "TF32"])
    assert bad.exit_code == 2 and "unknown precision 'TF32'" in bad.output


def test_the_widget_offers_the_precisions_and_runs_the_one_requested():
    explorer = widget.DtypeExplorer(backends=["torch"], precision="highest")
    try:
        explorer.wait(240)
        assert explorer.precisions == list(PRECISIONS)
        assert explorer.request["precision"] == "highest"
        answer = explorer.results["torch"]
        assert answer["spec"]["precision"] == "highest"
        assert answer["environment"]["torch.float32_matmul_precision"] == "highest"
        assert answer["environment_text"].startswith("CPU · ")
    finally:
        explorer.close()


def test_a_request_with_an_unknown_precision_is_refused_saying_the_valid_ones():
    request = {**_request(), "precision": "half"}
    with pytest.raises(InvalidSpecError, match=r"unknown precision 'half'.*default, highest, tf32"):
        parse_request(request, {}, {})
    specs, _, _ = parse_request({**_request(), "precision": None}, {}, {})
    assert specs[0].precision is None


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
