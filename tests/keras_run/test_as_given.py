"""Issue 22 items 2-4: the user's values, op arguments, y_true/y_pred reach Keras as given, and
the answer is raw Keras's. Probes run through the pool's real workers (jax, torch, numpy,
tensorflow); raw Keras runs in a plain subprocess per backend (``KERAS_BACKEND=...``, nothing
of dtype_explorer imported), each case an expression of ``k`` (keras) and ``np``."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from swept import SWEPT

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError

ALL = list(SWEPT)

#: Each case: (floatx, expression). The expression's value is what the probe must answer.
DTYPE = "(lambda out: k.backend.standardize_dtype(out.dtype))"
SHAPE_AND_DTYPE = "(lambda out: [list(out.shape), k.backend.standardize_dtype(out.dtype)])"
I32 = "np.array([1, 2], 'int32')"
MEAN_IOU = "k.metrics.MeanIoU(num_classes=2)"
CASES = {
    "convert int32 array": ("bfloat16", f"{DTYPE}(k.ops.convert_to_tensor({I32}))"),
    "add int32 arrays": ("bfloat16", f"{DTYPE}(k.ops.add({I32}, np.array([3, 4], 'int32')))"),
    "abs int32 array": ("bfloat16", f"{DTYPE}(k.ops.abs(np.array([1, -2], 'int32')))"),
    "exp int32 array": ("bfloat16", f"{DTYPE}(k.ops.exp({I32}))"),
    "add lists": ("float32", f"{DTYPE}(k.ops.add([1, 2], [3, 4]))"),
    "add float lists": ("bfloat16", f"{DTYPE}(k.ops.add([1.5, 2.0], [3.0, 4.0]))"),
    "eye N=4": ("float32", f"{SHAPE_AND_DTYPE}(k.ops.eye(4))"),
    "one_hot num_classes=5": (
        "float32",
        f"{SHAPE_AND_DTYPE}(k.ops.one_hot(np.array([0, 2, 1, 1], 'int32'), num_classes=5))",
    ),
    "repeat repeats=3": (
        "float32",
        f"{SHAPE_AND_DTYPE}(k.ops.repeat(np.ones((2, 3), 'float32'), repeats=3))",
    ),
    "MeanIoU state": (
        "float32",
        f"k.backend.standardize_dtype({MEAN_IOU}.variables[0].dtype)",
    ),
    "MeanIoU result": (
        "float32",
        "(lambda m: (m.update_state(np.array([0, 1, 1]), np.array([0, 1, 0])), "
        f"k.backend.standardize_dtype(m.result().dtype), float(m.result()))[1:])({MEAN_IOU})",
    ),
    "MSE weighted": (
        "float32",
        "(lambda out: [k.backend.standardize_dtype(out.dtype), float(out)])("
        "k.losses.MeanSquaredError()(np.array([1.0, 2.0]), np.array([1.5, 2.5]), "
        "sample_weight=np.array([1.0, 0.5])))",
    ),
    "MSE list y_pred": (
        "float32",
        f"{DTYPE}(k.losses.MeanSquaredError()(np.array([1.0, 2.0]), [1.5, 2.5]))",
    ),
}

RAW = """
import json, sys, warnings
import numpy as np, keras as k
out = {}
for name, (floatx, expression) in json.loads(sys.argv[1]).items():
    k.config.set_floatx(floatx)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out[name] = eval(expression)
    except Exception as error:
        out[name] = "raises " + type(error).__name__
    finally:
        k.config.set_floatx("float32")
print(json.dumps(out))
"""


@functools.cache
def raw(backend: str) -> dict:
    """Every case's answer by bare Keras on ``backend``, in a subprocess of its own."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-c", RAW, json.dumps(CASES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def answer(r) -> str:
    return r.output_dtype if r.ok else f"raises {r.error.type}"


def steps(r, stage):
    return [(s.index, s.dtype) for s in r.cast_path if s.stage == stage]


# ------------------------------------------------------------ 2. values as given


