"""``%%dtype_trace --engine`` and ``--precision``: a cell run as written in another Keras
release's user-code worker (real engine workers), compared with the same code run untraced by
that release alone (raw Keras 3.11.3, no dtype-explorer, in a fresh process); the float32
matmul precision set for a cell, compared with the backend's own setting made by hand; bad
values get clear answers."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
from IPython.core.error import UsageError

from dtype_explorer.records import CodeComparison, TraceResult
from tests.on_backend import json_on

#: float32 in Keras 3.11.3, int32 from 3.12.0 on (tests/runtime/test_engines.py found it).
CELL = (
    'layer = keras.layers.Discretization(bin_boundaries=[0.5, 1.5], dtype="float32")\n'
    "y = layer(x)\n"
    "y"
)
X = np.array([[1.0, 0.2], [2.0, 1.4]], dtype="float32")

_RAW = """
import json, keras, numpy as np
x = np.array({x}, dtype="float32")
{body}
out = {last}
print(json.dumps({{"keras": keras.__version__,
                   "dtype": keras.backend.standardize_dtype(out.dtype),
                   "values": np.asarray(keras.ops.convert_to_numpy(out)).reshape(-1).tolist()}}))
"""


def _raw(backend, site=None):
    body, last = CELL.rsplit("\n", 1)
    script = _RAW.format(x=json.dumps(X.tolist()), body=body, last=last)
    return json_on(backend, script, site=site)


@pytest.fixture
def ns(shell):
    shell.user_ns.update(keras=keras, np=np, x=X)
    yield shell.user_ns
    for name in ("x", "y", "layer"):
        shell.user_ns.pop(name, None)


def _same_as_raw(result, raw):
    assert result.status == "ok", result.error
    assert result.environment.keras == raw["keras"]
    assert result.returned_dtype == raw["dtype"]
    assert list(result.returned[0].sample) == raw["values"]


def test_engine_runs_the_cell_in_that_release_as_raw_keras_does(shell, ns, keras_3_11_engine):
    backend = keras.backend.backend()
    result = shell.run_cell_magic("dtype_trace", "--engine keras==3.11.3", CELL)
    assert isinstance(result, TraceResult)  # one engine, this kernel's backend: one answer
    raw_old = _raw(backend, site=keras_3_11_engine.site)
    assert raw_old["keras"] == "3.11.3"
    _same_as_raw(result, raw_old)
    assert result.environment.engine == "keras==3.11.3"
    assert result.environment.where == f"{backend}~user worker of engine keras==3.11.3"
    assert "Discretization.__call__" in [s.op for s in result.steps]
    # the installed Keras answers otherwise, traced as raw
    here = shell.run_cell_magic("dtype_trace", "", CELL)
    untraced = keras.layers.Discretization(bin_boundaries=[0.5, 1.5], dtype="float32")(X)
    assert here.returned_dtype == keras.backend.standardize_dtype(untraced.dtype)
    assert here.returned_dtype != result.returned_dtype, "pick a cell the releases part on"


def test_engine_with_backends_runs_each_backend_of_that_release(shell, ns, keras_3_11_engine):
    comparison = shell.run_cell_magic("dtype_trace", "--engine 3.11.3 --backend jax,numpy", CELL)
    assert isinstance(comparison, CodeComparison)
    assert set(comparison.results) == {"jax", "numpy"}
    for backend, result in comparison.results.items():
        _same_as_raw(result, _raw(backend, site=keras_3_11_engine.site))
        assert result.environment.where == f"{backend}~user worker of engine keras==3.11.3"


def test_an_engine_form_that_names_none_is_refused_naming_the_forms_and_engines(
    shell, ns, keras_3_11_engine
):
    with pytest.raises(UsageError) as refused:
        shell.run_cell_magic("dtype_trace", "--engine keras3.11", CELL)
    text = str(refused.value)
    assert "'keras3.11'" in text and "keras==3.X.Y" in text
    assert "created here:" in text and "keras==3.11.3" in text
    # a well-formed release that does not exist: pip's answer (the closest releases), and
    # the engines created here
    with pytest.raises(UsageError) as refused:
        shell.run_cell_magic("dtype_trace", "--engine keras==3.99.0", CELL)
    text = str(refused.value)
    assert "keras==3.99.0" in text and "created here:" in text and "keras==3.11.3" in text
    with pytest.raises(UsageError, match=r"Keras 2 \(tf_keras\) has no keras\.ops"):
        shell.run_cell_magic("dtype_trace", "--engine tf_keras", CELL)
    assert "y" not in ns  # nothing ran


def _tf32_enabled_raw(enabled: bool) -> bool:
    import tensorflow as tf

    before = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(enabled)
    try:
        return tf.config.experimental.tensor_float_32_execution_enabled()
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(before)


def test_precision_sets_the_backends_matmul_precision_for_the_cell_only(shell, ns):
    assert keras.backend.backend() == "tensorflow"  # the session's kernel backend (conftest)
    import tensorflow as tf

    before = tf.config.experimental.tensor_float_32_execution_enabled()
    cell = "import tensorflow as tf\ntf.config.experimental.tensor_float_32_execution_enabled()"
    for precision, enabled in (("highest", False), ("tf32", True)):
        result = shell.run_cell_magic("dtype_trace", f"--precision {precision}", cell)
        assert result.returned[0].text == repr(_tf32_enabled_raw(enabled))
        assert result.environment.precision == precision
        assert f"matmul precision {precision}" in str(result)
        assert tf.config.experimental.tensor_float_32_execution_enabled() == before  # put back
    # in a worker too: jax's own setting, made there by the cell's --precision
    jax_cell = "import jax\njax.config.values['jax_default_matmul_precision']"
    compared = shell.run_cell_magic("dtype_trace", "--backend jax --precision tf32", jax_cell)
    raw = json_on(
        "jax",
        "import jax, json\njax.config.update('jax_default_matmul_precision', 'tensorfloat32')\n"
        "print(json.dumps(repr(jax.config.values['jax_default_matmul_precision'])))",
    )
    assert compared.results["jax"].returned[0].text == raw
    with pytest.raises(UsageError, match=r"unknown precision 'fp32'.*Valid: default, highest"):
        shell.run_cell_magic("dtype_trace", "--precision fp32", cell)


_RAW_LOAD = """
import json, keras
config = json.load(open({path!r}))
try:
    keras.saving.deserialize_keras_object(config)
    print(json.dumps({{"keras": keras.__version__, "error": None}}))
