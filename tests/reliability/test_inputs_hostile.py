"""Careless and hostile arguments to the front door (``dx.probe``): each is refused with an
``InvalidSpecError`` that names the parameter, says what was received (cut short) and what is
valid; dtype-likes people naturally pass are read the way Keras reads them; nothing a spec
carries is ever evaluated, whatever this session's safe-mode setting. After each, the process
still answers a plain probe."""

from __future__ import annotations

import base64
import marshal

import keras
import ml_dtypes
import numpy as np
import pytest
from keras.src.saving import serialization_lib

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError

HUGE = "x" * 10_000_000


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


#: (arguments to dx.probe, the parameter the message must name, a phrase it must hold).
REFUSED = [
    ({"target": 5}, "target", "received: 5"),
    ({"target": HUGE}, "target", "(10000000 characters)"),
    ({"target": "Lambda"}, "target", "cannot be probed standalone"),
    ({"input_dtype": 5}, "input_dtype", "received: 5"),
    ({"input_dtype": []}, "input_dtype", "empty list"),
    ({"input_dtype": ["float32"] * 10_000}, "input_dtype", "10000 dtypes"),
    ({"input_dtype": HUGE}, "input_dtype", "(10000000 characters)"),
    ({"input_dtype": "FLOAT32"}, "input_dtype", "did you mean 'float32'"),
    ({"input_dtype": int}, "input_dtype", "'python_int'"),
    ({"input_dtype": float}, "input_dtype", "'python_float'"),
    ({"input_dtype": object()}, "input_dtype", "received: <object"),
    ({"input_dtype": np.dtype("U5")}, "input_dtype", "unknown dtype"),
    ({"input_dtype": ("float32", "int8")}, "input_dtype", "gets 1 input(s) but 2"),
    ({"shape": 5}, "shape", "received: 5"),
    ({"shape": "2;4"}, "shape", "received: '2;4'"),
    ({"shape": [(2, 4)] * 10_000}, "shape", "10000 items"),
    ({"shape": [(2, 4)] * 3}, "shape", "takes 1 input(s) but 3 shapes"),
    ({"shape": (2, -4)}, "shape", "positive ints"),
    ({"shape": (2, True)}, "shape", "positive ints"),
    ({"shape": (2, 4.5)}, "shape", "positive ints"),
    ({"shape": (2,) * 9}, "shape", "1 to 8"),
    ({"shape": (1 << 20, 1 << 20)}, "shape", "the limit is"),
    ({"shape": [[2, [4]]]}, "shape", "positive ints"),
    ({"backend": []}, "backend", "at least one backend"),
    ({"backend": 5}, "backend", "received: int"),
    ({"backend": [5]}, "backend", "unknown backend 5"),
    ({"backend": HUGE}, "backend", "(10000000 characters)"),
    ({"backend": "jaxx"}, "backend", "did you mean 'jax'"),
    ({"kwargs": 5}, "kwargs", "received: 5"),
    ({"kwargs": {"units": _deep(100_000)}}, "kwargs", "deeper than 32 levels"),
    ({"kwargs": {"units": list(range(100_000))}}, "kwargs", "more than 10000 values"),
    ({"kwargs": {"units": object()}}, "kwargs", "JSON values"),
    ({"kwargs": {"units": float("nan")}}, "kwargs", "JSON values"),
    ({"policy": 5}, "policy", "received: 5"),
    ({"policy": HUGE}, "policy", "(10000000 characters)"),
    ({"values": ["default"]}, "values", "a value preset is named by values='default'"),
    ({"values": [object()]}, "values", "object arrays, functions and other Python objects"),
    ({"floatx": 5}, "floatx", "unknown floatx 5"),
    ({"seed": "0"}, "seed", "received: '0'"),
    ({"seed": -1}, "seed", "received: -1"),
]


@pytest.mark.parametrize(("changes", "parameter", "phrase"), REFUSED)
@pytest.mark.parametrize("backend", [None, "numpy"])
def test_bad_arguments_are_refused_naming_the_parameter(changes, parameter, phrase, backend):
    arguments = {"target": "Dense", "kwargs": {"units": 2}, "backend": backend, **changes}
    with pytest.raises(InvalidSpecError) as caught:
        dx.probe(**arguments)
    message = str(caught.value)
    assert parameter in message and phrase in message, message
    assert len(message) < 1_000  # a 10 MB input is not echoed back


@pytest.mark.parametrize(
    ("dtype_like", "name"),
    [
        (np.float32, "float32"),
        (np.dtype("float16"), "float16"),
        (np.dtype("uint8"), "uint8"),
        (ml_dtypes.bfloat16, "bfloat16"),
        (np.dtype(ml_dtypes.bfloat16), "bfloat16"),
        ("python_float", "python_float"),
    ],
)
def test_dtype_likes_are_read_as_keras_reads_them(dtype_like, name):
    if name != "python_float":
        assert keras.backend.standardize_dtype(dtype_like) == name  # Keras agrees
    spec_input = dx.probe("ops.add", input_dtype=(dtype_like, "float32"), backend=None)
    assert spec_input.spec.input_dtypes == (name, "float32")
    assert spec_input.status == "ok"


