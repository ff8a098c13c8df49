"""The last unclear errors of issue 31's campaign, each named: what was wrong, what was
received, what is valid. Values and probes go through real numpy and jax workers; raw Keras on
those backends runs in their workers as a plain expression (``pool.call(backend, eval, ...)``).
"""

from __future__ import annotations

import pickle

import ml_dtypes
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run._spec import MAX_KWARGS_CHARS
from dtype_explorer.records import ProbeSpec, engine_spec

ANSWER_WITHIN = 240


def raw_dense(backend: str, dtype: str) -> str:
    """The output dtype of bare Keras's ``Dense(4)`` called on a (2, 3) ``dtype`` array of
    ml_dtypes, on ``backend``; or ``raises <Type>``."""
    code = (
        "(lambda k, np, ml: (lambda f: 'raises ' + type(f.exception()).__name__ "
        "if f.exception() else f.result())(__import__('concurrent.futures').futures"
        ".ThreadPoolExecutor(1).submit(lambda: k.backend.standardize_dtype(k.layers.Dense(4)"
        f"(np.ones((2, 3), getattr(ml, {dtype!r}))).dtype))))"
        "(__import__('keras'), __import__('numpy'), __import__('ml_dtypes'))"
    )
    return pool.call(backend, eval, code).result(timeout=ANSWER_WITHIN)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_ml_dtypes_arrays_are_values_and_answer_as_raw_keras(backend, dtype):
    """They were refused as "object arrays"; they are Keras dtypes, carried as their name
    and bytes. (float8 on numpy answered ``invalid: Invalid dtype: unconvertible``: the
    converted step asked ``convert_to_tensor(x)``, which Keras refuses for float8, where
    Keras's ``convert_input`` keeps a NumPy array, a numpy backend tensor, as it is.)"""
    array = np.array([[1.5, -2, 0.25], [3, 4, 5]], dtype=getattr(ml_dtypes, dtype))
    r = dx.probe("Dense", values=array, kwargs={"units": 4}, backend=backend)
    (given,) = r.spec.user_values
    assert (given.dtype, given.shape) == (dtype, (2, 3))
    assert given.value().dtype == array.dtype and given.value().tolist() == array.tolist()
    assert r.spec.input_dtypes == (dtype,)
    expected = raw_dense(backend, dtype)
    assert (r.output_dtype if r.ok else f"raises {r.error.type}") == expected


def test_an_ml_dtypes_array_keras_has_no_dtype_for_is_refused_naming_it():
    array = np.ones(3, dtype=ml_dtypes.float8_e4m3b11fnuz)
    with pytest.raises(InvalidSpecError, match=r"values\[0\]: Keras has no dtype for NumPy's "):
        dx.probe("Dense", values=array, backend="numpy")
    with pytest.raises(InvalidSpecError, match=r"float8_e4m3b11fnuz; give one of .*bfloat16"):
        dx.probe("Dense", values=array, backend="numpy")


def test_pickled_bytes_as_values_are_refused_clearly_never_decoded():
    payload = pickle.dumps(np.ones(3))
    with pytest.raises(InvalidSpecError) as refused:
        dx.probe("Dense", values=payload, backend="numpy")
    message = str(refused.value)
    assert message.startswith("values[0]: bytes are not a value")
    assert f"bytes of {len(payload)} bytes" in message and "give an array" in message
    with pytest.raises(InvalidSpecError, match=r"values\[0\]: a NumPy \|S1 array of bytes"):
        dx.probe("Dense", values=np.array([b"\x80"]), backend="numpy")


@pytest.mark.parametrize("empty", [{}, [{}], ({},)])
def test_values_holding_nothing_name_values(empty):
    with pytest.raises(InvalidSpecError, match=r"^values: holds no array or number; received: "):
        dx.probe("Dense", values=empty, backend="numpy")


def test_an_engine_version_with_a_leading_zero_is_the_release_pip_installs():
    """``keras==3.11.03`` was installed by pip (as 3.11.3), then refused by name."""
    assert engine_spec("keras==3.11.03") == "keras==3.11.3"
    assert engine_spec("tf_keras==2.021.0") == "tf_keras==2.21.0"
    assert ProbeSpec(target="Dense", engine="3.11.03").engine == "keras==3.11.3"
    with pytest.raises(InvalidSpecError, match=r"engine must be None .* received: 'keras==3.1x'"):
        engine_spec("keras==3.1x")


def test_a_huge_call_kwargs_or_kwargs_string_is_refused_not_stored():
    huge = "a" * 10_000_000
    with pytest.raises(InvalidSpecError) as refused:
        dx.probe("Dropout", call_kwargs={"training": huge}, backend="numpy")
    assert str(refused.value).startswith(
        f"call_kwargs hold more than {MAX_KWARGS_CHARS} characters of text in all"
    )
    with pytest.raises(InvalidSpecError, match=r"^kwargs hold more than \d+ characters"):
        dx.probe("Dense", kwargs={"units": 2, "name": huge}, backend="numpy")
    with pytest.raises(InvalidSpecError, match="call_kwargs hold more than"):
        dx.probe("Dropout", call_kwargs={huge: True}, backend="numpy")  # a key counts too
    fine = dx.probe("Dropout", call_kwargs={"training": True}, backend="numpy")
    assert fine.ok


def test_the_widget_refuses_a_bad_timeout_input_dtype_and_takes_one_backend_as_a_string():
    with pytest.raises(InvalidSpecError, match=r"^timeout must be a number of seconds .*-1"):
        dx.DtypeExplorer("Dense", timeout=-1, backends=["numpy"])
    with pytest.raises(InvalidSpecError, match=r"timeout must be .* Received: 'abc'"):
        dx.DtypeExplorer("Dense", timeout="abc", backends=["numpy"])
    with pytest.raises(InvalidSpecError, match=r"^input_dtype must be a dtype name .*: 5 of type"):
        dx.DtypeExplorer("Dense", input_dtype=5, backends=["numpy"])
    with pytest.raises(InvalidSpecError, match="backends must be a name or a list of names"):
        dx.DtypeExplorer("Dense", backends=5)
    widget = dx.DtypeExplorer("Dense", backends="numpy", timeout=30)
    assert widget.request["backends"] == ["numpy"]