@pytest.mark.parametrize("backend", ALL)
def test_convert_to_tensor_of_a_numpy_array_answers_as_raw_keras(backend):
    """Old code: int32 on jax (the array went through convert_to_tensor(x, dtype='int32')
    before the op); raw Keras answers float32 there (jax's conversion under floatx
    bfloat16)."""
    r = dx.probe(
        "ops.convert_to_tensor",
        values=[np.array([1, 2], "int32")],
        floatx="bfloat16",
        backend=backend,
    )
    assert answer(r) == raw(backend)["convert int32 array"]
    assert steps(r, "converted")[0][1] == r.output_dtype  # the op's own conversion shown


@pytest.mark.parametrize("backend", ALL)
@pytest.mark.parametrize(
    "op, values, case",
    [
        ("ops.add", [np.array([1, 2], "int32"), np.array([3, 4], "int32")], "add int32 arrays"),
        ("ops.abs", [np.array([1, -2], "int32")], "abs int32 array"),
        ("ops.exp", [np.array([1, 2], "int32")], "exp int32 array"),
    ],
)
def test_ops_on_numpy_ints_answer_as_raw_keras(backend, op, values, case):
    """Old code: int32 for add/abs (and exp of an int32 tensor) on jax under floatx bfloat16,
    where raw Keras converts the NumPy arrays to float32 first."""
    r = dx.probe(op, values=values, floatx="bfloat16", backend=backend)
    assert answer(r) == raw(backend)[case]


@pytest.mark.parametrize("backend", ALL)
@pytest.mark.parametrize(
    "values, floatx, case",
    [
        ([[1, 2], [3, 4]], None, "add lists"),
        ([[1.5, 2.0], [3.0, 4.0]], "bfloat16", "add float lists"),
    ],
)
def test_lists_reach_the_op_as_lists(backend, values, floatx, case):
    """Old code: the lists became NumPy int64/float64 arrays and then int64/float64 tensors
    (int64 on numpy, torch and tensorflow); raw Keras converts a list itself (int32; under
    floatx bfloat16, its float lists per backend)."""
    r = dx.probe("ops.add", values=values, floatx=floatx, backend=backend)
    assert answer(r) == raw(backend)[case]
    assert all(v.kind == "list" for v in r.spec.user_values)
    assert "a Python list" in r.cast_path[0].note


def test_a_conversion_input_dtype_asks_is_a_stage_of_its_own():
    """Old code: the input step showed the asked dtype, as if it were the user's own."""
    r = dx.probe("ops.add", "int16", values=[np.array([1, 2]), np.array([3, 4])], backend="numpy")
    assert steps(r, "input") == [(0, "int64"), (1, "int64")]
    assert steps(r, "asked") == [(0, "int16"), (1, "int16")]
    assert [s.stage for s in r.cast_path if s.index == 0][:3] == ["input", "asked", "converted"]
    assert r.output_dtype == "int16"


@pytest.mark.parametrize(
    "value, dtype, became",
    [(2909, "bfloat16", "2912.0"), (2049, "float16", "2048.0"), (0.1, "float32", "0.10000000149")],
)
def test_a_value_the_asked_dtype_rounds_is_refused_naming_the_element(value, dtype, became):
    """Old code: accepted, rounded silently (2909 as bfloat16 probed as 2912)."""
    with pytest.raises(InvalidSpecError, match=rf"element \[1\] = {value} .* becomes {became}"):
        dx.probe("ops.abs", dtype, values=[[1, value]], backend="numpy")


# ------------------------------------------------------ 3. every input of an op


@pytest.mark.parametrize("backend", ALL)
@pytest.mark.parametrize(
    "op, input_dtype, kwargs, case",
    [
        ("ops.eye", None, {"N": 4}, "eye N=4"),
        ("ops.one_hot", "int32", {"num_classes": 5}, "one_hot num_classes=5"),
        ("ops.repeat", None, {"repeats": 3}, "repeat repeats=3"),
    ],
)
def test_a_user_keyword_replaces_the_catalogs_default(backend, op, input_dtype, kwargs, case):
    """Old code: "eye() got multiple values for argument 'N'" (and for num_classes, repeats),
    shown as Keras's error."""
    r = dx.probe(op, input_dtype, kwargs=kwargs, backend=backend)
    shape, dtype = raw(backend)[case]
    assert r.ok, r.error
    assert [list(r.numerics.outputs[0].shape), r.output_dtype] == [shape, dtype]