def test_framework_dtypes_are_read_by_name():
    import jax.numpy as jnp
    import torch

    for dtype_like in (jnp.float16, jnp.dtype("float16"), torch.float16):
        assert keras.backend.standardize_dtype(dtype_like) == "float16"
        result = dx.probe("Dense", input_dtype=dtype_like, kwargs={"units": 2})
        assert result.spec.input_dtypes == ("float16",)


def test_more_shapes_are_accepted_for_a_list_input_target():
    result = dx.probe("ops.concatenate", shape=[(2, 3)] * 3)
    assert result.status == "ok" and len(result.spec.shapes) == 3
    with pytest.raises(InvalidSpecError, match="at most 16 inputs"):
        dx.probe("ops.concatenate", shape=[(2, 3)] * 17)


# ------------------------------------------------------------------ nothing is evaluated


def _lambda_config(marker: str) -> dict:
    """A Lambda layer's config whose function, if deserialized and called, creates ``marker``."""
    function = eval(f"lambda x: (__import__('pathlib').Path({marker!r}).touch(), x)[1]")
    return keras.saving.serialize_keras_object(keras.layers.Lambda(function))


def _lambda_activation(marker: str) -> dict:
    """A ``__lambda__`` function config (what Keras writes for a Python lambda)."""
    function = eval(f"lambda x: (__import__('pathlib').Path({marker!r}).touch(), x)[1]")
    code = base64.b64encode(marshal.dumps(function.__code__)).decode("ascii")
    return {
        "module": "builtins",
        "class_name": "__lambda__",
        "config": {"code": code, "defaults": None, "closure": None},
        "registered_name": "function",
    }


@pytest.fixture
def unsafe_session():
    """This session turned Keras's safe mode off, as a user layer did in the campaign."""
    before = serialization_lib.in_safe_mode()
    keras.config.enable_unsafe_deserialization()
    yield
    serialization_lib.global_state.set_global_attribute("safe_mode_saving", before)


@pytest.mark.parametrize(
    ("target", "kwargs"),
    [
        ("TimeDistributed", lambda m: {"layer": _lambda_config(m)}),
        ("Bidirectional", lambda m: {"layer": _lambda_config(m)}),
        ("Dense", lambda m: {"units": 2, "activation": _lambda_activation(m)}),
        ("Dense", lambda m: {"units": 2, "kernel_initializer": _lambda_activation(m)}),
    ],
)
def test_a_spec_never_deserializes_code_even_in_an_unsafe_session(
    unsafe_session, tmp_path, target, kwargs
):
    marker = tmp_path / "evaluated"
    assert serialization_lib.in_safe_mode() is False
    result = dx.probe(target, kwargs=kwargs(str(marker)), use_cache=False)
    assert result.status == "invalid"
    assert result.error is not None
    assert "arbitrary code execution" in result.error.message or "lambda" in result.error.message
    assert not marker.exists()  # nothing was evaluated
    assert serialization_lib.in_safe_mode() is False  # the session's setting is unchanged
    assert dx.probe("Dense", kwargs={"units": 2}).status == "ok"  # and the process works


def test_the_lambda_payload_is_real(unsafe_session, tmp_path):
    """The payload above does run code when Keras deserializes it unsafely (what the guard
    prevents): calling the deserialized layer creates the marker."""
    marker = tmp_path / "evaluated"
    layer = keras.saving.deserialize_keras_object(_lambda_config(str(marker)))
    layer(np.ones((2, 3), dtype="float32"))
    assert marker.exists()


# ------------------------------------------------------------- the other analyses' lists

LIST_REFUSED = [
    ("survey", {"targets": 5}, "targets must be a name or a list"),
    ("survey", {"targets": [["Dense"]]}, "unknown target"),
    ("survey", {"targets": []}, "targets is an empty list"),
    ("survey", {"targets": ["Dense"], "input_dtypes": 5}, "input_dtypes must be a name"),
    ("survey", {"targets": ["Dense"], "input_dtypes": [HUGE]}, "(10000000 characters)"),
    ("survey", {"targets": ["Dense"], "policies": 5}, "policies must be a name"),
    ("survey", {"targets": ["Dense"], "backends": []}, "at least one backend"),
    ("promotion_table", {"op": 5}, "op must be an op name"),
    ("promotion_table", {"dtypes": 5}, "dtypes must be a name"),
    ("promotion_table", {"dtypes": ["int8", 5]}, "dtypes must be a dtype name"),
    ("promotion_table", {"dtypes": ["int8"] * 20_000}, "the limit is"),
    ("promotion_table", {"backends": []}, "at least one backend"),
]


@pytest.mark.parametrize(("analysis", "arguments", "phrase"), LIST_REFUSED)
def test_survey_and_table_arguments_are_refused_before_any_work(analysis, arguments, phrase):
    with pytest.raises(InvalidSpecError) as caught:
        getattr(dx, analysis)(**arguments)
    assert phrase in str(caught.value) and len(str(caught.value)) < 1_000


def test_survey_and_table_read_dtype_likes():
    table = dx.promotion_table(
        "add", dtypes=[np.int8, np.dtype("uint8")], backends="numpy", references=()
    )
    assert table.cell("int8", "uint8").results["numpy"].documented_dtype == "int16"
