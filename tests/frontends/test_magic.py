"""``%dtype_check`` driven through a real IPython ``InteractiveShell``."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from IPython.core.error import UsageError
from keras import layers

from dtype_explorer.records import AuditReport


@pytest.fixture
def namespace(shell):
    model = keras.Sequential([keras.Input((4,), name="x"), layers.Dense(3, name="out")], name="net")
    shell.user_ns.update(
        model=model, batch=np.ones((2, 4)), wrong=np.ones((2, 7)), models={"m": model}
    )
    yield shell.user_ns
    for name in ("model", "batch", "wrong", "models", "report"):
        shell.user_ns.pop(name, None)


def test_magic_returns_the_report(shell, namespace):
    report = shell.run_line_magic("dtype_check", "model")
    assert isinstance(report, AuditReport)
    assert report.model == "net" and report.findings == ()


def test_assignment_form_and_options(shell, namespace):
    result = shell.run_cell("report = %dtype_check model --sample batch --policy mixed_float16")
    assert result.success
    report = namespace["report"]
    assert report.policy_override == "mixed_float16"
    assert report.sample[0].dtype == "float64"
    assert {f.kind for f in report.findings} == {"silent-downcast", "float16-output"}
    assert namespace["model"].layers[0].dtype_policy.name == "float32"


def test_model_may_be_an_expression(shell, namespace):
    assert shell.run_line_magic("dtype_check", 'models["m"]').model == "net"


def test_help_documents_the_options(shell, capsys):
    assert shell.run_line_magic("dtype_check", "--help") is None
    out = capsys.readouterr().out
    for option in ("--sample", "--policy", "--backends", "model"):
        assert option in out


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("nothing_here", "'nothing_here' is not defined"),
        ("batch", "needs a Keras model or layer"),
        ("model --sample nowhere", "--sample 'nowhere' is not defined"),
        ("model --sample wrong", r"expected shape \(batch, 4\)"),
        ("model --policy mixed_flaot16", "did you mean 'mixed_float16'"),
        ("model --backends jaxx", "unknown backend"),
        ("model --bogus", "unrecognized arguments"),
    ],
)
def test_bad_use_is_a_usage_error(shell, namespace, line, message):
    with pytest.raises(UsageError, match=message):
        shell.run_line_magic("dtype_check", line)


def test_bad_use_shows_no_traceback_in_a_cell(shell, namespace, capsys):
    result = shell.run_cell("%dtype_check nothing_here")
    assert isinstance(result.error_in_exec, UsageError)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert "not defined" in captured.out + captured.err


def test_engine_audits_the_model_rebuilt_in_that_release(shell, namespace, keras_3_11_engine):
    report = shell.run_line_magic("dtype_check", "model --engine keras==3.11.3")
    assert (report.engine, report.keras) == ("keras==3.11.3", "3.11.3")
    assert [c.path for c in report.layers][-1].endswith("out")
    with pytest.raises(UsageError, match=r"keras==3\.99\.0"):
        shell.run_line_magic("dtype_check", "model --engine keras==3.99.0")


def test_an_overflow_shows_its_fix_proven_on_a_copy(shell, namespace):
    """Issue 38 item 3: the cell's output (the report's HTML card) carries the fix the audit
    ran, with before and after; raw Keras beside it: the model overflows, the fix does not."""
    inputs = keras.Input((100,))
    big = layers.Dense(2, kernel_initializer="ones", dtype="mixed_float16", name="big")
    namespace.update(hot=keras.Model(inputs, big(inputs), name="hot"), ones=np.full((1, 100), 1e3))
    try:
        report = shell.run_line_magic("dtype_check", "hot --sample ones")
        [overflow] = report.by_kind("overflow")
        html = report._repr_html_()
        assert overflow.proof.proven and overflow.proof.summary() in html
        assert "the finding is gone" in html and "name=&quot;big&quot;" in html
        assert not np.isfinite(
            keras.ops.convert_to_numpy(namespace["hot"](namespace["ones"]))
        ).all()
        fixed_in = keras.Input((100,))
        fixed_big = layers.Dense(2, dtype="float32", name="big")
        fixed = keras.Model(fixed_in, fixed_big(fixed_in))
        fixed.set_weights(namespace["hot"].get_weights())
        assert np.isfinite(keras.ops.convert_to_numpy(fixed(namespace["ones"]))).all()
    finally:
        namespace.pop("hot"), namespace.pop("ones")


def test_widget_option_shows_the_report_in_the_model_view(shell, namespace):
    from dtype_explorer.frontends.widget import DtypeExplorer

    explorer = shell.run_line_magic("dtype_check", "model --sample batch --widget")
    assert isinstance(explorer, DtypeExplorer) and isinstance(explorer.report, AuditReport)
    graph = explorer.audit["graph"]
    model = namespace["model"]
    assert [n["path"] for n in graph["nodes"]] == ["net/x", "net/out"]  # its Input, its layer
    raw = model(namespace["batch"])  # what raw Keras's Dense returns for the batch
    assert graph["nodes"][-1]["output_dtypes"] == [keras.backend.standardize_dtype(raw.dtype)]
