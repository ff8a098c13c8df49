"""16-bit floats read through their bits (``float_bits.finite_peak``, ``float_bits.half_counts``),
and the losses of a float cast to one counted from them (``keras_run._exactness._half_masks``),
each against NumPy and ml_dtypes widening every value."""

import ml_dtypes
import numpy as np
import pytest

from dtype_explorer import dtypes, float_bits
from dtype_explorer.keras_run import _exactness, cast_loss

HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
#: The smallest normal of each, for counting subnormals from widened values.
TINY = {"float16": 2.0**-14, "bfloat16": 2.0**-126}


def every_value(name: str) -> np.ndarray:
    """All 65,536 bit patterns of a 16-bit float, as that float."""
    return np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(HALF[name])


def widened_peak(array: np.ndarray) -> float | None:
    wide = array.astype(np.float64)
    return float(np.abs(wide).max()) if np.isfinite(wide).all() else None


@pytest.mark.parametrize("name", sorted(HALF))
def test_every_bit_pattern_is_counted_as_widening_counts_it(name):
    values = every_value(name)
    with np.errstate(invalid="ignore"):
        wide = values.astype(np.float64)
    finite = np.isfinite(wide)
    subnormal = finite & (wide != 0) & (np.abs(wide) < TINY[name])
    expected = (int((wide == 0).sum()), int(subnormal.sum()), int((~finite).sum()))
    assert float_bits.half_counts(values) == expected
    assert float_bits.finite_peak(values) is None  # inf and NaN are among them
    assert float_bits.finite_peak(values[finite]) == widened_peak(values[finite])
    # ml_dtypes.finfo: NumPy's own finfo knows bfloat16 only from ml_dtypes 0.7.0 on
    assert float_bits.finite_peak(values[finite]) == float(ml_dtypes.finfo(HALF[name]).max)


@pytest.mark.parametrize("name", [*sorted(HALF), "float32", "float64", "float8_e5m2"])
def test_the_peak_of_random_arrays_is_the_widened_one(name):
    dtype = HALF.get(name) or getattr(np, name, None) or getattr(ml_dtypes, name)
    rng = np.random.default_rng(0)
    for trial in range(300):
        scale = 10.0 ** rng.integers(-40, 8)
        array = (rng.normal(size=(int(rng.integers(1, 40)), 3)) * scale).astype(np.float32)
        if trial % 5 == 1:  # no negative value (a ReLU's output): one reduction on the bits
            array = np.abs(array)
        if trial % 5 == 2:  # no positive one: the largest read unsigned
            array = -np.abs(array)
        if trial % 4 == 0:
            array.flat[rng.integers(array.size)] = (np.inf, -np.inf, np.nan)[trial % 3]
        with np.errstate(over="ignore"):
            values = array.astype(dtype)[:, ::2]  # not contiguous
        assert float_bits.finite_peak(values) == widened_peak(values), (name, values)
    for signed_zeros in ([-0.0], [0.0, -0.0], [-0.0, -1e-30], [-3.0]):
        values = np.array(signed_zeros, np.float64).astype(dtype)
        assert float_bits.finite_peak(values) == widened_peak(values), (name, values)
        assert float_bits.finite_peak(values[0]) == widened_peak(values[:1])  # a 0-d array
    assert float_bits.finite_peak(np.zeros((0,), dtype)) == 0.0
    assert float_bits.half_counts(np.ones(3, np.float32)) is None


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_a_wider_byte_order_not_the_machines_is_widened_not_misread(name):
    swapped = np.array([-3.0, 1.0, np.nan], name).astype(np.dtype(name).newbyteorder())
    assert float_bits.finite_peak(swapped) is None and float_bits.finite_peak(swapped[:2]) == 3.0


def test_a_byte_order_not_the_machines_is_widened_not_misread():
    swapped = np.array([np.inf, 1.0, 2.0], np.float16).astype(np.dtype("float16").newbyteorder())
    assert float_bits.half_magnitude(swapped) is None and float_bits.half_counts(swapped) is None
    assert float_bits.finite_peak(swapped) is None
    assert float_bits.finite_peak(swapped[1:]) == 2.0
    before = np.array([1.0, 2049.0, 1e-9, 3.0], np.float32)
    loss = cast_loss(before, before.astype(swapped.dtype), step="autocast", where="x")
    assert (loss.rounded, loss.underflowed, loss.subnormal) == (1, 1, 0)


