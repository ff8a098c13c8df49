"""NumPy float arrays read on their bits: the largest magnitude and whether every value is
finite (:func:`finite_peak`), the smallest nonzero one (:func:`smallest_nonzero`), and a
16-bit float's zeros, subnormals and inf/NaN counted (:func:`half_counts`), with no float
temporary. With its sign bit cleared an IEEE float's
magnitude orders as its bits do, and it is inf or NaN exactly where those bits reach the
exponent's all-ones pattern, so integer reductions answer what float ones would, where NumPy
reduces float16 ~8x slower than float32 and widening a mixed-precision model's tensors first
cost an audit more than its forward pass. The op trace's values, a cast's loss and the
per-layer damage read their arrays through here; ``ml_dtypes`` is imported only where a
bfloat16 or float8 array is read.

>>> finite_peak(np.array([0.5, -3.0], np.float16)), finite_peak(np.array([np.nan], np.float32))
(3.0, None)
"""

from __future__ import annotations

import functools
import importlib
import math
from typing import NamedTuple

import numpy as np

from dtype_explorer import dtypes

__all__ = [
    "HalfCounts",
    "finite_peak",
    "half_below_normal",
    "half_counts",
    "half_magnitude",
    "smallest_nonzero",
    "spacing",
    "widened",
]


class HalfCounts(NamedTuple):
    """How many values of a 16-bit float array are zero, subnormal, and inf or NaN
    (:func:`half_counts`)."""

    zeros: int
    subnormals: int
    not_finite: int


def finite_peak(array: np.ndarray, magnitude: np.ndarray | None = None) -> float | None:
    """The largest magnitude in a real float ``array`` when every value is finite, else
    ``None`` (one is inf or NaN). An empty array's peak is ``0.0``.

    An IEEE float of 16, 32 or 64 bits (float16, bfloat16, float32, float64) is read through
    its bits, not as floats (:func:`_top_bits`): with the sign bit cleared, a float's
    magnitude orders as its bits do, and it is inf or NaN exactly where those bits reach the
    exponent's all-ones pattern, so integer reductions answer both, with no temporary array.
    One reduction where no value is negative (a ReLU's output), two where one is (NumPy
    reduces float16 itself ~8x slower than float32, widening a mixed-precision model's
    tensors to float32 first cost an audit more than its forward pass, and a float's maximum
    and minimum are two reductions always). A float8 type is widened to float32 first.

    Args:
        array: a NumPy array of real floats: float16, bfloat16 (``ml_dtypes``), float32,
            float64, or a float8 type.
        magnitude: ``half_magnitude(array)`` of a 16-bit ``array``, where the caller has it
            already (its maximum is the one reduction).

    Returns:
        ``max |array|`` as a Python float, or ``None`` when a value is not finite.

    >>> finite_peak(np.array([1.5, -70000.0], np.float32))
    70000.0
    >>> finite_peak(np.array([1.5, -65504.0], np.float16)), finite_peak(np.array([1.0, np.inf]))
    (65504.0, None)
    >>> finite_peak(np.array([np.nan, 2.0], np.float16)) is None
    True
    """
    if not array.size:
        return 0.0
    top = int(magnitude.max()) if magnitude is not None else _top_bits(array)
    if top is None:  # no IEEE float of 16, 32 or 64 bits in this byte order: widened
        array = widened(array)
        high, low = float(array.max()), float(array.min())
        return max(high, -low) if math.isfinite(high) and math.isfinite(low) else None
    if top >= _exponent_bits(array.dtype.name):
        return None
    return float(np.array(top, _BITS[array.dtype.itemsize][0]).view(array.dtype))


#: The unsigned and signed integer types of each IEEE float's width: its bits.
_BITS = {2: (np.uint16, np.int16), 4: (np.uint32, np.int32), 8: (np.uint64, np.int64)}


