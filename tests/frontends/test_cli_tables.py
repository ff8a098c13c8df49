"""The terminal's rich tables: ``probe --backend all``'s summary, ``table``'s lhs x rhs grid
and ``check``'s dtype flow, rendered to a fixed-width console that is not a terminal and
compared with the snapshots in ``cli_tables/`` (hand-made records: fast, no Keras), then one
real CLI run each. ``DX_UPDATE_SNAPSHOTS=1`` rewrites the snapshots; read the diff.
"""

import io
import os
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from dtype_explorer import analyses, views
from dtype_explorer.analyses._run import progress_bar
from dtype_explorer.frontends._cli_terminal import RichBar, progress_on, show
from dtype_explorer.frontends.cli import app
from dtype_explorer.records import (
    AuditReport,
    ErrorInfo,
    Finding,
    LayerCall,
    ProbeResult,
    ProbeSet,
    ProbeSpec,
    PromotionTable,
    RefCell,
    TensorInfo,
    VariableDtypes,
)

SNAPSHOTS = Path(__file__).with_name("cli_tables")
runner = CliRunner()


def _render(renderable, *, width=100, colour=False):
    console = Console(
        file=io.StringIO(),
        width=width,
        color_system="standard" if colour else None,
        force_terminal=colour,
        highlight=False,
    )
    console.print(renderable)
    return "".join(line.rstrip() + "\n" for line in console.file.getvalue().splitlines())


