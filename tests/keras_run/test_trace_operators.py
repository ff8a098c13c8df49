"""The user's Python operators in the op trace (issue 22): ``x * self.scale + 1``, ``a + b``
and an int tensor times a float variable, probed in process (tensorflow) and through the
pool's real workers, with the user's line and the dtypes raw Keras gives on that backend; on
numpy the trace note says they are not traced; nothing is left patched afterwards.

Raw Keras on another backend runs in that backend's worker as a plain expression
(``pool.call(backend, eval, ...)``): nothing of dtype_explorer is in it.
"""

from pathlib import Path

import keras
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.keras_run.trace._op_trace import op_trace

WORKERS = ["jax", "torch", "tensorflow"]
LINES = {
    mark: i
    for i, line in enumerate(Path(__file__).read_text().splitlines(), 1)
    for mark in ("# SCALE", "# SUM", "# INT")
    if line.rstrip().endswith(mark)
}


class Scale(keras.layers.Layer):
    def build(self, shape):
        self.scale = self.add_weight(shape=(), initializer="ones", name="scale")

    def call(self, x):
        return x * self.scale + 1  # SCALE


class Sum(keras.layers.Layer):
    def call(self, a, b):
        return a + b  # SUM


class IntTimesFloat(keras.layers.Layer):
    def build(self, shape):
        self.scale = self.add_weight(shape=(), initializer="ones", dtype="float32", name="s")

    def call(self, x):
        return x * self.scale  # INT


def raw(backend: str, expression: str) -> str:
    """The output dtype of ``expression`` by bare Keras on ``backend`` (``k`` is keras, ``np``
    numpy, ``t(dtype)`` a (2, 3) tensor of ones, ``v(dtype)`` a variable of 1.0)."""
    code = (
        f"(lambda k, np: (lambda t, v: k.backend.standardize_dtype(({expression}).dtype))("
        "lambda d: k.ops.convert_to_tensor(np.ones((2, 3)), d), "
        "lambda d: k.Variable(1.0, dtype=d)))(__import__('keras'), __import__('numpy'))"
    )
    if backend == keras.backend.backend():
        return eval(code)
    return pool.call(backend, eval, code).result(timeout=120)


def operator_steps(result, mark):
    return [
        s
        for s in result.call_trace()
        if s.op.startswith("operator.") and s.source and s.source.line == LINES[mark]
    ]


@pytest.mark.parametrize("backend", [None, *WORKERS])
def test_x_times_a_variable_plus_one_is_two_operator_steps_on_the_users_line(backend):
    r = dx.probe(Scale, input_dtype="float16", backend=backend)
    assert r.status == "ok", r.error
    steps = operator_steps(r, "# SCALE")
    assert [s.op for s in steps] == ["operator.mul", "operator.add"], [
        s.signature() for s in r.call_trace()
    ]
    mul, add = steps
    for step in steps:
        assert step.source.file == __file__ and step.source.function == "call"
        assert "x * self.scale + 1" in step.source.text and step.source.url is None
    # the layer autocasts x to its float32 compute dtype; the variable is float32
    assert [(t.dtype, t.kind) for t in mul.inputs] == [
        ("float32", "tensor"),
        ("float32", "variable"),
    ]
    assert len(mul.inputs[0].shape) == 2 and mul.inputs[1].shape == ()
    assert mul.outputs[0].shape == add.outputs[0].shape == mul.inputs[0].shape
    assert [t.dtype for t in add.inputs] == ["float32", "python_int"]
    expected = raw(backend or keras.backend.backend(), "t('float32') * v('float32') + 1")
    assert add.outputs[0].dtype == expected == r.output_dtype
    assert add.change == "kept"


