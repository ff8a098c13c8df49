"""The answers side by side (``records.compare``), from hand-built records: no Keras."""

from __future__ import annotations

from dtype_explorer.records import (
    UNSUPPORTED,
    CastStep,
    ErrorInfo,
    FitReport,
    GradientInfo,
    Numerics,
    ProbeResult,
    ProbeSet,
    ProbeSpec,
    compare,
)

SPEC = ProbeSpec(target="Dense", input_dtypes=("float64",), policy="mixed_float16")


def dense(backend: str, output: str = "float16", *, kernel_read: str = "float16") -> ProbeResult:
    path = (
        CastStep(stage="input", dtype="float64"),
        CastStep(stage="converted", dtype="float64"),
        CastStep(stage="autocast", dtype="float16", changed=True, note="float64 -> float16"),
        CastStep(stage="variables", name="kernel", dtype="float32"),
        CastStep(stage="variables", name="kernel", dtype=kernel_read, changed=True),
        CastStep(stage="output", dtype=output),
    )
    return ProbeResult(
        spec=SPEC.model_copy(update={"backend": backend}),
        status="ok",
        backend=backend,
        output_dtype=output,
        verdict="as-documented",
        cast_path=path,
        numerics=Numerics(output_count=8),
    )


def rows(grid):
    return {row.key: row for row in grid.rows}


def test_rows_that_agree_are_marked_same_and_the_one_that_differs_is_not():
    grid = ProbeSet(
        results=(dense("jax"), dense("torch"), dense("tensorflow", "float32"))
    ).comparison()
    by = rows(grid)
    assert [c.label for c in grid.columns] == ["jax", "torch", "tensorflow"]
    assert by["in0:autocast"].same and by["in0:autocast"].cells["jax"].tone == "changed"
    assert by["var:kernel:stored"].label == "kernel stored" and by["var:kernel:read"].same
    assert not by["out0"].same
    assert by["out0"].cells["tensorflow"].text == "float32"
    assert grid.differing == ("output",)
    assert grid.summary == "1 of 8 rows differ across jax, torch and tensorflow: output"
    # cast path first, in stage order, then the outcome, then numerics
    assert [r.group for r in grid.rows][:5] == ["cast path"] * 5
    assert by["nonfinite"].cells["jax"].text == "every value finite"


def test_everything_agreeing_is_said_in_a_sentence():
    grid = compare([dense("jax"), dense("torch")])
    assert grid.differing == () and all(row.same for row in grid.rows)
    assert grid.summary == "jax and torch agree on all 8 rows"


def test_an_unsupported_backend_has_its_column_but_no_say_in_any_row():
    numpy = ProbeResult(
        spec=SPEC.model_copy(update={"backend": "numpy", "mode": "fit"}),
        status="invalid",
        backend="numpy",
        error=ErrorInfo(type="NotSupported", message="numpy cannot train", where=UNSUPPORTED),
    )
    grid = compare([dense("jax"), numpy, dense("torch")])
    numpy_column = grid.columns[1]
    assert numpy_column.status == "unsupported"
    assert numpy_column.headline == "not supported here: numpy cannot train"
    assert all(row.same for row in grid.rows)  # jax and torch agree; numpy does not vote
    assert rows(grid)["out0"].cells["numpy"].tone == "unsupported"


def test_a_raising_backend_says_so_in_its_output_row_and_lacks_the_later_stages():
    raised = ProbeResult(
        spec=SPEC.model_copy(update={"backend": "torch"}),
        status="error",
        backend="torch",
        cast_path=(CastStep(stage="input", dtype="float64"),),
        error=ErrorInfo(type="RuntimeError", message="addmm: Half and Double\nmore"),
    )
    grid = compare([dense("jax"), raised])
    by = rows(grid)
    # the error in Keras's words once per column: in its headline; the row names its kind
    torch = next(c for c in grid.columns if c.label == "torch")
    assert torch.headline == "raises RuntimeError: addmm: Half and Double"
    assert by["out0"].cells["torch"].text == "raises RuntimeError"
    assert by["out0"].cells["torch"].note == "addmm: Half and Double\nmore"
    assert by["out0"].cells["torch"].tone == "error"
    assert by["in0:autocast"].cells["torch"].text == "not reached: the call raised"
    assert by["in0:input"].same and not by["in0:autocast"].same
    assert "nonfinite" in by and by["nonfinite"].cells["torch"].tone == "absent"


