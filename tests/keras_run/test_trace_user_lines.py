"""The user's own operators in a layer defined in a notebook cell (issue 39 item 16): the class
travels to the worker by value (cloudpickle names its code ``<dynamic-code>``), and the op
trace must still show ``x * c`` on the user's file, line and text, with the dtype raw Keras
gives under ``mixed_bfloat16`` on that backend (raw Keras runs in the backend's worker as a
plain expression, nothing of dtype_explorer in it).

The cell is made as IPython makes one: code compiled under a file name that exists only in
``linecache``, in a module that is not importable.
"""

from __future__ import annotations

import linecache
import os
import types

import pytest

import dtype_explorer as dx
from dtype_explorer import pool

CELL = """\
import keras


class Scaled(keras.layers.Layer):
    def call(self, x):
        c = keras.ops.convert_to_tensor(3.0)
        return x * c
"""
CELL_FILE = f"/tmp/ipykernel_{os.getpid()}/dx_test_cell.py"  # never written: linecache only
MUL_LINE = 7


def notebook_class() -> type:
    lines = CELL.splitlines(keepends=True)
    linecache.cache[CELL_FILE] = (len(CELL), None, lines, CELL_FILE)
    module = types.ModuleType("dx_test_cell")  # not in sys.modules: pickled by value
    exec(compile(CELL, CELL_FILE, "exec"), module.__dict__)
    return module.Scaled


def raw(backend: str, expression: str) -> str:
    """``expression``'s dtype by bare Keras on ``backend`` (``k`` keras, ``x`` a (2, 3) bfloat16
    tensor as the layer's autocast gives it)."""
    code = (
        "(lambda k: (lambda x: k.backend.standardize_dtype((" + expression + ").dtype))("
        "k.ops.cast(k.ops.ones((2, 3)), 'bfloat16')))(__import__('keras'))"
    )
    return pool.call(backend, eval, code).result(timeout=300)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_x_times_c_in_a_notebook_layer_is_traced_on_the_users_line(backend):
    r = dx.probe(notebook_class(), policy="mixed_bfloat16", shape=(2, 3), backend=backend)
    assert r.status == "ok", r.error
    steps = [s for s in r.call_trace() if s.op == "operator.mul"]
    assert len(steps) == 1, [s.signature() for s in r.call_trace()]
    (mul,) = steps
    assert mul.source is not None
    assert (mul.source.file, mul.source.line) == (CELL_FILE, MUL_LINE)
    assert mul.source.text == "return x * c" and mul.source.function == "call"
    expected = raw(backend, "x * k.ops.convert_to_tensor(3.0)")
    assert [t.dtype for t in mul.inputs] == ["bfloat16", "float32"]
    assert mul.outputs[0].dtype == expected == r.output_dtype
    # the constant's own step is on the user's line too
    (const,) = [s for s in r.call_trace() if s.op == "ops.convert_to_tensor"]
    assert const.source.file == CELL_FILE and "convert_to_tensor(3.0)" in const.source.text


def test_on_tensorflow_the_failing_multiply_is_on_the_users_line_as_raw_keras_fails():
    with pytest.raises(Exception) as raised:  # raw: TF refuses bfloat16 * float32
        raw("tensorflow", "x * k.ops.convert_to_tensor(3.0)")
    r = dx.probe(notebook_class(), policy="mixed_bfloat16", shape=(2, 3), backend="tensorflow")
    assert r.status == "error" and r.error is not None
    assert type(raised.value).__name__ in r.error.type or r.error.type in str(raised.value)
    (mul,) = [s for s in r.call_trace() if s.op == "operator.mul"]
    assert (mul.source.file, mul.source.line, mul.source.text) == (
        CELL_FILE,
        MUL_LINE,
        "return x * c",
    )
