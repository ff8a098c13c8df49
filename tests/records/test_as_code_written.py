""" "Copy as code" written from hand-built records: no Keras here (the scripts are run beside
raw Keras in tests/analyses/test_as_code.py). The literals give the exact values back, the
``dx`` call holds what the user asked and nothing the tool filled in, and what a record
cannot hold (a user's class or model, a large array) is a name the code says to fill in."""

from __future__ import annotations

import ast

import ml_dtypes
import numpy as np
import pytest

from dtype_explorer.records import (
    AuditQuestion,
    AuditReport,
    CodeArray,
    CodeCopy,
    ErrorInfo,
    InputValue,
    KerasCall,
    LayerCall,
    ProbeResult,
    ProbeSet,
    ProbeSpec,
)
from dtype_explorer.records._as_code import array_code, node_code, python_code
from dtype_explorer.views import code_html, code_text


def back(code: str):
    """The value a literal's code makes."""
    return eval(code, {"np": np, "ml_dtypes": ml_dtypes})


@pytest.mark.parametrize(
    "array",
    [
        np.array([[1.5, np.nan], [-np.inf, 65504.0]], dtype="float16"),
        np.array([0.1, 3.0e38, -0.0], dtype="float32"),
        np.array([1.0078125, -2.5], dtype=ml_dtypes.bfloat16),
        np.array([[0, 255]], dtype="uint8"),
        np.array(7, dtype="int64"),
        np.array([True, False]),
        np.array([1 + 2j], dtype="complex64"),
    ],
    ids=lambda a: str(a.dtype),
)
def test_an_array_literal_gives_the_exact_array_back(array):
    made = back(array_code(array))
    assert made.dtype == array.dtype and made.shape == array.shape
    np.testing.assert_array_equal(made, array)
    assert made.tobytes() == array.tobytes() or np.isnan(array.astype("float32")).any()


def test_nodes_and_python_values_are_code():
    assert python_code({"k": [1, None, float("inf")], "t": (2,)}) == (
        "{'k': [1, None, float(\"inf\")], 't': (2,)}"
    )
    node = {"list": [{"array": 1}, {"tuple": [{"value": "a"}]}, {"layer": {"class_name": "Dense"}}]}
    assert node_code(node, ["x0", "x1"]) == (
        "[x1, ('a',), keras.layers.deserialize({'class_name': 'Dense'})]"
    )
    with pytest.raises(ValueError, match="not a code node kind"):
        node_code({"pickle": 1}, [])


def result(spec: ProbeSpec, called: KerasCall | None = None, **fields) -> ProbeResult:
    base = {"status": "ok", "output_dtype": "float32", "output_dtypes": ("float32",)}
    return ProbeResult(spec=spec, backend=spec.backend, called=called, **{**base, **fields})


def dense_call(**fields) -> KerasCall:
    sample = np.array([[1, 2]], dtype="uint8")
    array = CodeArray(dtype="uint8", shape=(1, 2), data=InputValue.of_array(sample))
    base = {
        "kind": "layer",
        "name": "keras.layers.Dense",
        "init_kwargs": {"units": {"value": 4}},
        "args": ({"array": 0},),
        "arrays": (array,),
    }
    return KerasCall(**{**base, **fields})


def test_the_dx_call_holds_what_was_asked_and_nothing_filled_in():
    spec = ProbeSpec(
        target="Dense",
        input_dtypes=("uint8",),
        backend="jax",
        kwargs={"units": 4},
        filled=("policy",),
        mode="model",
        precision="highest",
    )
    code = result(spec, dense_call()).as_code()
    ast.parse(code.dx)
    assert "input_dtype='uint8'" in code.dx and "policy=" not in code.dx
    assert "mode='model'" in code.dx and "precision='highest'" in code.dx
    filled = spec.model_copy(update={"filled": ("input_dtypes", "policy"), "mode": "call"})
    bare = result(filled, dense_call()).as_code().dx
    assert "input_dtype" not in bare and "mode=" not in bare
    pair = ProbeSet(
        results=(result(spec, dense_call()), result(spec.model_copy(update={"backend": "torch"})))
    )
    assert "backend=['jax', 'torch']" in pair.as_code().dx


def test_the_users_values_are_written_as_given_and_a_large_one_is_named():
    given = InputValue.of_array(np.array([1, 2], "int8"), given_dtype="int64")
    big = InputValue.of_array(np.zeros((40, 40), "float32"))
    spec = ProbeSpec(
        target="ops.add",
        input_dtypes=("int8", "float32"),
        backend="jax",
        user_values=(given, big),
        shapes=((2,), (40, 40)),
    )
    code = result(spec).as_code()
    ast.parse(code.dx)
    assert "np.array([1, 2], dtype='int64')" in code.dx  # as given: int64, then input_dtype
    assert "input_dtype=['int8', 'float32']" in code.dx
    assert "v1 = np.ones((40, 40), dtype='float32')  # FILL IN: your float32 array" in code.dx
    assert code.fill_in and code.fill_in[0].startswith("v1: your float32 array")


