"""The per-layer damage comparison (``keras_run.model._layer_damage.compare``) against the same
statistics written out in float64 NumPy, on hand-built outputs of every float width: its fast
path (every value finite: peaks on the bits, the sums a slice at a time) and its masked one
(an inf or NaN on either side) must say the same as the formulas; and ``numpy_values`` gives
what ``keras.ops.convert_to_numpy`` gives, read-only where it is lent."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from dtype_explorer import dtypes
from dtype_explorer.float_bits import smallest_nonzero
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run.model._layer_damage import compare

WIDTHS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


def _expected(out: np.ndarray, ref: np.ndarray) -> dict:
    o, r = out.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    keep = np.isfinite(o) & np.isfinite(r)
    seen = o[np.isfinite(o)]
    diff = o[keep] - r[keep]
    signal, noise = float(np.sum(r[keep] ** 2)), float(np.sum(diff**2))
    nonzero = np.abs(seen[seen != 0])
    big, tiny = dtypes.float_limits(dtypes.describe(out))
    amax = float(np.abs(seen).max())
    return {
        "rel_rms": math.sqrt(noise / diff.size) / math.sqrt(signal / diff.size),
        "max_abs_error": float(np.abs(diff).max()),
        "amax": amax,
        "reference_amax": float(np.abs(r[np.isfinite(r)]).max()),
        "top_bits": math.log2(big / amax),
        "bottom_bits": math.log2(float(nonzero.min()) / tiny),
        "nonfinite": int(o.size - seen.size),
        "compared": int(diff.size),
    }


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: np.dtype(w).name)
@pytest.mark.parametrize("inf", [False, True], ids=["finite", "with-inf"])
def test_compare_says_what_the_formulas_say(width, inf):
    rng = np.random.default_rng(3)
    ref = (rng.standard_normal((3, 5, 7)) * 50).astype(np.float32)
    ref[0, 0, :3] = 0.0  # zeros kept: not the smallest nonzero
    ref[1, 1, 1] = -2e-3
    out = ref.astype(width)
    if inf:
        out[2, 2, 2] = np.inf
        ref[2, 3, 3] = np.nan
    got = compare(out, ref, path="m/x", layer_class="Dense", call_index=0, output=0)
    want = _expected(out, ref)
    for name, value in want.items():
        assert getattr(got, name) == pytest.approx(value, rel=1e-9, abs=1e-300), name
    assert got.dtype == dtypes.describe(out) and got.reference == "float32"
    if np.dtype(width).itemsize < 4:  # a narrower copy is not exact
        assert got.rel_rms > 0 and got.sqnr_db is not None


@pytest.mark.parametrize("inf", [False, True], ids=["finite", "with-inf"])
def test_compare_a_slice_at_a_time_says_what_the_formulas_say(inf, monkeypatch):
    """The sums are made a slice at a time (``SLICE`` values widened to float64): slices of 7
    values over 105, the last one short, give what the whole arrays give."""
    from dtype_explorer.keras_run.model import _layer_damage

    monkeypatch.setattr(_layer_damage, "SLICE", 7)
    rng = np.random.default_rng(5)
    ref = (rng.standard_normal((3, 5, 7)) * 50).astype(np.float32)
    out = (ref * 1.01).astype(np.float16)  # not the reference rounded: an inexact difference
    out[0, 0, 0] = -out[0, 0, 0]  # the largest error, in the first slice
    if inf:
        out[2, 2, 2] = np.inf
    got = compare(out, ref, path="m/x", layer_class="Dense", call_index=0, output=0)
    for name, value in _expected(out, ref).items():
        assert getattr(got, name) == pytest.approx(value, rel=1e-12, abs=1e-300), name
    assert got.max_abs_error == pytest.approx(abs(float(out[0, 0, 0]) - float(ref[0, 0, 0])))


def test_compare_of_an_exact_copy_has_no_noise():
    ref = np.linspace(-3, 3, 40, dtype=np.float32)
    got = compare(ref.copy(), ref, path="m/x", layer_class="Dense", call_index=0, output=0)
    assert got.rel_rms == 0 and got.sqnr_db is None and got.max_abs_error == 0


@pytest.mark.parametrize(
    "width", [*WIDTHS, ml_dtypes.float8_e4m3fn], ids=lambda w: np.dtype(w).name
)
def test_smallest_nonzero_on_the_bits(width):
    values = np.array([0.0, -0.0, 3.5, -0.015625, 7.0, 0.0]).astype(width)
    wide = np.abs(values.astype(np.float64))
    assert smallest_nonzero(values) == float(wide[wide > 0].min())
    assert smallest_nonzero(np.zeros(4, width)) == math.inf
    assert values.astype(np.float64)[3] == -0.015625  # the input is left as it was


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int32", "bool"])
def test_numpy_values_is_keras_conversion(dtype):
    import keras

    for shape in [(2, 3), ()]:  # a 0-d tensor too (TensorFlow lends it as a NumPy scalar)
        x = keras.ops.cast(keras.ops.reshape(keras.ops.arange(6)[: max(math.prod(shape), 1)],
                                             shape), dtype)  # fmt: skip
        # (Keras's own conversion of a 0-d bfloat16 TensorFlow tensor raises: "object __array__
        # method not producing an array"; its 1-element reshape is converted instead)
        flat = keras.ops.reshape(x, (-1,))
        got, want = numpy_values(x), np.asarray(keras.ops.convert_to_numpy(flat)).reshape(shape)
        assert isinstance(got, np.ndarray)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        if got.base is not None and not got.flags.owndata:  # lent: nothing may write into it
            assert not got.flags.writeable


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: np.dtype(w).name)
def test_compare_of_a_scalar_output(width):
    """A model's 0-d output (a mean) is compared too: its bits come back as a NumPy scalar
    unless raveled first."""
    ref = np.array(-1.2345678, np.float32)
    out = ref.astype(width)
    got = compare(out, ref, path="m/mean", layer_class="Lambda", call_index=0, output=0)
    want = _expected(out.reshape(1), ref.reshape(1))
    for name, value in want.items():
        assert getattr(got, name) == pytest.approx(value, rel=1e-9, abs=1e-300), name


def test_the_op_trace_leaves_sparse_and_ragged_tensors_unread():
    """Only eager tensors and variables are read by the op trace on tensorflow: a sparse
    tensor is not made dense (its dense shape could be huge), a ragged one not padded."""
    import tensorflow as tf

    from dtype_explorer.keras_run.trace._values import to_numpy

    sparse = tf.sparse.SparseTensor([[0, 0]], [1.0], [100_000, 100_000])
    assert to_numpy(sparse) is None
    ragged = to_numpy(tf.ragged.constant([[1.0], [2.0, 3.0]]))
    assert ragged is None or ragged.dtype == object
    assert to_numpy(tf.constant([1.5], tf.bfloat16)).tolist() == [1.5]
    assert to_numpy(tf.Variable([2.0, 3.0])).tolist() == [2.0, 3.0]
