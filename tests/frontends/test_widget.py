"""The explorer widget's Python side, driven through its comm the way the page drives it.

The comm records what the kernel sends; the page's messages are handed to it as
``comm_msg`` content. Probes run on real workers (jax and torch).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import comm
import numpy as np
import pytest
from page_comm import PageComm, request

from dtype_explorer import pool
from dtype_explorer.frontends.widget import PENDING, DtypeExplorer
from dtype_explorer.records import ProbeResult, ProbeSet

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ["jax", "torch"]
WAIT = 240


@pytest.fixture(autouse=True)
def recording_comms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", PageComm)


@pytest.fixture(scope="module", autouse=True)
def _stop_workers():
    yield
    pool.shutdown(zygotes=False)


def explorer(**kwargs: Any) -> DtypeExplorer:
    widget = DtypeExplorer(**kwargs)
    widget.wait(WAIT)
    return widget


def test_bundle_is_built_into_the_package():
    static = ROOT / "dtype_explorer" / "static"
    esm, css = (static / "widget.js").read_text(), (static / "widget.css").read_text()
    assert str(DtypeExplorer._esm) == esm and str(DtypeExplorer._css) == css
    assert "export" in esm and "render" in esm
    # nothing from a CDN: the only address is SVG's namespace name, never fetched
    addresses = set(re.findall(r"https?://[^\s\"'`)]*", esm))
    assert addresses <= {"http://www.w3.org/2000/svg"}, sorted(addresses)[:5]
    # the graph's layout (dagre, graphlib inside it) is bundled with its MIT notice
    assert "@dagrejs/dagre:\nCopyright (c) 2012-2014 Chris Pettitt" in esm
    assert "@dagrejs/graphlib:\nCopyright" in esm and "elkjs" not in esm
    # the theme's colours: the palette's (bundled into the script, with JupyterLab's variables
    # first), set on the root as --dx-* variables the stylesheet draws with
    assert "--jp-layout-color1" in esm and "theme_signals" in esm and "var(--dx-bg)" in css


def test_the_synced_traits_are_the_contract():
    contract = json.loads(
        (ROOT / "dtype_explorer" / "frontends" / "widget_contract.json").read_text()
    )
    synced = {
        name
        for name, trait in DtypeExplorer.class_traits(sync=True).items()
        if trait.metadata.get("writer")  # the contract's; the rest are ipywidgets' own
    }
    assert synced == set(contract["traits"])
    own = set(DtypeExplorer.class_traits(sync=True)) - synced
    assert all(name.startswith("_") or name in {"layout", "tabbable", "tooltip"} for name in own), (
        own
    )
    for name, spec in contract["traits"].items():
        assert DtypeExplorer.class_traits()[name].metadata["writer"] == spec["writer"]


def test_opening_state_reaches_the_page():
    widget = explorer(backends=["jax"])
    opened = widget.comm.sent[0]
    assert opened["type"] == "comm_open"
    state = opened["data"]["state"]
    assert {"core", "convolution", "pooling", "normalization", "ops"} <= set(state["catalog"])
    assert "Dense" in state["catalog"]["core"] and "Conv1D" in state["catalog"]["convolution"]
    assert state["defaults"]["Dense"]["kwargs"] == {"units": 4}
    assert {"uint8", "bfloat16", "float64", "python_int"} <= set(state["dtypes"])
    assert state["dtype_families"]["bfloat16"] == "float"
    assert state["dtype_families"]["python_int"] == "python"
    assert "mixed_float16" in state["policies"]
    assert state["available_backends"] == pool.installed_backends()
    assert state["request"]["target"] == "Dense" and state["request"]["backends"] == ["jax"]
    assert state["results"] == {"jax": PENDING}
    assert widget.results["jax"]["status"] == "ok"
    assert widget.error == ""


def test_page_request_probes_each_backend_and_shows_the_divergence():
    widget = explorer(backends=["jax"], use_cache=False)
    widget.comm.page_sends(
        request=request(widget, target="Conv1D", input_dtypes=["uint8"], backends=BACKENDS)
    )
    answers = widget.wait(WAIT)
    assert widget.request_id == widget.request["nonce"]
    assert answers["jax"].status == "ok" and answers["jax"].output_dtype == "float32"
    assert answers["torch"].status == "error" and answers["torch"].error.message
    results = widget.comm.updates("results")
    pending_at = next(i for i, r in enumerate(results) if r == {b: PENDING for b in BACKENDS})
    assert results[-1]["jax"] == answers["jax"].to_dict()
    assert any(
        r.get("torch") == PENDING and r["jax"]["status"] == "ok" for r in results[pending_at:]
    ) or any(
        r.get("jax") == PENDING and r["torch"]["status"] == "error" for r in results[pending_at:]
    ), "each backend is published as it arrives"
    assert widget.comm.updates("verdict")[-1] == "diverges"
    assert set(widget.timings) == set(BACKENDS) and all(ms > 0 for ms in widget.timings.values())
    # where the traces part is computed on the records and published, not left to the page
    part = widget.comm.updates("trace_divergence")[-1]
    assert part["op"] == "ops.nn.conv" and part["outcomes"]["jax"] == "float32"
    assert part == ProbeSet(results=tuple(answers.values())).first_divergence().to_dict()


def test_promotion_table_highlights_the_deciding_cell():
    widget = explorer(target="Conv1D", input_dtype="uint8", backends=["jax"])
    result = ProbeResult.from_dict(widget.results["jax"])
    assert len(widget.promotion.get("tables", [])) == 1, widget.promotion
    (table,) = widget.promotion["tables"]
    assert table["backends"] == ["jax"]
    assert table["args"] == list(result.result_type_args)
    row, col = (table["dtypes"].index(d) for d in table["args"])
    assert table["cells"][row][col] == result.documented_dtype
    assert table["basis"] in result.basis
    assert widget.comm.updates("promotion")[-1] == widget.promotion


def test_a_newer_request_supersedes_running_probes():
    widget = explorer(backends=["jax"], use_cache=False)
    widget.comm.page_sends(request=request(widget, target="Conv1D", input_dtypes=["uint8"]))
    superseded = widget.request["nonce"]
    widget.comm.page_sends(request=request(widget, input_dtypes=["float16"]))
    answers = widget.wait(WAIT)
    time.sleep(1.0)  # let the superseded probe's answer arrive, if it were to be published
    assert widget.request_id == superseded + 1
    assert answers["jax"].spec.input_dtypes == ("float16",)
    results = widget.comm.updates("results")
    newest = max(i for i, r in enumerate(results) if r == {"jax": PENDING})
    assert all(
        r["jax"] == PENDING or r["jax"]["spec"]["input_dtypes"] == ["float16"]
        for r in results[newest:]
    )


def test_the_kernel_is_not_blocked_while_probes_run():
    widget = explorer(backends=BACKENDS, use_cache=False)
    widget.comm.page_sends(
        request=request(widget, target="LayerNormalization", input_dtypes=["bfloat16"])
    )
    assert any(r == PENDING for r in widget.results.values())  # the handler did not wait
    assert sorted(widget.wait(WAIT)) == sorted(BACKENDS)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"target": "Dense2"}, "did you mean 'Dense'"),
        ({"target": "__import__('os').system('touch /tmp/dx-evaluated')"}, "unknown target"),
        ({"kwargs": '{"units": 4'}, "kwargs is not valid JSON"),
        (
            {"kwargs": "__import__('os').system('touch /tmp/dx-evaluated')"},
            "kwargs is not valid JSON",
        ),
        ({"kwargs": "[4]"}, "kwargs must be a JSON object"),
        ({"kwargs": '{"units": NaN}'}, "JSON values"),
        ({"shape": "[[2, -4]]"}, "'-' at character 6 is not part of a shape"),
        ({"shape": "[[2, 0]]"}, "positive sizes"),
        ({"shape": "[[100000, 100000]]"}, "the limit is"),
        ({"shape": "{}"}, "valid: a shape as 2x8x3, (2, 8, 3) or [2, 8, 3]"),
        ({"input_dtypes": ["flaot32"]}, "did you mean 'float32'"),
        ({"input_dtypes": ["float32", "float32", "float32"]}, "gets 1 input(s) but 3 input dtypes"),
        ({"input_dtypes": "float32"}, "input_dtypes must be a list"),
        ({"policy": "mixed_flaot16"}, "did you mean 'mixed_float16'"),
        ({"policy": ""}, "policy must be a non-empty string"),
        ({"preset": "huge"}, "unknown value preset"),
        ({"backends": []}, "choose at least one backend"),
        ({"backends": ["mxnet"]}, "unknown backend"),
        ({"nonce": "1"}, "nonce must be an integer"),
        ({"code": "import os"}, "unknown request field(s) ['code']"),
    ],
)
def test_invalid_input_from_the_page_is_reported_not_raised(changes, message):
    widget = explorer(backends=["jax"])
    first = dict(widget.request)
    widget.comm.page_sends(request=request(widget, **changes))
    assert message in widget.error
    assert widget.comm.updates("error")[-1] == widget.error
    assert widget.results == {} and widget.comm.updates("results")[-1] == {}
    assert not Path("/tmp/dx-evaluated").exists()
    widget.comm.page_sends(request={**first, "nonce": 7})  # the page recovers with a good one
    assert widget.error == ""
    assert widget.request_id == 7
    assert widget.wait(WAIT)["jax"].status == "ok"


def test_a_kwarg_keras_rejects_is_shown_as_that_backends_error():
    widget = explorer(backends=["jax"])
    widget.comm.page_sends(request=request(widget, kwargs=json.dumps({"units": 4, "bogus": 1})))
    answer = widget.wait(WAIT)["jax"]
    assert widget.error == ""
    assert answer.status in ("invalid", "error") and "bogus" in answer.error.message


def test_the_page_chooses_how_the_target_runs():
    widget = explorer(backends=["jax"], input_dtype="float64")
    assert widget.modes == ["call", "training", "model", "predict", "fit", "dataset"]
    assert widget.request["mode"] == "call"
    widget.comm.page_sends(request=request(widget, mode="model"))
    answer = widget.wait(WAIT)["jax"]
    assert answer.spec.mode == "model" and widget.error == ""
    assert [s.dtype for s in answer.steps("model")] == ["float32"]  # Model.__call__ cast it
    widget.comm.page_sends(request=request(widget, target="ReLU", mode="training"))
    assert "training" in widget.error and "modes for ReLU" in widget.error


def test_the_engine_picker_offers_the_installed_keras_and_every_created_engine(
    keras_3_11_engine,
):
    from dtype_explorer.versions import library_version

    widget = explorer(backends=["numpy"])
    offered = widget.comm.sent[0]["data"]["state"]["engines"]
    assert offered[0] == {
        "engine": None,
        "keras": library_version("keras"),
        "label": f"installed Keras {library_version('keras')}",
        "backends": None,
    }
    created = {choice["engine"]: choice for choice in offered[1:]}
    assert created["keras==3.11.3"]["keras"] == "3.11.3"
    assert created["keras==3.11.3"]["backends"] is None
    assert created["keras==3.11.3"]["label"] == "Keras 3.11.3 (engine)"
    assert widget.request["engine"] is None
    assert widget.results["numpy"]["versions"]["keras"] == library_version("keras")


def test_a_probe_on_a_created_engine_runs_in_its_workers_from_the_page(keras_3_11_engine):
    """The same question from the page, answered by the installed Keras and by 3.11.3, whose
    Discretization outputs int64 where 3.12.0 on output int32."""
    widget = explorer(backends=["numpy"], use_cache=False)
    question = dict(
        target="Discretization",
        kwargs=json.dumps({"bin_boundaries": [0.5, 1.5, 2.5]}),
        policy="float32",
    )
    widget.comm.page_sends(request=request(widget, **question))
    installed = widget.wait(WAIT)["numpy"]
    widget.comm.page_sends(request=request(widget, engine="keras==3.11.3"))
    old = widget.wait(WAIT)["numpy"]
    assert widget.error == ""
    assert old.spec.engine == "keras==3.11.3" and installed.spec.engine is None
    assert old.versions["keras"] == "3.11.3" and old.versions["engine"] == "keras==3.11.3"
    assert installed.versions["keras"] != "3.11.3"
    assert (installed.output_dtype, old.output_dtype) == ("int32", "int64")
    assert pool.log_paths("numpy", "keras==3.11.3")[0].is_file()  # the engine's own worker
    published = widget.comm.updates("results")[-1]["numpy"]
    assert published["versions"]["keras"] == "3.11.3"  # what the page labels the card with


def test_an_engine_the_page_may_not_name_is_refused_naming_it(keras_3_11_engine):
    widget = explorer(backends=["numpy"])
    # every created engine is listed (others' tests may have made more in this session)
    valid = ("valid: None (the installed Keras), ", "'keras==3.11.3'")
    for engine, message in [
        ("keras==3.11", "unknown engine; received: 'keras==3.11'"),
        ("--index-url=http://x keras", "unknown engine; received:"),
        (7, "unknown engine; received: 7"),
        ("keras==3.9.9", "engine 'keras==3.9.9' is not created; received: 'keras==3.9.9'"),
    ]:
        widget.comm.page_sends(request=request(widget, engine=engine))
        assert message in widget.error and all(v in widget.error for v in valid), widget.error
        assert 'dx.engines.create("keras==3.11.3")' in widget.error
        assert widget.results == {}
    # Keras 2 runs on tensorflow only: another backend is a clear error, not an answer
    widget.comm.page_sends(request=request(widget, engine="tf_keras", backends=["numpy"]))
    assert "runs on the tensorflow backend only; received: backend='numpy'" in widget.error


def test_a_bad_initial_value_raises_in_the_callers_cell():
    with pytest.raises(ValueError, match="did you mean 'Conv1D'"):
        DtypeExplorer("Conv1d", backends=["jax"])


def test_user_layers_join_the_catalog_and_probe_on_the_workers():
    import keras

    class Scaled(keras.layers.Layer):
        def build(self, input_shape):
            self.scale = self.add_weight(name="scale", shape=(input_shape[-1],), initializer="ones")

        def call(self, x):
            return x * self.scale

    widget = explorer(custom_layers=[Scaled], backends=["jax"])
    (name,) = widget.catalog["custom"]
    assert name == f"custom:{Scaled.__qualname__}"
    assert widget.defaults[name]["input_dtypes"] == ["float32"]
    widget.comm.page_sends(request=request(widget, target=name, policy="mixed_float16"))
    answer = widget.wait(WAIT)["jax"]
    assert answer.status == "ok", answer.error
    assert answer.output_dtype == "float16"
    (variable,) = answer.variables.values()
    assert (variable.stored, variable.read) == ("float32", "float16")


def test_front_end_unit_tests_pass():
    """The vitest suite in js/ (rendering from fixed results) runs with the Python tests, its
    files and tests in an order drawn for this run: they share one jsdom (``isolate: false`` in
    ``js/vitest.config.mjs``), so a test that passes only after another would fail some day,
    naming the seed that reproduces it."""
    npm = shutil.which("npm")
    assert npm, "npm is needed to run the front-end tests"
    assert (ROOT / "js" / "node_modules").is_dir(), "run `npm ci` in js/ (pip install -e . does it)"
    seed = random.SystemRandom().randrange(1, 2**31)
    shuffled = ["--sequence.shuffle", f"--sequence.seed={seed}"]
    done = subprocess.run(
        [npm, "test", "--silent", "--", *shuffled],
        cwd=ROOT / "js", capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    rerun = f"cd js && npm test -- {' '.join(shuffled)}"
    assert done.returncode == 0, f"{rerun}\n{done.stdout[-4000:]}{done.stderr[-4000:]}"


def test_a_mode_one_backend_cannot_run_gives_it_its_own_card_and_the_others_run():
    widget = explorer(backends=["jax"], use_cache=False)
    widget.comm.page_sends(
        request=request(widget, mode="fit", policy="mixed_float16", backends=["jax", "numpy"])
    )
    answers = widget.wait(WAIT)
    assert widget.error == "", "the request is not refused as a whole"
    numpy = answers["numpy"]
    assert numpy.status == "invalid" and numpy.error.where == "not supported here"
    assert "numpy backend cannot train" in numpy.headline
    jax = answers["jax"]
    assert jax.ok and jax.fit is not None and jax.fit.gradients
    assert widget.verdict == "", "numpy cannot run it: it has no say in the verdict"
    grid = widget.comm.updates("comparison")[-1]
    assert grid == ProbeSet(results=tuple(answers.values())).comparison().to_dict()
    columns = {c["label"]: c["status"] for c in grid["columns"]}
    assert columns == {"jax": "ok", "numpy": "unsupported"}
    keys = {row["key"] for row in grid["rows"]}
    assert {"fit:loss", "fit:optimizer", "fit:scaling", "fit:warnings"} <= keys
    # one shape syntax: 2x4, (2, 4) and JSON are the same request
    for text in ("3x4", "(3, 4)", "[[3, 4]]"):
        widget.comm.page_sends(request=request(widget, mode="call", shape=text, backends=["jax"]))
        assert widget.error == "", text
        assert widget.wait(WAIT)["jax"].spec.shapes == ((3, 4),)
    widget.comm.page_sends(request=request(widget, shape="3x", backends=["jax"]))
    assert "expected a number after 'x'" in widget.error and "received: '3x'" in widget.error


def test_the_widget_shows_values_wrong_not_as_documented_beside_wrong_numbers():
    """Issue 38 item 5: the page's badge reads ``shown_verdict`` from each result, and the
    verdict across backends is the one a summary shows."""
    widget = explorer(
        target="ops.power", input_dtype="uint8", values="image", backends=["jax", "numpy"]
    )
    results = [ProbeResult.from_dict(r) for r in widget.results.values()]
    assert all(r.verdict == "as-documented" and r.value_findings() for r in results)
    assert {r["shown_verdict"] for r in widget.results.values()} == {"values-wrong"}
    assert widget.verdict == "values-wrong"


def test_an_audit_opens_in_the_model_view_and_probes_nothing():
    """``DtypeExplorer(audit=report)``: the page is sent the audit's graph, every edge with
    the dtype raw Keras gives that tensor, and no probe starts; a bad ``audit=`` is refused."""
    import keras

    import dtype_explorer as dx
    from dtype_explorer.errors import InvalidSpecError

    x = keras.Input((4,), dtype="float64", name="x")
    hidden = keras.layers.Dense(3, name="hidden", dtype="mixed_float16")(x)
    model = keras.Model(x, keras.layers.Dense(2, name="out")(hidden), name="net")
    sample = np.ones((2, 4), "float64")
    report = dx.check_model(model, sample)
    widget = DtypeExplorer(audit=report)
    state = widget.comm.sent[0]["data"]["state"]
    assert widget.report is report and state["results"] == {}
    assert all(m["type"] == "comm_open" for m in widget.comm.sent)  # nothing probed
    audit = state["audit"]
    raw = keras.Model(x, hidden)(sample)  # raw Keras: the tensor between the two layers
    edges = {(e["source"], e["target"]): e["dtype"] for e in audit["graph"]["edges"]}
    assert edges == {
        ("net/x", "net/hidden"): "float64",
        ("net/hidden", "net/out"): keras.backend.standardize_dtype(raw.dtype),
    }
    assert edges[("net/hidden", "net/out")] == "float16"
    assert {r["path"] for r in audit["rows"]} >= {"net/hidden", "net/out"}
    with pytest.raises(InvalidSpecError, match=r"AuditReport.*received: 'net'"):
        DtypeExplorer(audit="net")
