"""What a dtype-changing step lost, measured: the values before it and after it compared
(``records.CastLoss``). The arrays are what Keras held on each side of the step (read with
``keras.ops.convert_to_numpy``); nothing here re-implements a cast.

>>> import numpy as np, ml_dtypes
>>> ids = np.array([[19999, 2049, 5]])
>>> loss = cast_loss(ids, ids.astype(np.float16), step="keras-input", where="input 0")
>>> loss.cause, loss.rounded, loss.examples, loss.first_index
('rounding', 2, ((19999.0, 20000.0), (2049.0, 2048.0)), (0, 0))
>>> cast_loss(np.array([1.0, 7e4]), np.array([1.0, 7e4]).astype(np.float16),
...           step="autocast", where="input 0").overflowed
1
>>> cast_loss(np.array([1, 2]), np.array([1, 2], np.float16), step="autocast", where="x") is None
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from dtype_explorer import dtypes, float_bits
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.records import MAX_EXAMPLES, CastLoss


def cast_loss(
    before: Any, after: Any, *, step: str, where: str, source: str = "", target: str = ""
) -> CastLoss | None:
    """The values a step lost between ``before`` and ``after`` (same shape), or ``None``
    when it kept them all (a float narrowed keeps non-integers only to its precision: that
    rounding is the dtype's tolerance, not a loss counted here).

    Args:
        before: the values entering the step (a NumPy array).
        after: the values leaving it (a NumPy array, same shape).
        step: which step (``records.CastStepKind``).
        where: which tensor (``input 0``, a variable's name).
        source: ``before``'s dtype name (default: described from the array).
        target: ``after``'s dtype name (default: described from the array).

    Returns:
        A ``CastLoss`` with the counts of the worst cause first, or ``None``.
    """
    before, after = np.asarray(before), np.asarray(after)
    source = source or dtypes.describe(before)
    target = target or dtypes.describe(after)
    if before.shape != after.shape or not before.size or source == target:
        return None
    masks = _masks(before, after, source, target)
    counts = {name: 0 if m is None else int(np.count_nonzero(m)) for name, m in masks.items()}
    if not any(counts.values()):
        return None
    worst = next(masks[name] for name, count in counts.items() if count)
    flat = np.flatnonzero(worst.reshape(-1))
    first = tuple(int(i) for i in np.unravel_index(int(flat[0]), worst.shape))
    shown = flat[:MAX_EXAMPLES]  # only these are widened (not the whole arrays)
    wide_b, wide_a = _wide(before.reshape(-1)[shown]), _wide(after.reshape(-1)[shown])
    examples = tuple((float(b), float(a)) for b, a in zip(wide_b, wide_a, strict=True))
    return CastLoss(
        step=step,
        where=where,
        source=source,
        target=target,
        count=int(before.size),
        first_index=first,
        examples=examples,
        **counts,
    )


def _masks(before: np.ndarray, after: np.ndarray, source: str, target: str) -> dict:
    """The elements of each cause (``None``: none), in ``records.CastLoss``'s order of
    severity: from the counts of a 16-bit float's bits where they settle it
    (:func:`_half_masks`), else element by element (:func:`_element_masks`)."""
    if before.dtype.kind == "f" and dtypes.family(source) == "float":
        masks = _half_masks(before, after, source)
        if masks is not None:
            return masks
    return _element_masks(before, after, source, target)


def _no_masks() -> dict:
    """Every cause with no element (``None``, never counted), in ``records.CastLoss``'s order of
    severity: a cause found is given its mask."""
    return dict.fromkeys(
        ("overflowed", "wrapped", "saturated", "rounded", "underflowed", "subnormal")
    )


def _half_masks(before: np.ndarray, after: np.ndarray, source: str) -> dict | None:
    """The masks of a float narrowed to a 16-bit float (most casts of a mixed-precision model:
    its activations and weights cast to float16 or bfloat16), found on ``after``'s bits where
    they allow, without comparing every element as floats:

    - overflowed: none where no value is inf or NaN after the cast (``None`` otherwise: the
      element-wise compare tells overflow from an inf given, and a saturating cast's
      finite values from the inf it was given);
    - underflowed: none where there are as many zeros after as before (a zero stays zero;
      no zero after at all needs no count before), else the values that became zero;
    - rounded: only the values beyond the last integer the target holds exactly can be
      integers rounded, and only those are compared; none where even the largest value after
      the cast is below that integer (a larger one before would have rounded to it or above);
    - subnormal: the values whose bits became subnormal, where there are any, each looked up
      before the cast by its index.

    Each pass over the arrays is taken only where the one before it leaves the answer open
    (a cast of a model's activations: its bits' largest and the count of bits below normal,
    then the zeros and subnormals among those only where there are such bits).

    Returns ``None`` where it cannot decide (``after`` no 16-bit float in this machine's
    byte order, too): :func:`_element_masks` then counts them all."""
    magnitude = float_bits.half_magnitude(after)
    if magnitude is None:
        return None
    target = after.dtype.name  # float16 or bfloat16: half_magnitude says so
    exact = dtypes.exact_integers(target)
    top = float_bits.finite_peak(after, magnitude)
    if top is None or exact is None:
        return None  # an inf or NaN on either side (a saturating cast too): compare them all
    masks = _no_masks()
    below = float_bits.half_below_normal(magnitude, target)  # zero or subnormal after the cast
    if below.any():
        zero = magnitude == 0
        zeros = int(np.count_nonzero(zero))
        if zeros and zeros != np.count_nonzero(before == 0):  # (an inf or NaN given: none)
            masks["underflowed"] = zero & (before != 0) & np.isfinite(before)
        if zeros < np.count_nonzero(below):  # subnormal bits: looked up by their index
            became = np.flatnonzero(below & ~zero)
            _, source_tiny = dtypes.float_limits(source)
            given = np.abs(before.reshape(-1)[became])
            kept = became[(given >= source_tiny) & np.isfinite(given)]
            subnormal = np.zeros(before.size, bool)
            subnormal[kept] = True
            masks["subnormal"] = subnormal.reshape(before.shape)
    if top >= exact:  # integers beyond what the target holds may be there: the peak before
        peak = float_bits.finite_peak(before)
        if peak is None:
            return None
        if peak > exact:
            masks["rounded"] = _rounded_beyond(before, after, exact)
    return masks


def _rounded_beyond(before: np.ndarray, after: np.ndarray, exact: int) -> np.ndarray:
    """The integers beyond ``exact`` in ``before`` that the cast changed (compared on those
    values only)."""
    flat = before.reshape(-1)
    beyond = np.flatnonzero(np.abs(flat) > exact)
    rounded = np.zeros(flat.shape, bool)
    if beyond.size:
        b = _wide(flat[beyond])
        a = _wide(after.reshape(-1)[beyond])
        rounded[beyond[(b == np.round(b)) & (a != b)]] = True
    return rounded.reshape(before.shape)


def _element_masks(before: np.ndarray, after: np.ndarray, source: str, target: str) -> dict:
    """The elements of each cause, compared element by element."""
    b, a = _pair(before, after)
    masks = _no_masks()
    finite_b = np.isfinite(b)
    if dtypes.family(target) == "float":
        finite_a = np.isfinite(a)
        masks["overflowed"] = finite_b & ~finite_a
        integral = finite_b & (b == np.round(b))
        masks["rounded"] = integral & finite_a & (a != b)
        if dtypes.family(source) == "float":
            _, tiny = dtypes.float_limits(target)
            _, source_tiny = dtypes.float_limits(source)
            masks["underflowed"] = finite_b & (b != 0) & (a == 0) & ~masks["rounded"]
            normal_before = np.abs(b) >= source_tiny
            masks["subnormal"] = normal_before & (a != 0) & (np.abs(a) < tiny)
            masks["rounded"] &= ~masks["underflowed"]
    elif dtypes.is_integer(target):
        low, high = dtypes.int_range(target) or (-np.inf, np.inf)
        outside = finite_b & ((b < low) | (b > high))
        at_bound = a == np.clip(b, low, high)  # clipped to the bound on its own side
        masks["saturated"] = outside & at_bound
        masks["wrapped"] = outside & ~at_bound
    return masks


def _pair(before: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``before`` and ``after`` in one dtype that holds both exactly: float32 where both are
    floats of at most 32 bits (a float32 kernel read as float16: half the memory and time of
    float64), else float64 (:func:`_wide`)."""
    floats = [a.dtype.kind == "f" or dtypes.family(dtypes.describe(a)) == "float" for a in
              (before, after)]  # fmt: skip
    if all(floats) and before.dtype.itemsize <= 4 and after.dtype.itemsize <= 4:
        return before.astype(np.float32, copy=False), after.astype(np.float32, copy=False)
    return _wide(before), _wide(after)


def _wide(array: np.ndarray) -> np.ndarray:
    """``array`` as float64 (exact for integers up to 2**53, every 16-bit float, float32)."""
    if array.dtype.kind in "biuf" or dtypes.family(dtypes.describe(array)) == "float":
        return array.astype(np.float64)
    return np.zeros(array.shape)


def call_losses(given: list[Any] | None, received: list[Any], entry: tuple[str, ...]) -> list:
    """The losses of a layer call's own steps: each tensor autocast between what
    ``__call__`` was ``given`` and what ``call`` ``received``, and (a functional model) each
    input converted to its ``keras.Input`` dtype ``entry`` by Keras's own
    ``ops.convert_to_tensor(x, dtype=...)``, as ``Functional`` does. Only tensors whose
    dtype changes are read; a structure that does not line up is skipped.

    Args:
        given: the flat tensors ``__call__`` was handed (``None``: not seen).
        received: the flat tensors ``call`` got.
        entry: the ``keras.Input`` dtypes of a functional model (else empty).

    Returns:
        A list of ``CastLoss`` records, one per tensor that lost values.
    """
    import keras

    found = []
    if given is not None and len(given) == len(received):
        for i, (g, r) in enumerate(zip(given, received, strict=True)):
            if _is_tensor(g) and _is_tensor(r) and dtypes.describe(g) != dtypes.describe(r):
                found.append(
                    cast_loss(numpy_values(g), numpy_values(r), step="autocast", where=f"input {i}")
                )
    if entry and len(entry) == len(received):
        for i, (r, dtype) in enumerate(zip(received, entry, strict=True)):
            if _is_tensor(r) and dtypes.describe(r) != dtype:
                try:
                    after = keras.ops.convert_to_tensor(r, dtype=dtype)
                except Exception:  # Keras refuses the conversion: the call itself says so
                    continue
                found.append(
                    cast_loss(
                        numpy_values(r), numpy_values(after), step="keras-input", where=f"input {i}"
                    )
                )
    return [f for f in found if f is not None]


def read_losses(steps: Iterable[Any]) -> list:
    """The variable reads a layer call's ops made in another dtype that lost values (a
    float32 kernel read as float16 under a mixed policy: weights beyond 65504 became inf),
    as the op trace measured them at the op that read each one (``TraceStep.losses``, a
    step ``variable-read``); each variable once, the first read of it. Also each creation op
    of the call that made a 16-bit array from numbers it cannot hold (step ``creation``:
    ``ops.arange(n, dtype=self.compute_dtype)`` under ``mixed_float16``).

    Args:
        steps: the call's op trace (``TraceStep`` records; their children are looked at too).

    Returns:
        A list of ``CastLoss`` records: one per variable whose read lost values, one per
        creation op that lost some.
    """
    found: dict[tuple[str, ...], Any] = {}
    for step in steps:
        for s in (step, *step.children):
            for loss in s.losses:
                if loss.step == "variable-read":
                    found.setdefault((loss.where, loss.source, loss.target), loss)
                elif loss.step == "creation":  # each op's own (``ops.arange`` in float16)
                    found.setdefault((s.op, str(s.source), loss.text()), loss)
    return list(found.values())


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "dtype") and hasattr(x, "shape")
