"""The user's own question (issue 14): their values, their structures, their call arguments,
and every kind of output, on every backend through real worker processes, against raw Keras.

Raw Keras on another backend runs in that backend's worker as a plain expression
(``pool.call(backend, eval, ...)``): nothing of dtype_explorer is in it.
"""

import json

import keras
import numpy as np
import pytest
from swept import SWEPT

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import InputValue, ProbeResult, ProbeSpec
from dtype_explorer.runtime import cache

ALL = list(SWEPT)


def raw(backend: str, expression: str):
    """``expression`` evaluated by bare Keras on ``backend`` (``k`` is keras, ``np`` numpy),
    or ``"raises <Type>"`` (the expression runs in a thread whose future keeps its error)."""
    run = f"(lambda k, np: {expression})(__import__('keras'), __import__('numpy'))"
    code = (
        "(lambda f: 'raises ' + type(f.exception()).__name__ if f.exception() else f.result())"
        f"(__import__('concurrent.futures').futures.ThreadPoolExecutor(1).submit(lambda: {run}))"
    )
    if backend == keras.backend.backend():
        return eval(code)
    return pool.call(backend, eval, code).result(timeout=120)


def steps(result, stage):
    return [(s.index, s.name, s.dtype) for s in result.cast_path if s.stage == stage]


# ------------------------------------------------------------------ their values


POWER = (
    "(lambda out: k.backend.standardize_dtype(out.dtype))(k.ops.power("
    "k.ops.convert_to_tensor([2, 3], 'int32'), k.ops.convert_to_tensor([-1, -2], 'int32')))"
)


@pytest.mark.parametrize("backend", ALL)
def test_ops_power_on_the_users_negative_integer_exponents_answers_as_raw_keras(backend):
    r = dx.probe("ops.power", ["int32", "int32"], values=[[2, 3], [-1, -2]], backend=backend)
    assert r.outcome == raw(backend, POWER)  # int32, or TensorFlow's InvalidArgumentError
    assert [v.value().tolist() for v in r.spec.user_values] == [[2, 3], [-1, -2]]
    assert steps(r, "input") == [(0, None, "int64"), (1, None, "int64")]  # the lists, read
    assert steps(r, "asked") == [(0, None, "int32"), (1, None, "int32")]  # as input_dtype asks


def test_python_numbers_are_passed_as_python_numbers_not_arrays():
    r = dx.probe("ops.add", values=[np.array([1, 2], dtype="int8"), 3])
    assert r.spec.input_dtypes == ("int8", "python_int")
    assert r.spec.user_values[1].value() == 3 and type(r.spec.user_values[1].value()) is int
    assert r.output_dtype == keras.backend.standardize_dtype(
        keras.ops.add(keras.ops.convert_to_tensor(np.array([1, 2], "int8")), 3).dtype
    )
    asked = dx.probe("ops.add", ["int8", "int8"], values=[np.array([1, 2], dtype="int8"), 3])
    assert asked.spec.input_dtypes == ("int8", "int8")  # input_dtype makes it a 0-d array
    assert asked.spec.user_values[1].shape == ()


def test_rsqrt_of_a_subnormal_float64_keeps_the_users_exact_number():
    tiny = np.float64(5e-324)
    r = dx.probe("ops.rsqrt", values=[np.array([tiny, 1.0])], backend="torch")
    assert r.ok and r.spec.input_dtypes == ("float64",)
    assert r.spec.user_values[0].value()[0] == tiny  # bit-exact through JSON and the worker
    assert r.output_dtype == raw(
        "torch",
        "k.backend.standardize_dtype(k.ops.rsqrt(k.ops.convert_to_tensor("
        "np.array([5e-324, 1.0]))).dtype)",
    )


def test_discretization_on_the_users_own_numbers():
    r = dx.probe(
        "Discretization",
        kwargs={"bin_boundaries": [0.0, 1.0]},
        values=[np.array([[-0.5, 0.5, 1.5]], dtype="float64")],
        backend="jax",
    )
    assert r.ok, r.error_text()
    assert steps(r, "input") == [(0, None, "float64")]
    assert r.output_dtype == raw(
        "jax",
        "k.backend.standardize_dtype(k.layers.Discretization(bin_boundaries=[0.0, 1.0])("
        "np.array([[-0.5, 0.5, 1.5]])).dtype)",
    )