except Exception as error:
    print(json.dumps({{"keras": keras.__version__, "error": type(error).__name__}}))
"""


def test_a_layer_the_release_cannot_load_is_named(shell, ns, keras_3_11_engine, tmp_path):
    """A layer built in the kernel travels as its .keras archive; Keras 3.11.3 reads no config
    of a newer release's Dense (raw 3.11.3 refuses it too): the cell's answer names the layer
    and the release, and says to define it inside the cell."""
    layer = keras.layers.Dense(2)
    layer.build((None, 2))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(keras.saving.serialize_keras_object(layer)))
    raw = json_on("numpy", _RAW_LOAD.format(path=str(path)), site=keras_3_11_engine.site)
    assert raw["keras"] == "3.11.3" and raw["error"] is not None, "pick a layer 3.11.3 refuses"
    ns["d"] = layer
    try:
        compared = shell.run_cell_magic(
            "dtype_trace", "--engine keras==3.11.3 --backend numpy", "d(x)"
        )
    finally:
        ns.pop("d")
    result = compared.results["numpy"]
    assert (result.status, result.error.type) == ("raised", "TypeError")
    message = result.error.message
    assert "the cell reads 'd' from the kernel, sent as its .keras archive" in message
    assert "Keras 3.11.3 here could not make again" in message and raw["error"] in message
    assert "define it inside the cell" in message


def test_eager_runs_the_cells_compiled_functions_op_by_op(shell, ns):
    import tensorflow as tf  # the session's kernel backend (conftest)

    shell.run_cell(
        "import tensorflow as tf\n"
        "grows = tf.function(lambda y: keras.ops.exp(keras.ops.cast(y, 'float16')))\n"
        "x = np.array([1.0, 12.0], 'float32')\n"
        "raw = grows(x)"  # compiled by the user's own call
    )
    plain = shell.run_cell_magic("dtype_trace", "", "grows(x)")
    assert plain.steps == ()  # the graph ran: no step the trace sees
    eager = shell.run_cell_magic("dtype_trace", "--eager", "grows(x)")
    assert [s.op for s in eager.steps] == ["ops.cast", "ops.exp"] and eager.environment.eager
    assert eager.first_nonfinite_step().op == "ops.exp"
    assert np.array_equal(np.asarray(eager.value), np.asarray(ns["raw"]), equal_nan=True)
    assert tf.config.functions_run_eagerly() is False  # put back
