"""What a value finding says is the cause (issue 39 items 21, 24): each case runs raw Keras in
the probed backend's worker (``raw_numerics.py``), in the probed dtype and in the reference
dtype, beside the tool's probe, and the finding must carry raw Keras's numbers and name a
cause the path can have."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest
import raw_instances
import raw_numerics as raw

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.keras_run import reference_dtype
from tests.on_backend import json_on

#: A function of raw_numerics.py run in a fresh process of its own, as a user's script is.
FRESH = (
    f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import raw_numerics; "
    "print(json.dumps(raw_numerics.{call}))"
)


def _raw(backend: str, function, *args):
    return pool.call(backend, function, *args, timeout=120).result()


def test_torch_bce_in_float16_is_off_from_the_reference_not_integer_truncation():
    """torch's binary_cross_entropy clamps log(0) at -100: in float16 the clipped prediction
    rounds to 1 and the loss is exactly 100.0, a whole number from a float-only path. The old
    rule read 'every value came out a whole number' as an integer dtype on the way."""
    y_true, y_pred = [[0.0]], [[1.0]]
    want = _raw("torch", raw.binary_crossentropy, y_true, y_pred, "float16", "float64")
    values = [np.asarray(y_true, "float16"), np.asarray(y_pred, "float16")]
    r = dx.probe(
        "losses.BinaryCrossentropy", values=values, kwargs={"dtype": "float16"}, backend="torch"
    )
    assert r.status == "ok", r.error
    assert r.output_dtype == "float16"
    assert list(r.numerics.outputs[0].head) == want["value"]
    (finding,) = [f for f in r.numerics.findings if f.output == 0]
    assert finding.value == want["value"][0]
    assert finding.expected == pytest.approx(want["reference"][0])
    assert finding.reference_dtype == "float64"
    assert finding.kind == "reference-error", finding.message
    assert "integer" not in finding.message


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_a_cell_given_its_inputs_shape_alone_is_called_with_states(backend):
    """``GRUCell`` under floatx float16 with ``shape=(8, 3)``: a cell's call needs its states,
    so the tool supplies them (the catalog's, with the given batch) and says so, and answers
    as raw Keras does: float16 on TensorFlow; torch's qr (the recurrent kernel's orthogonal
    initializer) refuses float16. It was 'invalid (shape or kwargs)': missing 'states'."""
    want = json_on(backend, FRESH.format(call='gru_cell("float16", 8, 3, 4)'))
    r = dx.probe("GRUCell", floatx="float16", shape=(8, 3), backend=backend)
    assert r.status != "invalid", r.error
    if "raises" in want:
        assert r.status == "error"
        assert r.error.type == want["raises"]
        assert r.error.where != "shape or kwargs"
    else:
        assert r.status == "ok", r.error
        assert r.output_dtype == want["output"]
    shapes = [s for s in r.supplied if s.part == "shape"]
    assert [s.value for s in shapes] == ["(8, 4)"]


BOOLS = np.array([[True, True, False], [False, True, False]])
INTS = np.array([[1, 2, -3, 4], [0, 5, 1, -2]], "int32")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("x", [BOOLS, INTS], ids=["bool", "int32"])
@pytest.mark.parametrize("target", ["ops.rms_normalization", "RMSNormalization"])
def test_bool_and_integer_normalization_is_checked_against_the_wide_computation(backend, x, target):
    """Keras casts an RMS normalization back to its input's dtype: bool input comes out
    True/False, int32 input [0, 0, 1, ...], where the same computation in the wide float gives
    1.22 or 0.45. The probe had no value check for a bool output, nor for the passthrough
    RMSNormalization layer on an integer path."""
    wide_dtype = reference_dtype(backend)  # the widest float the backend computes in
    want = _raw(backend, raw.rms_normalization, x, wide_dtype)
    kind = "op" if target.startswith("ops.") else "layer"
    r = dx.probe(target, values=[x], backend=backend)
    assert r.status == "ok", r.error
    assert r.output_dtype == want[kind]["dtype"] == str(x.dtype)
    values = r.numerics.outputs[0]
    assert list(values.head) == want[kind]["value"][: len(values.head)]
    got, ref = np.array(want[kind]["value"]), np.array(want[f"{kind}_reference"])
    assert not np.allclose(got, ref)  # raw Keras: the numbers are lost
    (finding,) = [f for f in r.numerics.findings if f.output == 0]
    k = int(np.ravel_multi_index(finding.element, x.shape))
    assert finding.value == got[k]
    assert finding.expected == pytest.approx(ref[k], rel=1e-6)
    assert finding.reference_dtype == wide_dtype


def test_rescaling_under_an_integer_policy_is_checked_against_the_wide_computation():
    """Rescaling(1/255) under a uint8 policy casts its scale to uint8 (0): raw Keras returns
    zeros where the same layer in float64 gives 0.78. The probe had no value check for it
    (Rescaling returns its layer dtype, so it was not taken for arithmetic) and showed a
    plain as-documented."""
    img = np.full((1, 2, 2, 3), 200, "uint8")
    r = dx.probe("Rescaling", "uint8", kwargs={"scale": 1 / 255}, policy="uint8", values=[img])
    got = keras.ops.convert_to_numpy(keras.layers.Rescaling(1 / 255, dtype="uint8")(img))
    wide = reference_dtype("tensorflow")
    ref = keras.ops.convert_to_numpy(keras.layers.Rescaling(1 / 255, dtype=wide)(img.astype(wide)))
    assert r.status == "ok", r.error
    assert r.output_dtype == str(got.dtype) == "uint8"
    (finding,) = [f for f in r.numerics.findings if f.output == 0]
    assert finding.kind == "truncation"
    assert finding.value == got[finding.element]
    assert finding.expected == pytest.approx(ref[finding.element], rel=1e-6)
    assert r.verdict == "as-documented" and r.shown_verdict == "values-wrong"
    assert "values-wrong" in r.summary()


@pytest.mark.parametrize("backend", ["numpy", "jax", "torch", "tensorflow"])
def test_an_adapted_text_vectorization_is_judged_as_its_class(backend):
    """Issue 39 item 22: an adapted ``TextVectorization`` instance was a custom layer to the
    tool, so the policy rule (float32) judged its integer ids ('deviates') and a float64
    rebuild of it was run as a numbers reference, which failed. Keras's own class chooses its
    output dtype itself; the instance is judged as the class is, and its ids are not measured
    against a float reference. Raw Keras gives the dtype and the ids."""
    corpus, texts = ["a b c", "b c d", "c d"], ["a b", "d c"]
    layer = keras.layers.TextVectorization()
    layer.adapt(corpus)
    want = _raw(backend, raw_instances.text_vectorization, corpus, texts)
    r = dx.probe(layer, values=[np.array(texts)], backend=backend)
    assert r.ok, r.error
    assert r.output_dtype == want["output"]
    head = r.numerics.outputs[0].head
    assert list(head[: len(want["numbers"])]) == want["numbers"]
    assert r.verdict != "deviates"
    assert "policy" not in {e.source for e in r.expectations}
    assert "reference run failed" not in r.numerics.note
    named = dx.probe("TextVectorization", kwargs={"vocabulary": ["a", "b"]}, backend=backend)
    assert {e.source for e in r.expectations} == {e.source for e in named.expectations}


def test_a_users_subclass_of_a_keras_layer_is_still_its_own():
    """The class's rule is taken only for Keras's own class: a subclass's ``call`` is the
    user's, judged as a custom layer (here, by the policy rule: it returns float16)."""

    class Halved(keras.layers.Dense):
        def call(self, x):
            return keras.ops.cast(super().call(x), "float16")

    layer = Halved(2)
    layer.build((None, 4))
    x = np.ones((2, 4), "float32")
    r = dx.probe(layer, values=[x])
    assert r.ok, r.error
    assert r.output_dtype == keras.backend.standardize_dtype(layer(x).dtype) == "float16"
    assert r.verdict == "deviates"