def test_the_raw_script_of_each_mode_and_what_it_cannot_write():
    spec = ProbeSpec(target="Dense", input_dtypes=("uint8",), backend="torch", mode="model")
    script = result(spec, dense_call()).as_code().script
    ast.parse(script)
    assert script.index('os.environ["KERAS_BACKEND"] = "torch"') < script.index("import keras")
    assert "input0 = keras.Input(shape=(2,), batch_size=1, dtype='uint8')" in script
    assert "y = model(x0)" in script and "layer.compute_dtype" in script
    instance = result(spec.model_copy(update={"mode": "call"}), dense_call(instance=True))
    code = instance.as_code()
    assert "`layer` is your Dense instance" in code.script and "raise SystemExit" in code.script
    assert code.fill_in == (
        "target: your Dense instance (the one this answer is about)",
        "layer: your Dense instance",
    )
    config = {"class_name": "Dense", "config": {"units": 2}}  # Keras's own class: made again
    own = result(spec.model_copy(update={"mode": "call"}), dense_call(config=config))
    code = own.as_code()
    assert "layer = keras.saving.deserialize_keras_object({'class_name': 'Dense'" in code.script
    assert code.fill_in == ("target: your Dense instance (the one this answer is about)",)
    flow = KerasCall(kind="op", name="keras.ops.cond", unwritable="ops.cond takes functions")
    op = ProbeSpec(target="ops.cond", backend="jax")
    assert "No raw-Keras script: ops.cond takes functions" in result(op, flow).as_code().script
    stored = result(spec).as_code().script  # an answer cached before calls were recorded
    assert "use_cache=False" in stored and "raise SystemExit" in stored
    keras2 = spec.model_copy(update={"engine": "tf_keras==2.19.0", "backend": "tensorflow"})
    assert "Keras 2" in result(keras2, dense_call()).as_code().script
    refused = result(spec, None, status="invalid", error=ErrorInfo(type="ValueError", message="m"))
    assert "stopped before Keras was called (ValueError" in refused.as_code().script


def test_a_large_sample_stands_in_and_says_so():
    array = CodeArray(dtype="bfloat16", shape=(64, 512), made="the 'default' preset, seed 0")
    call = dense_call(arrays=(array,))
    script = result(ProbeSpec(target="Dense", backend="jax"), call).as_code().script
    assert "import ml_dtypes" in script
    assert (
        "x0 = np.ones((64, 512), dtype=ml_dtypes.bfloat16)  # stands in for the tool's " in script
    )
    assert "32768 values are not written out; the dtypes do not depend on them" in script


def audit(question: AuditQuestion | None, **fields) -> AuditReport:
    layer = LayerCall(
        path="m/dense",
        layer_class="Dense",
        depth=1,
        policy="float32",
        compute_dtype="float32",
        variable_dtype="float32",
    )
    base = {"model": "m", "model_class": "Functional", "backend": "jax", "policy": "float32"}
    return AuditReport(**{**base, **fields}, layers=(layer,), question=question)


def test_an_audit_as_code_rebuilds_from_its_config_or_asks_for_the_saved_model():
    sample = CodeArray(dtype="float32", shape=(1, 2), data=InputValue.of_array(np.ones((1, 2))))
    question = AuditQuestion(
        sample={"array": 0},
        arrays=(sample,),
        sample_given=True,
        config={"class_name": "Functional", "config": {}},
        steps=3,
    )
    code = audit(question, mode="fit").as_code()
    ast.parse(code.dx)
    ast.parse(code.script)
    assert code.fill_in == ("model: your model",)
    assert "dx.check_model(\n    model,\n    sample,\n    mode='fit',\n    steps=3," in code.dx
    assert "config = {'class_name': 'Functional', 'config': {}}" in code.script
    assert "for step in range(1, 3 + 1):" in code.script
    assert "loss='mean_squared_error'" in code.script  # not compiled: the audit's own loss
    saved = audit(question.model_copy(update={"config": None, "model_note": "it holds Mine"}))
    code = saved.as_code()
    assert "MODEL_PATH = 'm.keras'" in code.script and "it holds Mine" in code.script
    assert "MODEL_PATH: m.keras, your saved model" in code.fill_in
    assert "No raw-Keras script" in audit(None).as_code().script  # a Keras 2 audit


def test_each_medium_lays_the_code_out():
    code = CodeCopy(dx="x = dx.probe('<b>')", script="print(1)", fill_in=("MyLayer: yours",))
    html = code_html(code)
    assert "&lt;b&gt;" in html and "<b>" not in html.replace("<b>", "", 0).split("<pre")[1]
    assert "Fill in first:" in html and html.startswith("<details class='dx-code'>")
    assert code_text(code).splitlines()[0] == "# fill in first: MyLayer: yours"
    assert code.clipboard.index(code.dx) < code.clipboard.index(code.script)
    assert CodeCopy.from_dict(code.to_dict()) == code
    spec = ProbeSpec(target="Dense", backend="jax")
    assert "class='dx-code'" in result(spec, dense_call())._repr_html_()
    assert "class='dx-code'" in audit(None)._repr_html_()
