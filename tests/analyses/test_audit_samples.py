"""Issue 23.8: ``check_model`` with a name-keyed dict sample, a string + int model given no
sample, and NumPy string samples: whatever ``model(sample)`` takes in raw Keras, the audit
takes, and its rows pair each tensor with the ``keras.Input`` of the same name. TensorFlow
(the only backend with string tensors)."""

import keras
import numpy as np
import pytest

import dtype_explorer as dx

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="string inputs are TensorFlow's"
)


def _ids_and_text_model():
    """Inputs declared ids (int64) first, text second: sorted keys put text first."""
    ids = keras.Input((2,), dtype="int64", name="b_ids")
    text = keras.Input((1,), dtype="string", name="a_text")
    lookup = keras.layers.StringLookup(vocabulary=["red", "blue"], output_mode="int")(text)
    both = keras.layers.Concatenate()(
        [keras.ops.cast(ids, "float32"), keras.ops.cast(lookup, "float32")]
    )
    return keras.Model([ids, text], keras.layers.Dense(2)(both))


def _root(report):
    return report.layers[0]


def test_a_name_keyed_dict_pairs_by_name():
    """The old code read "input 0: string → int64 (keras.Input dtype); input 1: int64 →
    string": the sorted-key sample paired with model.inputs by position."""
    model = _ids_and_text_model()
    sample = {
        "b_ids": keras.ops.convert_to_tensor(np.array([[1, 2], [3, 4]], "int64")),
        "a_text": keras.ops.convert_to_tensor([["red"], ["blue"]]),
    }
    model(sample)  # raw Keras takes it
    root = _root(dx.check_model(model, sample))
    assert [t.dtype for t in root.given] == ["int64", "string"]
    assert [t.dtype for t in root.received] == ["int64", "string"]
    assert root.autocast == ()


def test_a_real_cast_is_named_at_its_own_input():
    """int32 ids for an int64 ``keras.Input``: the cast is named at input 0 (``b_ids``)."""
    model = _ids_and_text_model()
    sample = {"b_ids": np.array([[1, 2], [3, 4]], "int32"), "a_text": np.array([["red"], ["x"]])}
    model(sample)
    events = _root(dx.check_model(model, sample)).autocast
    assert events and all(e.startswith("input 0: int32 → int64") for e in events), events


def test_no_sample_builds_one_keras_takes():
    """The old code built a NumPy int array beside a TensorFlow string tensor, which Keras
    refuses: "In a nested call() argument, you cannot mix tensors and non-tensors"."""
    report = dx.check_model(_ids_and_text_model())
    assert [t.dtype for t in report.sample] == ["int64", "string"]
    assert _root(report).outputs[0].dtype == "float32"


@pytest.mark.parametrize(
    "text",
    [
        np.array([["red"], ["blue"]]),
        np.array([[b"red"], [b"blue"]]),
        np.array([["red"], ["blue"]], dtype=object),
    ],
    ids=["str", "bytes", "object"],
)
def test_numpy_string_samples_are_taken(text):
    """The old code refused them ("Invalid dtype: str32"; "must hold numeric arrays"), though
    ``model(...)`` takes them."""
    model = _ids_and_text_model()
    sample = [np.array([[1, 2], [3, 4]], "int64"), text]
    expected = model(sample)
    report = dx.check_model(model, sample)
    assert [t.dtype for t in _root(report).given] == ["int64", "string"]
    assert _root(report).outputs[0].dtype == keras.backend.standardize_dtype(expected.dtype)