def test_a_saturating_cast_of_an_inf_is_compared_element_by_element():
    """A cast that clamps inf to the largest finite value (OpenVINO's Convert does): after it
    every value is finite, before it one was not."""
    before = np.array([np.inf, 1.0], np.float32)
    after = np.array([65504.0, 1.0], np.float16)
    assert _exactness._half_masks(before, after, "float32") is None
    assert cast_loss(before, after, step="cast", where="x") is None  # an inf given: no loss


@pytest.mark.parametrize(
    ("name", "source"),
    [(n, s) for n in sorted(HALF) for s in ("float16", "float32", "float64") if s != n],
)
def test_the_counts_find_what_the_element_wise_compare_finds(name, source, monkeypatch):
    """Random float32 arrays with overflow, underflow, subnormals, zeros and integers mixed in
    (and clean ones): ``cast_loss`` from the bits' counts equals the one that compares every
    element."""
    rng = np.random.default_rng(1)
    cases = []
    for trial in range(400):
        array = rng.normal(size=int(rng.integers(1, 30))) * 10.0 ** rng.integers(-3, 4)
        if trial % 3 == 0:
            array = np.round(array)  # integers, some beyond what the target holds exactly
        kind = trial % 8
        if kind == 1:
            array[0] = 7e4 if name == "float16" else 3e38  # overflow (float32's edge for bf16)
        elif kind == 2:
            array[-1] = 1e-9 if name == "float16" else 1e-45  # underflow to zero
        elif kind == 3:
            array[0] = 1e-6 if name == "float16" else 1e-39  # subnormal after the cast
        elif kind == 4:
            array[-1] = 2049.0 if name == "float16" else 257.0  # an integer rounded
        elif kind == 5:
            array[rng.random(array.size) < 0.5] = 0.0  # zeros that stay zero
        elif kind == 6:
            array = array[::-1].reshape(-1, 1)[:, 0]  # not contiguous
        elif kind == 7 and trial % 16 == 7:
            array = np.asarray(array[0])  # one value, no dimension
        cases.append(array)
    with np.errstate(over="ignore"):
        cases = [a.astype(source) for a in cases]
        narrowed = [a.astype(HALF[name]) for a in cases]
    settled = [_exactness._half_masks(a, n, source) is not None for a, n in zip(cases, narrowed)]

    def losses() -> list:
        with np.errstate(over="ignore", invalid="ignore"):
            return [cast_loss(a, n, step="autocast", where="x") for a, n in zip(cases, narrowed)]

    screened = losses()
    monkeypatch.setattr(_exactness, "_half_masks", lambda *args: None)
    counted = losses()
    assert screened == counted
    assert sum(loss is not None for loss in counted) >= 80  # the losses were there to find
    assert sum(settled) >= 250  # and the bits settled most casts without the full compare,
    found = [loss for loss, ok in zip(counted, settled) if ok and loss is not None]
    # each cause among those (bfloat16 has float32's normal range: nothing becomes subnormal;
    # from float16, nothing underflows to bfloat16's zero)
    causes = ["rounded"]
    causes += ["underflowed"] if source != "float16" else []
    causes += ["subnormal"] if name == "float16" else []
    for cause in causes:
        assert sum(getattr(loss, cause) > 0 for loss in found) >= 10, cause


def _activations(name: str, change: str) -> np.ndarray:
    """A mixed-precision model's activations (50,000 float32 values), changed as ``change``
    says, each change at the edge a shortcut of ``_half_masks`` turns on."""
    a = np.random.default_rng(7).normal(0.0, 3.0, 50_000).astype(np.float32)
    exact = dtypes.exact_integers(name)
    a[np.abs(a) < 1e-3] = 1.0  # nothing near zero: every value normal after the cast
    if change == "zeros stay":
        a[::7] = 0.0
    elif change == "zeros and one underflow":  # (only a float32 subnormal: bfloat16's)
        a[::7], a[3] = 0.0, 1e-30 if name == "float16" else 1e-45
    elif change == "one subnormal among zeros":  # (bfloat16: already subnormal in float32)
        a[::7], a[5] = 0.0, TINY[name] / 4
    elif change == "one subnormal, no zero":
        a[5] = TINY[name] / 4
    elif change == "the last exact integer, rounded to from above":
        a[11] = exact + 1  # rounds down to exact: the largest value after is exact itself
    elif change == "the last exact integer, kept":
        a[11] = exact
    elif change == "beyond it, no integer":
        a[11] = exact + 0.5 if name == "float16" else exact * 3 + 0.5
    return a