def _top_bits(array: np.ndarray) -> int | None:
    """The bits of the largest magnitude in a float16, bfloat16, float32 or float64 ``array``
    (not empty), its sign cleared; ``None`` for any other array (a byte order not the
    machine's included). Read unsigned, a negative value's bits are above every positive
    one's and order as its magnitude does, so their maximum is the largest negative's; where
    there is one, the largest positive's is the maximum read signed (a negative's is below
    zero there).

    >>> _top_bits(np.array([-2.0, 1.0], np.float16)) == int(np.float16(2.0).view(np.uint16))
    True
    """
    dtype = array.dtype
    bits = _BITS.get(dtype.itemsize)
    if bits is None or not dtype.isnative or dtype.name not in dtypes.FAMILIES["float"]:
        return None
    unsigned, signed = bits
    sign = 1 << (8 * dtype.itemsize - 1)
    top = int(array.view(unsigned).max())
    if top >= sign:  # a negative value
        top = max(top - sign, int(array.view(signed).max()))
    return top


def spacing(magnitude: float, dtype: str) -> float | None:
    """The gap between the value of ``dtype`` nearest ``magnitude`` and the next one up: what
    an update must reach (about half of it) to move a value of that size at all, read on the
    bits (the next bit pattern up, for an IEEE float of 8 to 64 bits). ``None`` for a dtype
    that is not such a float, or a magnitude it cannot hold.

    Args:
        magnitude: a positive, finite value.
        dtype: a float dtype's name (``"bfloat16"``, ``"float16"``, ``"float32"``, ...).

    Returns:
        The gap as a Python float, or ``None``.

    >>> spacing(0.1, "bfloat16"), spacing(1.0, "float16"), spacing(1.0, "float32")
    (0.00048828125, 0.0009765625, 1.1920928955078125e-07)
    """
    try:
        with np.errstate(over="ignore"):
            value = np.array(magnitude, dtypes.numpy_dtype(dtype))
    except (TypeError, ValueError):
        return None
    width = {1: np.uint8, **{k: v[0] for k, v in _BITS.items()}}.get(value.dtype.itemsize)
    if width is None or dtype not in dtypes.FAMILIES["float"] or not math.isfinite(magnitude):
        return None
    if not math.isfinite(float(value)) or float(value) < 0:
        return None
    above = (value.reshape(1).view(width) + width(1)).view(value.dtype)[0]
    gap = float(above) - float(value)
    return gap if math.isfinite(gap) else None


def smallest_nonzero(values: np.ndarray) -> float:
    """The smallest nonzero ``|x|`` of a float array whose values are all finite (``inf``:
    none), read on the bits (no float copy, no mask): float16 and bfloat16 through
    :func:`half_magnitude`, float32 and float64 with their sign bit cleared; any other float
    widened.

    Args:
        values: a NumPy array of real floats, every value finite.

    Returns:
        The smallest nonzero magnitude as a Python float, or ``inf`` where every value is
        zero.

    >>> smallest_nonzero(np.array([0.0, -3e-6, 2.0], np.float16)) == float(np.float16(3e-6))
    True
    >>> smallest_nonzero(np.zeros(3, np.float32))
    inf
    >>> smallest_nonzero(np.array(-0.5, np.float16))  # 0-d: a model's scalar output
    0.5
    """
    values = values.reshape(-1)  # a 0-d array's bits would come back as a NumPy scalar
    magnitude = half_magnitude(values)
    if magnitude is None and values.dtype.kind == "f" and values.dtype.isnative:
        bits = _BITS.get(values.dtype.itemsize)
        if bits is not None:
            unsigned = bits[0]
            sign = unsigned(1) << unsigned(8 * values.dtype.itemsize - 1)
            magnitude = values.view(unsigned) & ~sign
    if magnitude is None:
        wide = np.abs(widened(values))
        return float(np.min(wide, where=wide > 0, initial=np.inf))
    np.subtract(magnitude, 1, out=magnitude, casting="unsafe")  # zero wraps to the largest
    least = magnitude.min()
    if least == np.iinfo(magnitude.dtype).max:  # every value zero
        return math.inf
    return float(np.array(least + 1, magnitude.dtype).view(values.dtype))