@pytest.mark.parametrize("backend", [None, *WORKERS])
def test_a_plus_b_of_two_inputs_is_one_step_with_both_operands(backend):
    r = dx.probe(Sum, input_dtype=("int32", "int32"), backend=backend)
    assert r.status == "ok", r.error
    (step,) = operator_steps(r, "# SUM")
    assert step.op == "operator.add" and "a + b" in step.source.text
    assert [t.dtype for t in step.inputs] == ["int32", "int32"]
    assert step.outputs[0].dtype == raw(
        backend or keras.backend.backend(), "t('int32') + t('int32')"
    )


@pytest.mark.parametrize("backend", [None, *WORKERS])
def test_an_int_tensor_times_a_float_variable_shows_the_dtype_raw_keras_gives(backend):
    r = dx.probe(IntTimesFloat, input_dtype="int32", backend=backend)
    assert r.status == "ok", r.error
    (step,) = operator_steps(r, "# INT")
    assert step.op == "operator.mul"
    assert [(t.dtype, t.kind) for t in step.inputs] == [
        ("int32", "tensor"),
        ("float32", "variable"),
    ]
    expected = raw(backend or keras.backend.backend(), "t('int32') * v('float32')")
    assert step.outputs[0].dtype == expected == r.output_dtype
    if expected == "float32":  # every backend here promotes; the step says by which rule
        assert step.change == "promoted" and step.result_type_args == ("int32", "float32")
        assert r.first_dtype_change().index <= step.index


def test_on_numpy_the_trace_note_says_operators_are_not_traced():
    r = dx.probe(Scale, input_dtype="float32", backend="numpy")
    assert r.status == "ok", r.error
    assert "operators on NumPy arrays" in r.trace_note and "not traced" in r.trace_note
    assert "operators on NumPy arrays" in str(r)
    assert not operator_steps(r, "# SCALE")
    # a Keras variable's operators are Keras's: traced there too
    assert not dx.probe(Scale, input_dtype="float32", backend="jax").trace_note


# ----------------------------------------------------------------- nothing left patched


class RaisesAfterAnOperator(keras.layers.Layer):
    def call(self, x):
        _ = x * 2.0
        raise ValueError("after one operator")


def _operator_slots():
    """Every operator on the in-process backend's tensor classes and Keras's Variable."""
    import tensorflow as tf
    from keras.src.backend.common.variables import Variable

    classes = (tf.Tensor, type(tf.constant(0.0)), Variable)
    return {(c, k): v for c in classes for k, v in vars(c).items() if k.startswith("__")}


def test_in_process_nothing_is_left_patched_also_when_the_call_raises():
    before = _operator_slots()
    with op_trace() as trace:
        assert _operator_slots() != before  # the operators are wrapped while it is open
        Scale()(np.ones((1, 3), "float32"))
    assert _operator_slots() == before
    assert any(s.op == "operator.mul" for s in trace.steps())
    with pytest.raises(ValueError, match="after one operator"), op_trace() as trace:
        RaisesAfterAnOperator()(np.ones((1, 3), "float32"))
    assert _operator_slots() == before
    assert [s.op for s in trace.steps() if s.op.startswith("operator.")] == ["operator.mul"]
    r = dx.probe(RaisesAfterAnOperator, input_dtype="float32")
    assert r.status in ("error", "invalid") and _operator_slots() == before


