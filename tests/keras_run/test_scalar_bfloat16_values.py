"""A 0-d bfloat16 output on tensorflow (a reduction, a loss, a metric's result): Keras's own
``convert_to_numpy`` raises on one ("object __array__ method not producing an array"), and the
probe used to answer with no numerics and the words "no output values (the call raised)" for a
call that had not raised. Its values are now read through the tensor's own buffer: the probe's
output value must equal raw Keras's, run beside it on tensorflow (read there through a
1-element reshape, which Keras converts). ``dx.trace`` of user code returning one raised
ValueError out of the tool: it now describes it with its value."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import dtype_explorer as dx
from tests.on_backend import json_on

RAW = """
import json, keras, numpy as np
x = np.array([[1.5, -2.25, 0.375], [3.0, 0.125, -0.5]], "float32")
cases = {
    "ops.sum": keras.ops.sum(keras.ops.cast(x, "bfloat16")),
    "ops.mean": keras.ops.mean(keras.ops.cast(x, "bfloat16")),
    "losses.MeanSquaredError": keras.losses.MeanSquaredError(dtype="bfloat16")(
        keras.ops.cast(x, "bfloat16"), keras.ops.cast(x[::-1], "bfloat16")),
}
out = {}
for name, value in cases.items():
    try:
        keras.ops.convert_to_numpy(value)
        raises = False
    except ValueError:
        raises = True
    flat = keras.ops.convert_to_numpy(keras.ops.reshape(value, (1,)))
    out[name] = {"dtype": keras.backend.standardize_dtype(value.dtype),
                 "value": float(flat.astype("float64")[0]), "keras_raises": raises}
print(json.dumps(out))
"""

X = [[1.5, -2.25, 0.375], [3.0, 0.125, -0.5]]


@pytest.fixture(scope="module")
def raw():
    return json_on("tensorflow", RAW)


@pytest.mark.parametrize("target", ["ops.sum", "ops.mean", "losses.MeanSquaredError"])
def test_a_scalar_bfloat16_output_has_its_value_as_raw_keras_gives_it(raw, target):
    want = raw[target]
    assert want["dtype"] == "bfloat16"
    assert want["keras_raises"], "Keras converts 0-d bfloat16 now: the note above is stale"
    x = np.asarray(X, "float32")
    if target.startswith("losses."):
        values = [x.astype("float32"), x[::-1].astype("float32")]
        r = dx.probe(target, values=values, kwargs={"dtype": "bfloat16"},
                     backend="tensorflow", use_cache=False)  # fmt: skip
    else:
        r = dx.probe(target, "bfloat16", values=[x], backend="tensorflow", use_cache=False)
    assert r.status == "ok", r.error
    assert r.output_dtype == "bfloat16"
    (out,) = r.numerics.outputs
    assert out.shape == () and list(out.head) == [want["value"]]
    assert r.numerics.output_count == 1
    assert "the call raised" not in str(r) and "dtype-explorer failed" not in str(r)


def total(x):  # the user's own code: a bfloat16 sum, returned as a 0-d tensor
    return keras.ops.sum(keras.ops.cast(x, "bfloat16") * 2)


def total_raw(x):
    """What raw Keras returns there, read through a 1-element reshape."""
    out = total(x)
    flat = keras.ops.convert_to_numpy(keras.ops.reshape(out, (1,)))
    return keras.backend.standardize_dtype(out.dtype), float(flat.astype("float64")[0])


def test_user_code_returning_a_scalar_bfloat16_is_traced_with_its_value():
    """``dx.trace`` of user code that returns a 0-d bfloat16 tensor on tensorflow described
    what it returned through Keras's conversion, and raised ValueError out of dx.trace."""
    x = np.array([1.5, 2.25, 3.0], "float32")
    dtype, value = dx.pool.call("tensorflow", total_raw, x).result(timeout=600)
    r = dx.trace(backend="tensorflow")(total, x)
    (returned,) = r.returned
    assert (returned.dtype, returned.shape) == (dtype, ()) == ("bfloat16", ())
    assert returned.sample == (value,) and returned.digest is not None


def conversions():
    """``numpy_values`` beside Keras's own conversion in this worker's backend: per dtype and
    shape, whether dtype, shape and values agree, and whether the array is read-only."""
    from dtype_explorer.keras_run import numpy_values

    found = []
    for dtype in ["float16", "bfloat16", "float32", "int32", "uint8", "bool"]:
        for shape in [(2, 3), ()]:
            size = max(int(np.prod(shape)), 1)
            x = keras.ops.cast(keras.ops.reshape(keras.ops.arange(size), shape), dtype)
            got = numpy_values(x)
            flat = keras.ops.convert_to_numpy(keras.ops.reshape(x, (-1,)))
            want = np.asarray(flat).reshape(shape)
            same = got.dtype == want.dtype and got.shape == want.shape and bool((got == want).all())
            found.append([dtype, list(shape), same, bool(got.flags.writeable)])
    return found


@pytest.mark.parametrize("backend", ["jax", "torch", "numpy", "tensorflow"])
def test_numpy_values_agree_with_keras_in_each_backend(backend):
    """Lent (read-only) on jax and tensorflow, Keras's own copy elsewhere: the same dtype,
    shape and values as Keras's conversion, in a real worker of each backend."""
    found = dx.pool.call(backend, conversions).result(timeout=600)
    assert [row for row in found if not row[2]] == []
    lent = backend in ("jax", "tensorflow")
    assert {row[3] for row in found} == {not lent}