def widened(array: np.ndarray) -> np.ndarray:
    """A real or complex float ``array`` as NumPy reduces it quickly and exactly: floats of
    fewer than 32 bits (float16, and ``ml_dtypes``' bfloat16 and float8 types, which NumPy
    reduces ~8x slower or not at all) as float32, which holds each of their values; any
    other array as it is.

    Args:
        array: a NumPy array.

    Returns:
        ``array`` itself, or a float32 copy of it.

    >>> widened(np.array([1.5], np.float16)).dtype, widened(np.array([1.5])).dtype
    (dtype('float32'), dtype('float64'))
    """
    if array.dtype.itemsize < 4 or array.dtype.kind not in "fc":
        return array.astype(np.float32)
    return array


def half_counts(array: np.ndarray, magnitude: np.ndarray | None = None) -> HalfCounts | None:
    """How many values of a float16 or bfloat16 ``array`` are zero, subnormal, and inf or
    NaN, counted on their bits (:func:`half_magnitude`); ``None`` for any other array.

    Args:
        array: a NumPy array (float16, or ``ml_dtypes``' bfloat16, in the machine's byte
            order).
        magnitude: ``half_magnitude(array)``, where the caller has it already (one pass
            over the array fewer).

    Returns:
        A :class:`HalfCounts`, or ``None``.

    >>> half_counts(np.array([0.0, -0.0, 1e-6, 1.0, np.inf, np.nan], np.float16))
    HalfCounts(zeros=2, subnormals=1, not_finite=2)
    >>> half_counts(np.ones(2, np.float32)) is None
    True
    """
    if magnitude is None:
        magnitude = half_magnitude(array)
    if magnitude is None:
        return None
    exponent = _exponent_bits(array.dtype.name)
    zeros = int(np.count_nonzero(magnitude == 0))
    below_normal = int(np.count_nonzero(half_below_normal(magnitude, array.dtype.name)))
    return HalfCounts(zeros, below_normal - zeros, int(np.count_nonzero(magnitude >= exponent)))


def half_magnitude(array: np.ndarray) -> np.ndarray | None:
    """The bits of a float16 or bfloat16 ``array`` with the sign cleared (``uint16``), or
    ``None`` for any other array (a byte order not the machine's included: its bits would be
    read swapped).

    Args:
        array: a NumPy array.

    Returns:
        The magnitudes' bits, or ``None``.

    >>> half_magnitude(np.array([-1.0, 65504.0], np.float16)).tolist()
    [15360, 31743]
    """
    dtype = array.dtype
    if dtype.itemsize != 2 or not dtype.isnative or dtype.name not in dtypes.FAMILIES["float"]:
        return None
    return array.view(np.uint16) & np.uint16(0x7FFF)


def half_below_normal(magnitude: np.ndarray, name: str) -> np.ndarray:
    """Where :func:`half_magnitude`'s bits ``magnitude`` of the 16-bit float ``name`` hold a
    zero or a subnormal (the exponent all zeros).

    Args:
        magnitude: what :func:`half_magnitude` returned.
        name: the array's dtype name (``float16`` or ``bfloat16``).

    Returns:
        A bool array of ``magnitude``'s shape.

    >>> half_below_normal(half_magnitude(np.array([0.0, 1e-6, 1.0], np.float16)), "float16")
    array([ True,  True, False])
    """
    exponent = _exponent_bits(name)
    return magnitude < exponent & -exponent


@functools.cache
def _exponent_bits(name: str) -> int:
    """An IEEE float's exponent bits (float16's 10-14, ``0x7C00``; bfloat16's 7-14, ``0x7F80``;
    float32's ``0x7F800000``), from its ``finfo``: with the sign cleared, bits at or above them
    are inf or NaN (the exponent all ones), and a non-zero value below their lowest bit is
    subnormal."""
    kind = dtypes.numpy_dtype(name)
    info = (
        importlib.import_module("ml_dtypes").finfo(kind)
        if name in dtypes.ML_DTYPES
        else np.finfo(kind)
    )
    return ((1 << info.nexp) - 1) << info.nmant
