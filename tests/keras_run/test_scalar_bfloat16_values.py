"""A 0-d bfloat16 output on tensorflow (a reduction, a loss, a metric's result): Keras's own
``convert_to_numpy`` raises on one ("object __array__ method not producing an array"), and the
probe used to answer with no numerics and the words "no output values (the call raised)" for a
call that had not raised. Its values are now read through the tensor's own buffer: the probe's
output value must equal raw Keras's, run beside it on tensorflow (read there through a
1-element reshape, which Keras converts). ``dx.trace`` of user code returning one raised
ValueError out of the tool: it now describes it with its value. So did ``check_model(...,
mode="save")`` of a model returning one; and such a tensor given as a probe's value was refused
as "not an array of numbers"."""

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


RAW_SQRT = """
import json, keras
x = keras.ops.convert_to_tensor(2.0, "bfloat16")
out = keras.ops.sqrt(x)
flat = keras.ops.convert_to_numpy(keras.ops.reshape(out, (1,)))
print(json.dumps({"dtype": keras.backend.standardize_dtype(out.dtype),
                  "value": float(flat.astype("float64")[0])}))
"""


def test_a_scalar_bfloat16_tensor_given_as_a_value_is_taken_as_raw_keras_takes_it():
    """A 0-d bfloat16 TensorFlow tensor given as a probe's value was refused as "not an array
    of numbers" (NumPy's reading of it raises); raw Keras takes it."""
    import tensorflow as tf

    want = json_on("tensorflow", RAW_SQRT)
    x = tf.constant(2.0, tf.bfloat16)
    with pytest.raises(ValueError):
        np.asarray(x)  # what the tool used to read it with
    r = dx.probe("ops.sqrt", values=[x], backend="tensorflow", use_cache=False)
    assert r.status == "ok", r.error
    assert r.spec.input_dtypes == ("bfloat16",) and r.output_dtype == want["dtype"] == "bfloat16"
    (out,) = r.numerics.outputs
    assert list(out.head) == [want["value"]]


def scalar_model_saved():
    """In a tensorflow worker: ``check_model(..., mode="save")`` of a bfloat16 model that returns
    a 0-d mean, each format's trip; and raw Keras's own trips of the same model (a SavedModel
    read back through ``TFSMLayer``, a ``.keras`` file loaded): the loaded output's dtype, or
    the error Keras raised."""
    import os
    import tempfile

    @keras.saving.register_keras_serializable("dx_test_scalar")  # in the worker, where it runs
    class Mean(keras.layers.Layer):
        """A 0-d mean (a bfloat16 one under a bfloat16 policy)."""

        def call(self, x):
            return keras.ops.mean(x)

    inputs = keras.Input((4,))
    model = keras.Model(inputs, Mean(dtype="bfloat16")(keras.layers.Dense(3)(inputs)))
    x = np.linspace(-1, 1, 8, dtype="float32").reshape(2, 4)
    trips = {t.format: t for t in dx.check_model(model, x, mode="save").roundtrip.trips}
    raw = {}
    folder = tempfile.mkdtemp()
    try:
        model.export(os.path.join(folder, "sm"), format="tf_saved_model", verbose=False)
        out = keras.layers.TFSMLayer(os.path.join(folder, "sm"), call_endpoint="serve")(x)
        raw["SavedModel"] = keras.backend.standardize_dtype(out.dtype)
    except Exception as error:
        raw["SavedModel"] = type(error).__name__
    model.save(os.path.join(folder, "m.keras"))
    out = keras.saving.load_model(os.path.join(folder, "m.keras"), compile=False)(x)
    raw[".keras"] = keras.backend.standardize_dtype(out.dtype)
    return {
        name: {
            "outcome": t.outcome,
            "error": None if t.error is None else f"{t.error.type}: {t.error.message}",
            "loaded": list(t.loaded_output_dtypes),
        }
        for name, t in trips.items()
    }, raw


def test_a_model_returning_a_scalar_bfloat16_round_trips_as_raw_keras_reads_it():
    """Keras's conversion of the model's 0-d bfloat16 output raised ValueError out of
    ``check_model`` (the user's model was fine), and the SavedModel trip, which read the loaded
    model's outputs inside the step it reports for Keras, would have said "call raised
    ValueError" of a call that had run. Each trip now compares, with the output dtype raw
    Keras's own trip gives."""
    trips, raw = dx.pool.call("tensorflow", scalar_model_saved).result(timeout=600)
    for name in ("SavedModel", ".keras"):
        assert trips[name]["outcome"] == "compared", trips[name]
        assert trips[name]["loaded"] == [raw[name]] == ["bfloat16"], (trips[name], raw)