WORKER_CHECK = """
import inspect, keras, numpy as np
from keras.src.backend.common.variables import Variable
from dtype_explorer.keras_run.trace import _op_trace as _trace
from dtype_explorer.keras_run.trace import _operators as o
from dtype_explorer.keras_run.trace._op_trace import op_trace

# a worker keeps the wrappers in place between traces (issue 27): a passthrough outside one
assert _trace._TRACING.resident and _trace._TRACING.bound
wrappers = {id(w) for w in o._WRAPPERS.values()}
classes = [Variable, type(keras.ops.ones(()))]
if keras.backend.backend() == "torch":
    import torch
    from torch.overrides import _get_current_function_mode_stack as modes
    classes.append(torch.Tensor)
    before = (torch.Tensor.__mul__, torch.Tensor.__add__, torch.Tensor.__getitem__)
    assert not modes(), modes()
x = keras.ops.ones((2,))
assert keras.ops.add.__wrapped__ is not None and _trace._TRACING.trace is None
assert inspect.signature(keras.ops.add) == inspect.signature(keras.ops.add.__wrapped__)
assert keras.ops.convert_to_numpy(x * 2.0 + keras.ops.add(x, 1.0)).tolist() == [4.0, 4.0]

class Raises(keras.layers.Layer):
    def call(self, x):
        _ = x * 2.0
        raise ValueError("after one operator")

try:
    with op_trace() as trace:
        Raises()(np.ones((1, 3), "float32"))
except ValueError:
    pass
assert [s.op for s in trace.steps() if s.op.startswith("operator.")] == ["operator.mul"]
assert _trace._TRACING.trace is None and _trace._TRACING.installed == 0
if keras.backend.backend() == "torch":
    assert not modes(), modes()
    assert (torch.Tensor.__mul__, torch.Tensor.__add__, torch.Tensor.__getitem__) == before
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_in_a_worker_the_wrappers_stay_and_pass_through_also_when_the_call_raises(backend):
    r = dx.probe(RaisesAfterAnOperator, input_dtype="float32", backend=backend)
    assert r.status in ("error", "invalid"), r.status
    assert dx.probe(Scale, input_dtype="float32", backend=backend).status == "ok"
    pool.call(backend, exec, WORKER_CHECK, {}).result(timeout=120)  # raises if it fails


# ------------------------------ torch: the user's operators run inside a Keras op


class LoopBody(keras.layers.Layer):
    def call(self, x):
        return keras.ops.fori_loop(0, 2, lambda i, v: v * 2.0, x)  # LOOP


class SwitchBranches(keras.layers.Layer):
    def call(self, x):
        return keras.ops.switch(0, [lambda v: v * 3.0, lambda v: v], x)  # BRANCH


class GeneratorArgument(keras.layers.Layer):
    def call(self, x):
        return keras.ops.stack(v * 4.0 for v in (x, x))  # GENERATOR


class Rows:
    """The user's sequence: each row computed as it is read."""

    def __init__(self, x):
        self.x = x

    def __len__(self):
        return 2

    def __getitem__(self, i):
        if i >= 2:
            raise IndexError(i)
        return self.x[i] * 5.0  # ROWS


class SequenceArgument(keras.layers.Layer):
    def call(self, x):
        return keras.ops.convert_to_tensor(Rows(x))


LINES.update(
    {
        mark: i
        for i, line in enumerate(Path(__file__).read_text().splitlines(), 1)
        for mark in ("# LOOP", "# BRANCH", "# GENERATOR", "# ROWS")
        if line.rstrip().endswith(mark)
    }
)


@pytest.mark.parametrize(
    ("layer", "mark", "count"),
    [
        (LoopBody, "# LOOP", 2),
        (SwitchBranches, "# BRANCH", 1),
        (GeneratorArgument, "# GENERATOR", 2),
        (SequenceArgument, "# ROWS", 2),
    ],
)
def test_on_torch_the_users_operators_inside_a_keras_op_that_calls_back_are_steps(
    layer, mark, count
):
    # a loop's body, a switch's branches, a generator and a sequence whose rows are computed as
    # they are read are the user's code run inside a Keras op: each operator there is a step
    # on its line (torch's operators are seen through a function mode, on at every depth)
    r = dx.probe(layer, input_dtype="float32", backend="torch")
    assert r.status == "ok", r.error
    steps = [s for s in operator_steps(r, mark) if s.op == "operator.mul"]
    assert len(steps) == count, [s.op for s in r.call_trace()]
    assert [t.dtype for t in steps[0].inputs] == ["float32", "python_float"]
    assert steps[0].outputs[0].dtype == raw("torch", "t('float32') * 2.0") == r.output_dtype