def _snapshot(name, text):
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("DX_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name}:\n{text}"


# ------------------------------------------------------------------ hand-made records


def _dense_set():
    spec = ProbeSpec(target="Conv1D", input_dtypes=("uint8",))

    def result(backend, **fields):
        return ProbeResult(
            spec=spec.model_copy(update={"backend": backend}), backend=backend, **fields
        )

    return ProbeSet(
        results=(
            result("jax", status="ok", output_dtype="float32", verdict="as-documented"),
            result(
                "tensorflow",
                status="error",
                error=ErrorInfo(
                    type="NotImplementedError",
                    message="mode 'fit': the tensorflow backend cannot train here (a made-up "
                    "case: the row of a backend that cannot run the request)",
                    where="not supported here",
                ),
            ),
            result(
                "torch",
                status="invalid",
                error=ErrorInfo(
                    type="RuntimeError", message="expected scalar type Byte but found Float"
                ),
            ),
            result("numpy", status="ok", output_dtype="float32", verdict="deviates"),
        )
    )


def _add_table():
    dtypes = ("int8", "uint8", "float16")
    documented = {
        ("int8", "int8"): "int8",
        ("int8", "uint8"): "int16",
        ("uint8", "int8"): "int16",
        ("uint8", "uint8"): "uint8",
    }
    results, refs = [], {}
    for lhs in dtypes:
        for rhs in dtypes:
            want = documented.get((lhs, rhs), "float16")
            for backend in ("jax", "torch"):
                got = "float32" if (backend, lhs, rhs) == ("torch", "int8", "float16") else want
                results.append(
                    ProbeResult(
                        spec=ProbeSpec(target="ops.add", input_dtypes=(lhs, rhs), backend=backend),
                        backend=backend,
                        status="ok",
                        output_dtype=got,
                        documented_dtype=want,
                        verdict="as-documented" if got == want else "deviates",
                    )
                )
            numpy = "float32" if (lhs, rhs) == ("uint8", "float16") else want
            refs[f"{lhs},{rhs}"] = RefCell(dtype=numpy)
    return PromotionTable(
        op="add",
        floatx="float32",
        dtypes=dtypes,
        backends=("jax", "torch"),
        results=tuple(results),
        references={"numpy": refs},
        reference_versions={"numpy": "2.0"},
    )


def _report():
    f16 = {"kernel": VariableDtypes(stored="float32", read="float16")}
    f16["bias"] = VariableDtypes(stored="float32", read="float16")
    return AuditReport(
        model="sequential",
        model_class="Sequential",
        backend="jax",
        policy="float32",
        sample=(TensorInfo(dtype="float64", shape=(2, 4)),),
        layers=(
            LayerCall(
                path="sequential", layer_class="Sequential", depth=0, policy="float32",
                compute_dtype="float32", variable_dtype="float32", leaf=False,
                given=(TensorInfo(dtype="float64"),), received=(TensorInfo(dtype="float64"),),
                outputs=(TensorInfo(dtype="float16"),),
            ),
            LayerCall(
                path="sequential/dense", layer_class="Dense", depth=1, policy="mixed_float16",
                compute_dtype="float16", variable_dtype="float32",
                given=(TensorInfo(dtype="float64"),), received=(TensorInfo(dtype="float16"),),
                outputs=(TensorInfo(dtype="float16"),), variables=f16,
                autocast=("input 0: float64 → float16",),
            ),
        ),
        findings=(
            Finding(
                kind="silent-downcast",
                severity="warning",
                path="sequential/dense",
                message="float64 data is cast to float16 on entry to Dense, without a warning.",
                fix='keras.config.set_floatx("float64")',
            ),
        ),
    )  # fmt: skip


# ------------------------------------------------------------------ snapshots


def test_probe_summary_is_one_line_per_backend_with_the_verdict_across_them():
    text = _render(views.probe_set_table(_dense_set()))
    _snapshot("probe-all", text)
    rows = [line for line in text.splitlines() if line.startswith("│ ") and "│ -" in line]
    assert len(rows) == 2  # tensorflow and torch gave no dtype
    assert "across backends: diverges" in text


def test_probe_summary_colours_errors_red_and_a_deviation_yellow_only_on_a_terminal():
    coloured = _render(views.probe_set_table(_dense_set()), colour=True)
    red, yellow = "\x1b[1;31m", "\x1b[33m"
    assert f"{red}raises RuntimeError: expected scalar type Byte" in coloured
    assert f"{yellow}△ deviates" in coloured
    unsupported = next(line for line in coloured.splitlines() if "tensorflow" in line)
    assert "⊘ unsupported" in unsupported and red not in unsupported  # grey, never red
    assert "\x1b[" not in _render(views.probe_set_table(_dense_set()))


def test_table_is_the_lhs_by_rhs_grid_with_disagreeing_cells_marked():
    text = _render(views.promotion_grid(_add_table()))
    _snapshot("table-add", text)
    grid = {line.split()[0]: line.split()[1:] for line in text.splitlines()[3:6]}
    assert grid["int8"] == ["int8", "int16", "float16", "✕"]  # torch deviates there
    assert grid["uint8"] == ["int16", "uint8", "float16", "~"]  # numpy says float32
    assert "✕ a backend returns another dtype than Keras's rule, or raises" in text


def test_check_wraps_long_cells_and_never_cuts_them():
    table = _render(views.audit_renderables(_report()), width=120)  # cells wrap at words
    _snapshot("check-120", table)
    assert "bias: float32→float16" in table and "│" not in table
    narrow = _render(views.audit_renderables(_report()), width=80)  # a block per layer
    _snapshot("check-80", narrow)
    assert "    variables: kernel: float32→float16, bias: float32→float16" in narrow
    wide = io.StringIO()
    show(views.audit_renderables(_report()), file=wide, width=80)  # piped: the natural width
    assert "kernel: float32→float16, bias: float32→float16" in wide.getvalue()


def test_plain_audit_text_ellipsizes_a_cell_longer_than_its_column():
    report = _report()
    long = {f"v{i}": VariableDtypes(stored="float32", read="float16") for i in range(4)}
    layer = report.layers[1].model_copy(update={"variables": long})
    text = views.audit_text(report.model_copy(update={"layers": (report.layers[0], layer)}))
    row = next(line for line in text.splitlines() if "Dense" in line)
    assert "v0: float32→float16, v1: float32→float16, v…" in row


# ------------------------------------------------------------------ progress


def test_progress_bars_are_rich_on_a_terminal_and_off_in_a_pipe():
    with progress_on(io.StringIO()) as shown:
        assert shown is False  # not a TTY: no bar at all
    screen = Console(file=io.StringIO(), force_terminal=True, width=100)
    bars = analyses.progress_with(lambda **kw: RichBar(screen, **kw))
    with bars, progress_bar(total=3, desc="survey") as bar:
        assert isinstance(bar, RichBar)
        bar.set_postfix_str("Dense")
        bar.update(3)
    drawn = screen.file.getvalue()
    assert "survey" in drawn and "3/3" in drawn
    plain = progress_bar(total=1, desc="survey", enabled=False)  # outside: tqdm, as before
    assert type(plain).__name__.startswith("tqdm")


# ------------------------------------------------------------------ real runs


def test_real_probe_all_ends_with_the_summary_table():
    args = ["probe", "Dense", "--input-dtype", "uint8", "--kwargs", '{"units": 4}']
    out = runner.invoke(app, [*args, "--backend", "all"])
    assert out.exit_code == 0, out.output
    tail = out.output[out.output.index("Dense (uint8), policy float32") :]
    for backend in ("jax", "tensorflow", "torch", "numpy"):
        assert f"│ {backend} " in tail
    assert "float32, as documented" in tail
    caption = tail[tail.rindex("└") :]  # below the table: the verdict across the backends
    assert "across backends: as-documented" in caption and "agree on all" in caption
    assert "\x1b[" not in out.output  # not a terminal: no colour


def test_real_table_prints_the_grid_and_long_prints_the_frame():
    args = ["table", "add", "--dtypes", "int8,uint8,uint64", "--backends", "numpy"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("lhs \\ rhs"))
    assert header.split()[3:] == ["int8", "uint8", "uint64"]
    row = next(line for line in lines if line.lstrip().startswith("uint8 "))
    assert row.split()[1:3] == ["int16", "uint8"]
    long = runner.invoke(app, [*args, "--long"])
    assert long.exit_code == 0 and "numpy observed" in long.output  # one column per source


@pytest.fixture(scope="module")
def saved_mixed_model(tmp_path_factory):
    import keras
    import numpy as np

    model = keras.Sequential(
        [keras.Input((4,), dtype="float64"), keras.layers.Dense(2, dtype="mixed_float16")]
    )
    model(np.zeros((1, 4)))
    path = tmp_path_factory.mktemp("model") / "m.keras"
    model.save(path)
    return path


def test_real_check_shows_every_cell_whole(saved_mixed_model):
    out = runner.invoke(app, ["check", str(saved_mixed_model)], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    assert "kernel: float32→float16, bias: float32→float16" in out.output
    assert "[warning] silent-downcast" in out.output
