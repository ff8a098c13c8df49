"""``%%dtype_trace`` driven through a real IPython ``InteractiveShell``: the user's own cell run
as written, compared with the same code run untraced; bad cells (a syntax error, a raise, a
loop past ``--timeout``, ``sys.exit()``, a patch of ``Dense.call``) each get a clear answer and
the shell, Keras and the workers keep answering right afterwards."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from IPython.core.error import UsageError

import dtype_explorer as dx
from dtype_explorer.records import TraceResult


@pytest.fixture
def ns(shell):
    shell.user_ns.update(keras=keras, np=np, x=np.ones((2, 3)))
    yield shell.user_ns
    for name in ("x", "y", "z", "dense", "a", "b", "c"):
        shell.user_ns.pop(name, None)


def _after_is_fine(shell):
    """The shell runs a plain cell, Keras's settings are the user's, an in-process probe
    answers as raw Keras does."""
    assert shell.run_cell("1 + 1").result == 2
    assert keras.config.dtype_policy().name == "float32" and keras.config.floatx() == "float32"
    raw = keras.layers.Dense(2)(np.ones((1, 3), "float64"))
    probed = dx.probe("Dense", input_dtype="float64", kwargs={"units": 2})
    assert probed.output_dtype == keras.backend.standardize_dtype(raw.dtype)


CELL = """dense = keras.layers.Dense(2, kernel_initializer="ones")
y = dense(x)
z = keras.ops.cast(y, "float16")
z * 2
"""


def test_the_cell_runs_as_written_with_its_lines(shell, ns):
    result = shell.run_cell_magic("dtype_trace", "", CELL)
    assert isinstance(result, TraceResult) and result.status == "ok"
    layer = next(s for s in result.steps if s.op == "Dense.__call__")
    assert layer.inputs[0].dtype == "float64" and result.line_of(layer) == "cell line 2"
    cast = next(s for s in result.steps if s.op == "ops.cast")
    assert result.line_of(cast) == "cell line 3" and cast.lossy
    # the cell's names are set as untraced, its value is its last expression's
    untraced = keras.ops.cast(ns["dense"](ns["x"]), "float16") * 2
    assert result.returned_dtype == keras.backend.standardize_dtype(untraced.dtype)
    assert np.array_equal(
        keras.ops.convert_to_numpy(result.value), keras.ops.convert_to_numpy(untraced)
    )
    assert "cell line 2" in str(result) and "dx-card" in result._repr_html_()
    _after_is_fine(shell)


def test_policy_and_floatx_are_put_back(shell, ns):
    result = shell.run_cell_magic(
        "dtype_trace", "--policy mixed_float16 --floatx float64", "y = keras.layers.Dense(2)(x)\ny"
    )
    assert result.environment.policy == "mixed_float16"
    assert result.environment.floatx == "float64"
    assert result.returned_dtype == "float16"
    _after_is_fine(shell)


def test_a_syntax_error_is_the_users(shell, ns, capsys):
    assert shell.run_cell_magic("dtype_trace", "", "y = (1,\n") is None
    said = capsys.readouterr()
    assert "SyntaxError" in said.out + said.err
    _after_is_fine(shell)


def test_a_raise_in_step_three_shows_the_steps_and_the_users_traceback(shell, ns):
    cell = (
        "a = keras.ops.add(x, 1)\nb = keras.ops.multiply(a, 2)\nc = keras.ops.subtract(b, 1)\n"
        "raise RuntimeError('mine, after three steps')\n"
    )
    result = shell.run_cell_magic("dtype_trace", "", cell)
    assert result.status == "raised" and result.error.type == "RuntimeError"
    assert [s.op for s in result.steps] == ["ops.add", "ops.multiply", "ops.subtract"]
    assert [result.line_of(s) for s in result.steps] == [f"cell line {i}" for i in (1, 2, 3)]
    assert "mine, after three steps" in result.error.traceback
    assert "dtype_explorer" not in result.error.traceback
    assert result.cell_file in result.error.traceback
    _after_is_fine(shell)


def test_a_loop_past_its_timeout_is_stopped(shell, ns):
    result = shell.run_cell_magic(
        "dtype_trace", "--timeout 5", "a = keras.ops.ones(1)\nwhile True: pass"
    )
    assert result.status == "timeout" and "--timeout 5" in result.error.message
    assert [s.op for s in result.steps] == ["ops.ones"]
    _after_is_fine(shell)


def test_sys_exit_gets_a_clear_answer(shell, ns):
    result = shell.run_cell_magic("dtype_trace", "", "import sys\nsys.exit(3)")
    assert result.status == "exited" and "sys.exit(3)" in result.error.message
    assert "goes on" in result.error.message
    _after_is_fine(shell)


def test_a_cell_that_patches_dense_call_changes_only_what_the_user_changed(shell, ns):
    original = keras.layers.Dense.call
    cell = (
        "original = keras.layers.Dense.call\n"
        "keras.layers.Dense.call = lambda self, inputs: original(self, inputs) * 0\n"
        "keras.layers.Dense(2)(x)\n"
    )
    try:
        result = shell.run_cell_magic("dtype_trace", "", cell)
        assert result.status == "ok"
        assert "operator.mul" in [s.op for s in result.steps]
    finally:
        keras.layers.Dense.call = original
        ns.pop("original", None)
    # a worker never ran the cell: its Dense is Keras's own
    worker = dx.probe("Dense", input_dtype="float64", backend="numpy", kwargs={"units": 2})
    assert worker.status == "ok" and worker.output_dtype == "float32"
    assert worker.numerics is None or not getattr(worker.numerics, "all_zero", False)
    _after_is_fine(shell)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("--backend jaxx", "'jaxx'"),
        ("--policy mixed_flaot16", "mixed_float16"),
        ("--floatx int8", "int8"),
        ("--max-steps -1", "received: -1"),
        ("--timeout 0", "received: 0"),
        ("--nope", "cannot read the arguments"),
    ],
)
def test_bad_options_are_named(shell, ns, line, said):
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("dtype_trace", line, "keras.ops.ones(1)")
    assert said in str(info.value)
    _after_is_fine(shell)