def test_values_are_in_the_cache_key_as_a_hash(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    big = dict(values=[np.full((2, 3), 100, "int8"), np.full((2, 3), 100, "int8")])
    small = dict(values=[np.ones((2, 3), "int8"), np.ones((2, 3), "int8")])
    first = dx.probe("ops.add", backend="numpy", **big)
    assert first.ok and not first.cached
    assert dx.probe("ops.add", backend="numpy", **big).cached
    other = dx.probe("ops.add", backend="numpy", **small)
    assert other.ok and not other.cached  # same dtypes and shapes, other values: a miss
    key = other.spec.cache_key()
    assert other.spec.user_values[0].data not in key and len(json.loads(key)["user_values"]) == 64
    assert "user_values" not in ProbeSpec(target="ops.add").cache_key()  # old keys unchanged


@pytest.mark.parametrize(
    "values, input_dtype, message",
    [
        (np.zeros(5_000_000, "float32"), None, "the limit is 4194304 elements"),
        ([np.zeros((1 << 21,), "float64")] * 2, None, "bytes in all; the limit is"),
        ([[0.0] * 5_000_000], None, "a list of more than 4194304 items"),
        ([np.zeros((1,) * 9)], None, "8 dims"),
        ([[[1, 2], [3]]], None, "not an array of numbers: ValueError"),
        ([np.array([object()])], None, "NumPy object array"),
        ([lambda: 1], None, "functions and other Python objects are refused"),
        ([{1: np.ones(2)}], None, "dict keys are strings"),
        ([[-1, 300]], "uint8", "element [0] = -1 (int64) becomes 255 as uint8"),
        ([np.array([1.5])], "int32", "element [0] = 1.5 (float64) becomes 1 as int32"),
        ([np.array([1e6])], "float16", "overflows as float16"),
        ([np.array([1 + 2j])], "float32", "loses its imaginary part"),
        ([2.5], "python_int", "python_int asked, but the value is a float"),
        ("imag", None, "did you mean 'image'"),
        ([[1.0, 2.0], [3.0, 4.0]], None, "ops.abs takes 1 input(s) but 2 values were given"),
    ],
)
def test_bad_values_are_refused_saying_what_was_received(values, input_dtype, message):
    with pytest.raises(InvalidSpecError) as caught:
        dx.probe("ops.abs", input_dtype, values=values, backend="numpy")
    assert message in str(caught.value)


def test_values_that_do_not_decode_are_refused_as_data():
    good = InputValue.of_array(np.arange(3, dtype="int32")).to_dict()
    for bad in ({**good, "data": "AAAA"}, {**good, "data": "!!"}, {**good, "dtype": "object"}):
        with pytest.raises(ValueError):
            InputValue.from_dict(bad)
    with pytest.raises(InvalidSpecError, match="give shape or your own values"):
        dx.probe("ops.abs", values=[[1.0]], shape=(1,))


# ------------------------------------------------------------------ their structures


class TwoInputs(keras.layers.Layer):
    """A user's layer whose call takes a float and an int input."""

    def call(self, x, ids):
        return x + keras.ops.cast(ids, x.dtype)


class PairInput(keras.layers.Layer):
    """A user's layer whose call takes one tuple ``(float_input, int_input)``."""

    def call(self, inputs):
        x, ids = inputs
        return x * keras.ops.cast(ids, x.dtype)


def raw_received(layer_class, *args):
    """What ``call`` received, by raw Keras in this process."""
    seen = []

    class Spy(layer_class):
        def call(self, *inputs):
            seen.extend(
                keras.backend.standardize_dtype(t.dtype) for t in keras.tree.flatten(inputs)
            )
            return super().call(*inputs)

    Spy()(*args)
    return seen


@pytest.mark.parametrize("backend", ALL)
def test_a_two_input_custom_layer_shows_what_call_really_received(backend):
    x, ids = np.ones((2, 3), "float16"), np.ones((2, 3), "int32")
    r = dx.probe(TwoInputs, values=[x, ids], backend=backend)
    assert r.ok, r.error_text()
    assert steps(r, "input") == [(0, None, "float16"), (1, None, "int32")]
    # each step is a tensor call() received, at the input it came from
    assert steps(r, "autocast") == [(0, None, "float32"), (1, None, "int32")]
    assert raw_received(TwoInputs, x, ids) == ["float32", "int32"]
    by_dtypes = dx.probe(TwoInputs, ["float16", "int32"], backend=backend)
    assert steps(by_dtypes, "autocast") == steps(r, "autocast")


def test_a_tuple_input_is_passed_as_a_tuple_with_a_cast_path_per_leaf():
    x, ids = np.ones((2, 3), "float16"), np.ones((2, 3), "int32")
    r = dx.probe(PairInput, values=[(x, ids)], backend="torch")
    assert r.ok, r.error_text()
    assert r.spec.structure == [{"tuple": [0, 1]}]
    assert steps(r, "converted") == [(0, "0", "float16"), (1, "1", "int32")]
    assert steps(r, "autocast") == [(0, "0", "float32"), (1, "1", "int32")]
    assert raw_received(PairInput, (x, ids)) == ["float32", "int32"]


AUGMENT = (
    "{key: k.backend.standardize_dtype(v.dtype) for key, v in k.layers.RandomFlip(seed=1)("
    "{'images': np.ones((1, 4, 4, 3), 'float32'), "
    "'segmentation_masks': np.ones((1, 4, 4, 1), 'int32')}, training=True).items()}"
)


@pytest.mark.parametrize("backend", ALL)
def test_an_augmentation_layer_gets_its_dict_and_names_every_leaf(backend):
    inputs = {
        "images": np.ones((1, 4, 4, 3), "float32"),
        "segmentation_masks": np.ones((1, 4, 4, 1), "int32"),
    }
    r = dx.probe(
        "RandomFlip",
        values=[inputs],
        kwargs={"seed": 1},
        call_kwargs={"training": True},
        backend=backend,
    )
    assert r.ok, r.error_text()
    assert [n for _, n, _ in steps(r, "input")] == ["images", "segmentation_masks"]
    assert {n: d for _, n, d in steps(r, "autocast")} == {
        "images": "float32",
        "segmentation_masks": "int32",
    }
    assert {n: d for _, n, d in steps(r, "output")} == raw(backend, AUGMENT)


def test_structures_run_only_where_a_call_takes_them():
    pair = [(np.ones((2, 3), "float32"), np.ones((2, 3), "int32"))]
    with pytest.raises(InvalidSpecError, match="run in modes 'call', 'training' and 'dataset'"):
        dx.probe(PairInput, values=pair, mode="model")
    with pytest.raises(InvalidSpecError, match="not dicts or tuples"):
        dx.probe("ops.add", values=pair)


# ------------------------------------------------------------------ call arguments


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_call_kwargs_training_true_runs_dropout_in_training(backend):
    ones = [np.ones((4, 64), "float32")]
    on = dx.probe(
        "Dropout",
        kwargs={"rate": 0.5},
        values=ones,
        call_kwargs={"training": True},
        backend=backend,
    )
    off = dx.probe("Dropout", kwargs={"rate": 0.5}, values=ones, backend=backend)
    assert on.ok and off.ok
    assert on.numerics.max_abs_output == 2.0  # kept units scaled by 1 / (1 - rate)
    assert off.numerics.max_abs_output == 1.0
    assert on.spec.cache_key() != off.spec.cache_key()
    assert '"call_kwargs":{"training":true}' in on.spec.cache_key()


def test_call_kwargs_in_process_leave_keras_global_seed_as_it_was():
    from keras.src.backend.common import global_state

    before = global_state.get_global_attribute("global_seed_generator")
    r = dx.probe("Dropout", kwargs={"rate": 0.5}, call_kwargs={"training": True})
    assert r.ok
    assert global_state.get_global_attribute("global_seed_generator") is before


@pytest.mark.parametrize(
    "target, call_kwargs, message",
    [
        ("Dropout", {"training": object()}, "call_kwargs must be JSON values"),
        ("Dropout", ["training"], "call_kwargs must be a dict"),
        ("ops.add", {"x": 1}, "call_kwargs are a layer call's"),
        ("Dropout", {"not a name": 1}, "keys are argument names"),
    ],
)
def test_bad_call_kwargs_are_refused(target, call_kwargs, message):
    with pytest.raises(InvalidSpecError, match=message):
        dx.probe(target, call_kwargs=call_kwargs)


class HalfWhenTraining(keras.layers.Layer):
    """Returns float16 only when called with ``training=True``."""

    def call(self, x, training=False):
        return keras.ops.cast(x, "float16") if training else x


def test_check_model_passes_call_kwargs_to_the_model():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, HalfWhenTraining()(inputs))
    ones = np.ones((2, 4), "float32")
    trained = dx.check_model(model, ones, call_kwargs={"training": True})
    inference = dx.check_model(model, ones)
    assert [t.dtype for t in trained.layers[-1].outputs] == ["float16"]
    assert [t.dtype for t in inference.layers[-1].outputs] == ["float32"]
    with pytest.raises(InvalidSpecError, match="call_kwargs must be JSON"):
        dx.check_model(model, ones, call_kwargs={"training": object()})


