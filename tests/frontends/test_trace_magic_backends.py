"""``%%dtype_trace --backend``: one cell's source in each backend's user-code worker (real
workers), the answers side by side and where they part, compared with the same code run
untraced under raw Keras on each backend; bad cells there (a name that cannot travel, a loop
past ``--timeout``, ``sys.exit()``, a patch of ``Dense.call``) get clear answers and the pool
keeps answering right."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from IPython.core.error import UsageError

import dtype_explorer as dx
from dtype_explorer.records import CodeComparison
from tests.on_backend import json_on

PARTS = "y = keras.utils.to_categorical(np.array([0, 1]), 2)\nz = keras.ops.add(y, 1)\nz"
AGREES = "a = keras.ops.convert_to_tensor(v)\nb = keras.ops.multiply(a, 3)\nb"

_RAW = """
import json, keras, numpy as np
v = np.arange(4, dtype="float32")
{code}
print(json.dumps({{"dtype": keras.backend.standardize_dtype(out.dtype),
                   "values": np.asarray(keras.ops.convert_to_numpy(out)).reshape(-1).tolist()}}))
"""


def _raw(backend, cell):
    body, last = cell.rsplit("\n", 1)
    return json_on(backend, _RAW.format(code=f"{body}\nout = {last}"))


@pytest.fixture
def ns(shell):
    shell.user_ns.update(keras=keras, np=np, v=np.arange(4, dtype="float32"))
    yield shell.user_ns
    for name in ("v", "f", "y", "z"):
        shell.user_ns.pop(name, None)


def _pool_answers_right():
    raw = keras.layers.Dense(2)(np.ones((1, 3), "float64"))
    for backend in ("jax", "numpy"):
        r = dx.probe("Dense", input_dtype="float64", backend=backend, kwargs={"units": 2})
        assert r.status == "ok" and r.output_dtype == keras.backend.standardize_dtype(raw.dtype)
    # a user instance runs in the user-code worker that ran the cells: Keras's own Dense there
    layer = keras.layers.Dense(2, kernel_initializer="ones")
    r = dx.probe(layer, input_dtype="float32", backend="jax")
    assert r.status == "ok" and r.output_dtype == "float32"
    assert r.numerics is None or r.numerics.findings == ()


def test_backends_that_part_are_named_at_the_first_step(shell, ns):
    comparison = shell.run_cell_magic("dtype_trace", "--backend jax,numpy", PARTS)
    assert isinstance(comparison, CodeComparison)
    assert set(comparison.results) == {"jax", "numpy"}
    assert comparison.statuses() == {"jax": "ok", "numpy": "ok"}
    for backend, result in comparison.results.items():
        raw = _raw(backend, PARTS)
        assert result.returned_dtype == raw["dtype"]
        assert list(result.returned[0].sample) == raw["values"]
        assert result.environment.where == f"{backend}~user worker"
    part = comparison.dtype_part()
    assert part is not None and part.op in {
        s.op for r in comparison.results.values() for s in r.steps
    }
    # the headline names the cell's line that caused it; the text marks the step
    assert comparison.headline().startswith(
        f"The backends first part by dtype at {part.op}, caused by cell line 1 "
        "(`y = keras.utils.to_categorical(np.array([0, 1]), 2)`)"
    )
    assert any(line.startswith(">>#") for line in str(comparison).splitlines())
    assert "dx-card" in comparison._repr_html_() and "== jax ==" in str(comparison)


def test_backends_that_agree_say_so(shell, ns):
    comparison = shell.run_cell_magic("dtype_trace", "--backend jax,torch", AGREES)
    assert comparison.dtype_part() is None and comparison.value_part() is None
    assert "agree" in comparison.headline()
    for backend, result in comparison.results.items():
        raw = _raw(backend, AGREES)
        assert result.returned_dtype == raw["dtype"]
        assert list(result.returned[0].sample) == raw["values"]


def test_a_name_that_cannot_travel_is_named(shell, ns):
    shell.user_ns["f"] = lambda t: t
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("dtype_trace", "--backend jax", "f(v)")
    assert "f (builtins.function)" in str(info.value) and "What travels" in str(info.value)
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("dtype_trace", "--backend jaxx", "v")
    assert "jax" in str(info.value)


def test_bad_cells_in_a_worker_get_clear_answers_and_the_pool_goes_on(shell, ns):
    loop = shell.run_cell_magic("dtype_trace", "--backend jax --timeout 5", "while True: pass")
    assert loop.results["jax"].status == "timeout"
    exited = shell.run_cell_magic("dtype_trace", "--backend jax", "import sys\nsys.exit(2)")
    assert exited.results["jax"].status == "exited"
    assert "sys.exit(2)" in exited.results["jax"].error.message
    raised = shell.run_cell_magic(
        "dtype_trace",
        "--backend jax",
        "a = keras.ops.ones(1)\nb = a + 1\nc = b * 2\nraise KeyError('k')",
    )
    jax = raised.results["jax"]
    assert jax.status == "raised" and len(jax.steps) == 3 and "KeyError" in jax.error.traceback
    assert "dtype_explorer" not in jax.error.traceback
    patched = shell.run_cell_magic(
        "dtype_trace",
        "--backend jax",
        "keras.layers.Dense.call = lambda self, x: x * 0\nkeras.layers.Dense(2)(v[None])",
    )
    assert patched.results["jax"].status == "ok"
    assert "put back after the cell" in patched.results["jax"].note
    assert keras.layers.Dense.call.__name__ == "call"  # the kernel's Dense is untouched
    _pool_answers_right()