def test_a_keyword_naming_a_probed_input_is_the_specs_error_naming_it():
    """Old code: ops.add(x1, x2, x1=...) raised TypeError, shown as Keras's (where="call")."""
    r = dx.probe("ops.add", kwargs={"x1": [1, 2]}, backend="numpy")
    assert r.status == "invalid" and r.error.where == "spec"
    assert "'x1' is a probed input of ops.add" in r.error.message


# ------------------------------------------------ 4. losses and metrics, as given


@pytest.mark.parametrize("backend", ["numpy", "tensorflow", "jax"])
def test_a_metric_is_built_with_its_own_default_dtype(backend):
    """Old code: MeanIoU(dtype='float32'): a float32 confusion matrix, where Keras's default
    is int32 (int64 on tensorflow)."""
    r = dx.probe("metrics.MeanIoU", kwargs={"num_classes": 2}, backend=backend)
    state = {s.dtype for s in r.cast_path if s.stage == "variables"}
    assert state == {raw(backend)["MeanIoU state"]}
    assert "own default dtype" in r.basis[-1]


def test_a_metric_takes_dtype_none_as_given():
    """Old code: refused (dtype passed twice: kwargs and the policy)."""
    r = dx.probe("metrics.MeanIoU", kwargs={"num_classes": 2, "dtype": None}, backend="numpy")
    assert r.ok and {s.dtype for s in r.cast_path if s.stage == "variables"} == {"int32"}


@pytest.mark.parametrize("backend", ["numpy", "tensorflow"])
def test_a_metric_takes_the_users_y_true_and_y_pred(backend):
    """Old code: "values: metrics.MeanIoU takes y_true and y_pred from presets"."""
    r = dx.probe(
        "metrics.MeanIoU", kwargs={"num_classes": 2}, values=[[0, 1, 1], [0, 1, 0]], backend=backend
    )
    dtype, value = raw(backend)["MeanIoU result"]
    assert r.output_dtype == dtype and r.numerics.outputs[0].head[0] == pytest.approx(value)


@pytest.mark.parametrize("backend", ALL)
def test_a_loss_takes_values_and_sample_weight(backend):
    """Old code: values refused for losses; call_kwargs refused for losses and metrics."""
    r = dx.probe(
        "losses.MeanSquaredError",
        values=[np.array([1.0, 2.0]), np.array([1.5, 2.5])],
        call_kwargs={"sample_weight": [1.0, 0.5]},
        backend=backend,
    )
    dtype, value = raw(backend)["MSE weighted"]
    assert r.output_dtype == dtype and r.numerics.outputs[0].head[0] == pytest.approx(value)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_list_y_pred_reaches_the_loss_as_a_list(backend):
    """Old code: refused; a list made an array would have hidden Keras's own answer."""
    r = dx.probe(
        "losses.MeanSquaredError", values=[np.array([1.0, 2.0]), [1.5, 2.5]], backend=backend
    )
    assert answer(r) == raw(backend)["MSE list y_pred"]


def test_a_loss_in_float16_on_big_integer_labels_gets_numerics():
    """Old code: no numerics for losses and metrics at all (r.numerics None)."""
    r = dx.probe(
        "losses.MeanSquaredError",
        policy="float16",
        values=[np.array([3001, 5], "int32"), np.array([3000.0, 5.0])],
        backend="numpy",
    )
    assert r.ok and r.numerics is not None and r.numerics.reference_dtype is not None
    assert r.numerics.max_rel_error is not None and r.numerics.max_rel_error > 0


# ---------------------------------------------------------- the list convention


class Pair(keras.layers.Layer):
    """A user's layer whose call takes one list, as Keras's merging layers do."""

    def call(self, inputs):
        a, b = inputs
        return a * keras.ops.cast(b, a.dtype)


def test_a_layer_whose_call_takes_one_input_gets_several_as_a_list():
    """Old code: Pair()(a, b): "too many positional arguments"."""
    r = dx.probe(Pair, ["float16", "int32"])
    raw_out = Pair()([np.ones((2, 4), "float16"), np.ones((2, 4), "int32")])
    assert r.ok, r.error
    assert r.output_dtype == keras.backend.standardize_dtype(raw_out.dtype)