def test_pending_backends_are_columns_that_count_for_no_row():
    grid = compare([dense("jax"), dense("torch", "float32")], pending=("numpy",))
    assert grid.columns[-1].status == "pending"
    assert rows(grid)["out0"].cells["numpy"].tone == "pending"
    assert not rows(grid)["out0"].same


def test_the_training_step_is_a_row_each_for_loss_optimizer_scaling_gradients_warnings():
    def fit(backend: str, nonfinite: int) -> ProbeResult:
        step = FitReport(
            loss="mean_squared_error",
            optimizer="LossScaleOptimizer(SGD)",
            loss_value=0.5,
            loss_scaling=True,
            loss_scale=32768.0,
            loss_scale_after=16384.0 if nonfinite else 32768.0,
            gradients=(
                GradientInfo(
                    name="kernel", dtype="float32", variable_dtype="float32", nonfinite=nonfinite
                ),
            ),
        )
        return dense(backend).model_copy(
            update={
                "spec": SPEC.model_copy(update={"backend": backend, "mode": "fit"}),
                "fit": step,
            }
        )

    by = rows(compare([fit("jax", 0), fit("torch", 3)]))
    assert by["fit:optimizer"].same and by["fit:optimizer"].cells["jax"].text == (
        "LossScaleOptimizer(SGD)"
    )
    assert by["fit:scaling"].cells["torch"].text == "on: 32768 before the step, 16384 after"
    assert not by["fit:scaling"].same
    grad = by["fit:grad:kernel"]
    assert grad.label == "gradient of kernel" and not grad.same
    assert grad.cells["torch"].text == "float32, 3 inf/NaN" and grad.cells["torch"].tone == "error"
    assert by["fit:warnings"].cells["jax"].text == "none"
    assert by["fit:loss"].cells["jax"].text == "mean_squared_error, 0.5"


def test_a_dataset_run_keras_cannot_map_off_tensorflow_is_unsupported_not_an_error():
    tb = (
        'in user code:\n\n    File "_modes.py", line 261\n\n    NotImplementedError: Cannot convert'
    )
    failed = ProbeResult(
        spec=SPEC.model_copy(update={"backend": "tensorflow", "mode": "dataset"}),
        status="error",
        backend="tensorflow",
        error=ErrorInfo(type="NotImplementedError", message=tb),
    )
    assert failed.headline == "raises NotImplementedError: Cannot convert"
    assert not failed.unsupported and failed.shown_verdict != "unsupported"
    limit = failed.model_copy(
        update={
            "backend": "jax",
            "error": ErrorInfo(type="NotImplementedError", message="jax cannot", where=UNSUPPORTED),
        }
    )
    assert limit.unsupported and limit.shown_verdict == "unsupported"
    assert limit.headline == "not supported here: jax cannot"
    grid = compare([limit, dense("tensorflow")])
    assert grid.columns[0].status == "unsupported"
    assert ProbeSet(results=(limit, dense("tensorflow"))).verdict == "as-documented"


def test_a_failure_of_the_tool_or_the_worker_is_never_said_to_be_the_calls():
    """A column whose answer is dtype-explorer's own failure, a timeout or a crash: its
    headline and its missing stages name that, never "raises" or "the call raised"."""
    base = dict(spec=SPEC.model_copy(update={"backend": "torch"}), backend="torch",
                cast_path=(CastStep(stage="input", dtype="float64"),))  # fmt: skip
    tool = ProbeResult(
        status="invalid",
        error=ErrorInfo(type="AttributeError", message="'NoneType' object\nmore", where="tool"),
        **base,
    )
    timeout = ProbeResult(status="timeout", **base)
    crashed = ProbeResult(status="crashed", **base)
    assert tool.headline == (
        "dtype-explorer failed (no answer of Keras): AttributeError: 'NoneType' object"
    )
    for result, why in [
        (tool, "dtype-explorer failed"),
        (timeout, "the probe timed out"),
        (crashed, "the worker crashed"),
    ]:
        grid = compare([dense("jax"), result])
        column = next(c for c in grid.columns if c.label == "torch")
        assert not column.headline.startswith("raises")
        assert rows(grid)["in0:autocast"].cells["torch"].text == f"not reached: {why}"