@pytest.mark.parametrize("name", sorted(HALF))
def test_an_inf_or_nan_given_is_no_loss_whatever_the_values_after(name, monkeypatch):
    """Pairs no cast makes (an inf or NaN before, a small finite value after: what a creation
    op run twice may give) count no loss at those values, as the element-wise compare counts:
    the shortcut that skips the peak before the cast does not take them for underflow or
    subnormals."""
    tiny = TINY[name] / 4
    pairs = [([np.nan], [0.0]), ([np.inf, 1.0], [0.0, 1.0]), ([np.nan, 2.0], [tiny, 2.0])]
    for before, after in pairs:
        b, a = np.array(before, np.float32), np.array(after).astype(HALF[name])
        screened = cast_loss(b, a, step="creation", where="x")
        with monkeypatch.context() as patched:
            patched.setattr(_exactness, "_half_masks", lambda *args: None)
            assert screened == cast_loss(b, a, step="creation", where="x"), (before, after)


@pytest.mark.parametrize("name", sorted(HALF))
@pytest.mark.parametrize(
    "change",
    [
        "none",
        "zeros stay",
        "zeros and one underflow",
        "one subnormal among zeros",
        "one subnormal, no zero",
        "the last exact integer, rounded to from above",
        "the last exact integer, kept",
        "beyond it, no integer",
    ],
)
def test_each_shortcut_of_the_bits_gives_the_element_wise_answer(name, change, monkeypatch):
    """An activation-sized cast at each edge where ``_half_masks`` skips a pass (no value below
    normal after the cast; no zero after it; the largest value after it below the last exact
    integer) gives the ``cast_loss`` of the element-wise compare, and settles it on the bits."""
    before = _activations(name, change)
    after = before.astype(HALF[name])
    assert _exactness._half_masks(before, after, "float32") is not None
    screened = cast_loss(before, after, step="autocast", where="x")
    monkeypatch.setattr(_exactness, "_half_masks", lambda *args: None)
    assert screened == cast_loss(before, after, step="autocast", where="x")
    expected = {
        "zeros and one underflow": ("underflowed", 1),
        "one subnormal among zeros": ("subnormal", 1),
        "one subnormal, no zero": ("subnormal", 1),
        "the last exact integer, rounded to from above": ("rounded", 1),
    }.get(change)
    if name == "bfloat16" and expected and expected[0] == "subnormal":
        expected = None  # float32's normal range is bfloat16's: a subnormal was one before
    if expected is None:
        assert screened is None
    else:
        assert getattr(screened, expected[0]) == expected[1], screened


@pytest.mark.parametrize("name", sorted(HALF))
def test_a_weight_read_is_screened_on_its_bits_as_counting_them_screens_it(name):
    """A variable read in a 16-bit float is measured only where it made an inf or a new zero
    (``trace._values._overflow_or_underflow``): a read with no zero and no inf after it is
    settled on its bits' two ends; every other read is counted, with the same answer."""
    from dtype_explorer.keras_run.trace import _values

    kernel = np.random.default_rng(3).normal(0.0, 0.05, 4_000).astype(np.float32)
    kernel[np.abs(kernel) < 1e-3] = 1e-3
    big, tiny = (1e5, 1e-9) if name == "float16" else (3.4e38, 1e-45)  # (bfloat16: to inf)
    cases = {"clean": (kernel, False)}
    zeros = kernel.copy()
    zeros[::9] = 0.0
    cases["zeros that stay"] = (zeros, False)
    over = kernel.copy()
    over[1] = big
    cases["one overflow"] = (over, True)
    under = zeros.copy()
    under[2] = tiny
    cases["one underflow among zeros"] = (under, True)
    for label, (wide, lost) in cases.items():
        with np.errstate(over="ignore"):
            narrow = wide.astype(HALF[name])
        counted = bool(
            np.count_nonzero(~np.isfinite(narrow.astype(np.float64))) > 0
            or np.count_nonzero(narrow == 0) > np.count_nonzero(wide == 0)
        )
        assert counted == lost, label
        assert bool(_values._overflow_or_underflow(wide, narrow)) is lost, label