# ------------------------------------------------------------------ every kind of output


class Size(keras.layers.Layer):
    """A user's layer returning ``ops.size``: a Python int on numpy and jax."""

    def call(self, x):
        return keras.ops.size(x)


SIZE = (
    "(lambda o: 'python_int' if isinstance(o, int) else k.backend.standardize_dtype(o.dtype))"
    "(k.ops.size(k.ops.ones((2, 4))))"
)


@pytest.mark.parametrize("backend", ALL)
def test_a_python_int_output_is_named_and_not_called_a_deviation(backend):
    r = dx.probe(Size, backend=backend)
    assert r.ok, r.error_text()
    (output,) = r.steps("output")
    assert output.dtype == r.output_dtype == raw(backend, SIZE)
    if output.dtype == "python_int":  # numpy and jax
        assert "a Python int, not a tensor" in output.note
        assert r.verdict == "undocumented"
        assert any("not a tensor" in line for line in r.basis)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_values_and_outputs_are_first_class(dtype):
    value = (np.arange(4) + 1j).astype(dtype)
    r = dx.probe("ops.multiply", values=[value, value], backend="numpy")
    assert r.ok and r.spec.input_dtypes == (dtype, dtype)
    assert r.output_dtype == raw(
        "numpy",
        f"(lambda t: k.backend.standardize_dtype(k.ops.multiply(t, t).dtype))("
        f"k.ops.convert_to_tensor((np.arange(4) + 1j).astype('{dtype}'), dtype='{dtype}'))",
    )
    assert dx.dtypes.family(r.output_dtype) == "complex"
    assert [s.dtype for s in r.steps("converted")] == [
        raw(
            "numpy",
            "k.backend.standardize_dtype("
            f"k.ops.convert_to_tensor(np.ones(2, '{dtype}'), dtype='{dtype}').dtype)",
        )
    ] * 2
    assert r.numerics is not None
    again = ProbeResult.from_json(r.to_json())
    assert again.spec.user_values[0].value().tolist() == value.tolist()


class Masked(keras.layers.Layer):
    """A user's layer taking a mask."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, x, mask=None):
        return x * keras.ops.cast(mask, x.dtype)[..., None]


def test_a_mask_in_call_kwargs_is_shown_by_its_name_as_call_received_it():
    r = dx.probe(
        Masked,
        values=[np.ones((2, 3, 4), "float32")],
        call_kwargs={"mask": [[True, False, True], [True, True, False]]},
    )
    assert r.ok, r.error_text()
    seen = []

    class Spy(Masked):
        def call(self, x, mask=None):
            seen.append(keras.backend.standardize_dtype(mask.dtype))
            return super().call(x, mask=mask)

    Spy()(np.ones((2, 3, 4), "float32"), mask=np.array([[True, False, True], [True, True, False]]))
    assert steps(r, "autocast") == [(0, None, "float32"), (None, "mask", seen[0])]
    (mask_step,) = [s for s in r.steps("autocast") if s.name == "mask"]
    assert "not one of the inputs given" in mask_step.note
