"""Numerical side effects of a dtype: overflow to inf/NaN, error against a wider reference run,
and wrong numbers in a right dtype (integer wraparound and saturation, truncation of a
fractional result), each named at the first output element that shows it."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run import trace
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.records import HEAD, CastStep, Numerics, OutputValues, ValueFinding

#: Relative error (to the values' scale) against the reference run beyond which the numbers
#: are called wrong: this many ulps of the narrowest float on the path, within the bounds below.
REFERENCE_ULPS = 64
REFERENCE_ERROR_BOUNDS = (1e-3, 0.1)


def reference_dtype(backend: str) -> str:
    """The widest float a backend computes in: float64 on TensorFlow and torch; JAX (x64 off),
    NumPy-backed Keras and OpenVINO (``ops.add`` of two float64 tensors answers float32 there)
    keep float32."""
    return "float64" if backend in ("tensorflow", "torch") else "float32"


def measure(
    outputs: Any,
    samples: list[Any],
    steps: list[CastStep],
    *,
    reference: Callable[[str], Any] | None,
    comparable: tuple[bool, str] = (True, ""),
    integer_reference: bool = True,
    draws: list[str] | None = None,
    backend: str | None = None,
    flatten: Callable[[Any], list[tuple[str, np.ndarray]]] | None = None,
) -> Numerics:
    """Count inf/NaN made from finite input; carry a bounded sample of every output's values;
    run ``reference(dtype)`` (the same computation, same weights, inputs in the widest float)
    when the path narrowed a float (16-bit compute, float64 data computed in float32) or an
    integer went in or came out (``integer_reference``: a target that does arithmetic on it),
    and name the first element where the numbers are wrong. ``comparable``: whether these
    values may be compared with another backend's, and why not. ``draws``: the dtypes of the
    random draws the call made (:func:`recorded_draws`), which ``reference`` replays.
    ``backend`` and ``flatten`` (what ``_arrays`` does, for outputs Keras 3 cannot read): Keras
    2's probe (``_keras2_values``) gives them, and Keras 3 is never imported."""
    if backend is None:
        import keras

        backend = keras.backend.backend()
    to_arrays = flatten or _arrays
    arrays = to_arrays(outputs)
    values = tuple(_values(i, dtype, array) for i, (dtype, array) in enumerate(arrays))
    base = {"outputs": values, "comparable": comparable[0], "comparable_note": comparable[1]}
    out = next((a for d, a in arrays if dtypes.family(d) == "float"), None)
    if out is None:  # else an integer output, else a bool one
        out = next((a for d, a in arrays if dtypes.is_integer(d)), None)
    if out is None:
        out = next((a for d, a in arrays if d == "bool"), None)
    if out is None:
        return Numerics(note="no number output", **base)
    finite_input = all(_finite(s) for s in samples)
    fields: dict[str, Any] = {
        "output_count": int(out.size),
        "nonfinite_from_finite": int(np.sum(~np.isfinite(out))) if finite_input else 0,
        "max_abs_output": float(np.max(np.abs(out[np.isfinite(out)])))
        if np.isfinite(out).any()
        else None,
    }
    notes = [] if finite_input else ["the input itself holds inf/NaN in this dtype"]
    wide = reference_dtype(backend)
    narrowest = min((_float_bits(s.dtype, 99) for s in steps if s.stage != "input"), default=99)
    given_widest = max((_float_bits(s.dtype, 0) for s in steps if s.stage == "input"), default=0)
    narrowed = narrowest == 16 or (given_widest > narrowest and narrowest < 99)
    on_path = any(  # the data, not a variable (a seed's uint32 state)
        dtypes.family(s.dtype) in ("int", "uint", "bool") for s in steps if s.stage != "variables"
    )
    integers = integer_reference and on_path
    findings: list[ValueFinding] = []
    if on_path and not integer_reference and not narrowed:
        notes.append(
            "integers on the path, but the target does no arithmetic on its values (it looks "
            "up, moves or encodes them); no reference run"
        )
    elif reference is None or not (narrowed or integers):
        notes.append("no narrowing or integer on the path; no reference run")
    elif narrowed and not integers and _float_bits(wide, 0) <= narrowest:
        notes.append(f"{backend} computes no wider than {wide}; no reference run")
    else:
        try:
            refs = [a for _, a in to_arrays(reference(wide))]
        except Exception as error:
            notes.append(f"reference run failed: {type(error).__name__}")
        else:
            fields["reference_dtype"] = wide
            matching = next((r for r, (_, a) in zip(refs, arrays) if a is out), None)
            fields["max_rel_error"] = _relative_error(out, matching)
            notes.append(f"max |out - ref| / max |ref| against the same weights in {wide}")
            notes.extend(n for n in (draws_note(draws or [], wide),) if n)
            limit = error_limit(_narrowest(steps))
            for i, ((dtype, array), ref_array) in enumerate(zip(arrays, refs)):
                found = check_values(
                    array,
                    dtype,
                    ref_array,
                    wide,
                    limit=limit,
                    output=i,
                    integer_path=integer_on_path(steps, dtype),
                )
                if found is not None:
                    findings.append(found)
    if finite_input and not any(f.kind != "reference-error" for f in findings):
        findings.extend(_nonfinite(arrays))
    fields["max_abs_integer_input"] = max_abs_integer(samples)
    lost = precision_loss(steps, fields["max_abs_integer_input"])
    if lost is not None and integer_reference and reference is not None:
        findings.append(lost)
    return Numerics(**fields, **base, findings=tuple(findings), note="; ".join(notes))


def precision_loss(steps: Iterable[CastStep], max_abs_integer: float | None) -> ValueFinding | None:
    """Integer data cast to a 16-bit float that cannot hold it: an integer input on the cast
    path, a float16 or bfloat16 step after it (the compute dtype, a variable read, the
    output), and integers larger than that float holds exactly (``dtypes.exact_integers``:
    2048 for float16, 256 for bfloat16), so ids, labels and counts are rounded to others,
    inside any tolerance of the output's dtype. A pure function of the cast steps and the
    integer values' largest magnitude (``Numerics.max_abs_integer_input``).

    >>> steps = [CastStep(stage="input", dtype="int32"), CastStep(stage="output", dtype="float16")]
    >>> precision_loss(steps, 2909.0).value  # float16 spacing is 2 above 2048
    2908.0
    >>> precision_loss(steps, 2048.0) is None
    True
    >>> labels_and_probabilities = [CastStep(stage="input", dtype="int32", index=0),
    ...     CastStep(stage="input", dtype="float16", index=1),
    ...     CastStep(stage="autocast", dtype="float32", index=0),
    ...     CastStep(stage="output", dtype="float16", index=0)]
    >>> precision_loss(labels_and_probabilities, 2049.0) is None  # labels stay integers
    True
    """
    steps = list(steps)
    start = next((s for s in steps if s.stage == "input" and dtypes.is_integer(s.dtype)), None)
    if max_abs_integer is None or start is None:
        return None
    given = start.dtype
    halves = (s.dtype for s in _carrying(steps, start) if _float_bits(s.dtype, 0) == 16)
    for half in dict.fromkeys(halves):
        limit = dtypes.exact_integers(half) or 0
        if max_abs_integer > limit:
            rounded = float(np.asarray(max_abs_integer).astype(dtypes.numpy_dtype(half)))
            return ValueFinding(
                kind="precision-loss",
                value=rounded,
                expected=max_abs_integer,
                message=(
                    f"{given} values up to {_num(max_abs_integer)} meet {half}, which holds "
                    f"integers exactly only up to {limit}: {_num(max_abs_integer)} becomes "
                    f"{_num(rounded)} (an id or a label rounded to another)"
                ),
            )
    return None


def _carrying(steps: list[CastStep], start: CastStep) -> list[CastStep]:
    """The steps that carried the integer input ``start``: its own later stages (same
    ``index``), and, when it is the call's only input, the variables it met and the output it
    became. Another input's 16-bit float (a loss's float16 probabilities beside int32 labels)
    never carried it."""
    inputs = {s.index for s in steps if s.stage == "input"}
    own = [
        s
        for s in steps
        if s.stage not in ("input", "variables", "output") and s.index == start.index
    ]
    if len(inputs) > 1:
        return own
    return own + [s for s in steps if s.stage in ("variables", "output")]


def max_abs_integer(samples: list[Any]) -> float | None:
    """The largest magnitude among the integer arrays of ``samples`` (``None``: none)."""
    peaks = [
        float(np.max(np.abs(s.astype(np.float64))))
        for s in samples
        if isinstance(s, np.ndarray) and s.size and dtypes.is_integer(dtypes.describe(s))
    ]
    return max(peaks, default=None)


def error_limit(dtype: str) -> float:
    """The relative error against the reference run beyond which numbers computed in ``dtype``
    are wrong rather than rounded: :data:`REFERENCE_ULPS` ulps, within
    :data:`REFERENCE_ERROR_BOUNDS`.

    >>> error_limit("float16"), error_limit("float32")
    (0.0625, 0.001)
    """
    ulp = dtypes.tolerance(dtype) / dtypes.TOLERANCE_ULPS
    low, high = REFERENCE_ERROR_BOUNDS
    return min(max(REFERENCE_ULPS * ulp, low), high)


def integer_on_path(steps: Iterable[CastStep], dtype: str) -> bool:
    """Whether an integer dtype carried the data: the output's ``dtype``, or a step of the
    cast path other than a variable (a seed's uint32 state carries no data).

    >>> integer_on_path([CastStep(stage="input", dtype="float16")], "float16")
    False
    >>> integer_on_path([CastStep(stage="input", dtype="int32")], "float32")
    True
    """
    return dtypes.is_integer(dtype) or any(
        dtypes.is_integer(s.dtype) for s in steps if s.stage != "variables"
    )


def check_values(
    out: np.ndarray,
    dtype: str,
    ref: np.ndarray,
    ref_dtype: str,
    *,
    limit: float,
    output: int = 0,
    integer_path: bool = True,
) -> ValueFinding | None:
    """The first element where ``out`` (of ``dtype``) is wrong against ``ref``.

    Args:
        out: the call's values (as float64).
        dtype: their dtype.
        ref: the same computation's values in ``ref_dtype``.
        ref_dtype: the reference's dtype.
        limit: the relative error (to the values' scale) beyond which a number is wrong.
        output: which output ``out`` is.
        integer_path: whether an integer dtype carried the data (:func:`integer_on_path`):
            only then are whole-number results named truncation; a float-only path whose
            values happen to be whole (torch's float16 log clamped at -100 gives a loss of
            100) is off from the reference, not truncated.

    Returns:
        A wraparound or saturation at an integer's range, a truncation to an integer, or an
        error beyond ``limit`` of the values' scale; ``None`` when the numbers hold.
    """
    if ref is None or out.shape != ref.shape or out.size == 0:
        return None
    with np.errstate(all="ignore"):  # inf - inf where both overflowed: masked out below
        return _first_wrong(
            out, dtype, ref, ref_dtype, limit=limit, output=output, integer_path=integer_path
        )


def _first_wrong(
    out: np.ndarray,
    dtype: str,
    ref: np.ndarray,
    ref_dtype: str,
    *,
    limit: float,
    output: int,
    integer_path: bool,
) -> ValueFinding | None:
    both = np.isfinite(out) & np.isfinite(ref)
    if not both.any():
        return None

    def finding(kind: Any, k: int, message: str) -> ValueFinding:
        index = tuple(int(i) for i in np.unravel_index(k, out.shape)) if out.shape else ()
        return ValueFinding(
            kind=kind,
            output=output,
            element=index,
            value=_plain(out.flat[k]),
            expected=_plain(ref.flat[k]),
            reference_dtype=ref_dtype,
            message=message,
        )

    if dtype == "bool":
        return _bool_wrong(out, ref, ref_dtype, both & (np.abs(out - ref) > limit), finding)
    bounds = dtypes.int_range(dtype)
    if bounds is not None:
        lo, hi = bounds
        outside = both & ((ref < lo) | (ref > hi))
        if outside.any():
            k = int(np.flatnonzero(outside.ravel())[0])
            want, got = float(ref.flat[k]), float(out.flat[k])
            span = hi - lo + 1
            if got == (np.floor(want) - lo) % span + lo or got == (np.trunc(want) - lo) % span + lo:
                kind, how = "wraparound", "wraps around"
            elif got == min(max(want, lo), hi):
                kind, how = "saturation", f"saturates at {lo if want < lo else hi}"
            else:
                kind, how = "reference-error", "cannot hold it"
            return finding(
                kind,
                k,
                f"{_num(got)} where the same computation in {ref_dtype} gives {_num(want)}: "
                f"{dtype} holds {lo}..{hi} and {how}",
            )
    fractional = both & (np.abs(ref - np.round(ref)) > 1e-6 * np.maximum(1.0, np.abs(ref)))
    integral = integer_path and bool(
        np.all(out[np.isfinite(out)] == np.round(out[np.isfinite(out)]))
    )
    scale = float(np.max(np.abs(ref[both]))) or 1.0
    wrong = both & (np.abs(out - ref) > limit * scale)
    if not wrong.any():
        return None
    k = int(np.flatnonzero(wrong.ravel())[0])
    if integral and (fractional & wrong).any():
        k = int(np.flatnonzero((fractional & wrong).ravel())[0])
        return finding(
            "truncation",
            k,
            f"{_num(out.flat[k])} where {_num(ref.flat[k])} in {ref_dtype}: every value came out "
            f"a whole number in {dtype}, the fractional part was lost (an integer dtype on the "
            "way)",
        )
    error = float(np.max(np.abs(out[both] - ref[both]))) / scale
    return finding(
        "reference-error",
        k,
        f"{_num(out.flat[k])} where {_num(ref.flat[k])} in {ref_dtype}: error {error:.2g} of the "
        f"values' scale, beyond {limit:.2g}",
    )


def _bool_wrong(
    out: np.ndarray,
    ref: np.ndarray,
    ref_dtype: str,
    wrong: np.ndarray,
    finding: Callable[[Any, int, str], ValueFinding],
) -> ValueFinding | None:
    """A bool output whose numbers differ from the same computation in ``ref_dtype`` (Keras
    casts ``ops.rms_normalization``'s result back to its bool input's dtype): a bool holds
    only 0 and 1, so the values computed are lost."""
    if not wrong.any():
        return None
    k = int(np.flatnonzero(wrong.ravel())[0])
    return finding(
        "reference-error",
        k,
        f"{_num(out.flat[k])} where the same computation in {ref_dtype} gives "
        f"{_num(ref.flat[k])}: a bool holds only 0 and 1 (False, True), so the values "
        "computed are lost",
    )


def _nonfinite(arrays: list[tuple[str, np.ndarray]]) -> list[ValueFinding]:
    for i, (dtype, array) in enumerate(arrays):
        bad = ~np.isfinite(array)
        if bad.any():
            k = int(np.flatnonzero(bad.ravel())[0])
            index = tuple(int(j) for j in np.unravel_index(k, array.shape)) if array.shape else ()
            return [
                ValueFinding(
                    kind="nonfinite",
                    output=i,
                    element=index,
                    value=_plain(array.flat[k]),
                    message=f"{_num(array.flat[k])} in {dtype} from finite input",
                )
            ]
    return []


def _arrays(outputs: Any) -> list[tuple[str, np.ndarray]]:
    """Every numeric tensor among ``outputs``: its dtype and its values as float64 (complex:
    the real part; bool: 0 and 1)."""
    import keras

    found = []
    for tensor in keras.tree.flatten(outputs):
        if not hasattr(tensor, "dtype") or not hasattr(tensor, "shape"):
            continue
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        if dtype == "string":
            continue
        # (Keras's own conversion raises on TensorFlow's 0-d bfloat16 tensors: a loss, a sum)
        array = numpy_values(tensor)
        if dtypes.family(dtype) == "complex":
            array = array.real
        found.append((dtype, array.astype(np.float64)))
    return found


def _values(index: int, dtype: str, array: np.ndarray) -> OutputValues:
    flat = array.ravel()
    head = flat[:HEAD]
    finite = np.isfinite(flat)
    return OutputValues(
        index=index,
        dtype=dtype,
        shape=tuple(int(d) for d in array.shape),
        head=tuple(float(x) if np.isfinite(x) else None for x in head),
        nonfinite=int(flat.size - np.count_nonzero(finite)),
        abs_sum=float(np.sum(np.abs(flat[finite]))) if flat.size else None,
    )


def _plain(x: Any) -> float | str:
    x = float(x)
    return x if np.isfinite(x) else str(x)


def _num(x: Any) -> str:
    return f"{float(x):.6g}"


def _narrowest(steps: list[CastStep]) -> str:
    """The narrowest float the path computed in (``float32`` when none)."""
    floats = [s.dtype for s in steps if s.stage != "input" and _float_bits(s.dtype, 0)]
    return min(floats, key=lambda d: (_float_bits(d, 99), -dtypes.tolerance(d)), default="float32")


def _float_bits(dtype: str, default: int) -> int:
    """The bits of a float16/bfloat16/float32/float64 dtype (float8, which Keras only stores,
    never computes in, and any other dtype: ``default``)."""
    return (dtypes.bits(dtype) or default) if dtypes.family(dtype) == "float" else default


def _finite(sample: Any) -> bool:
    try:
        array = np.asarray(sample)
        if array.dtype.kind == "c":  # complex: both parts (float64 would drop the imaginary)
            return bool(np.all(np.isfinite(array)))
        return bool(np.all(np.isfinite(array.astype(np.float64))))
    except (TypeError, ValueError):
        return True


def _relative_error(out: np.ndarray, ref: np.ndarray | None) -> float | None:
    if ref is None or ref.shape != out.shape:
        return None
    mask = np.isfinite(out) & np.isfinite(ref)
    if not mask.any():
        return None
    scale = float(np.max(np.abs(ref[mask]))) or 1.0
    return float(np.max(np.abs(out[mask] - ref[mask])) / scale)


# ------------------------------------------------------------------------ random draws

#: The functions of Keras's backend ``random`` module that draw numbers; every layer that
#: draws (Dropout, GaussianNoise, the augmentation layers, ...) reaches one of them.
DRAWS = (
    "normal",
    "uniform",
    "truncated_normal",
    "categorical",
    "randint",
    "gamma",
    "binomial",
    "beta",
    "dropout",
)


@contextlib.contextmanager
def _wrapped_draws(wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """Keras's backend random functions replaced by ``wrap(name, original)`` for the block.
    Only the outermost draw is seen: a backend's ``dropout`` that calls its ``uniform``
    counts once."""
    from keras.src import backend

    module = backend.random
    # a worker's op trace keeps its wrappers in place: patch what they wrap, and bind the
    # patch wrapped as they are (the trace sees the draw as it does when it opens after this)
    bound = {n: getattr(module, n) for n in DRAWS if callable(getattr(module, n, None))}
    originals = {n: trace.unwrapped(f) for n, f in bound.items()}
    depth = [0]

    def guarded(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        wrapped = wrap(name, original)

        @functools.wraps(original)  # the op trace names it (and wraps it) as the original
        def draw(*args: Any, **kwargs: Any) -> Any:
            if depth[0]:
                return original(*args, **kwargs)
            depth[0] += 1
            try:
                return wrapped(*args, **kwargs)
            finally:
                depth[0] -= 1

        return draw

    try:
        for name, original in originals.items():
            setattr(module, name, trace.wrapped_like(bound[name], guarded(name, original)))
        yield
    finally:
        for name, binding in bound.items():
            setattr(module, name, binding)


def recorded_draws(log: list[str]) -> contextlib.AbstractContextManager[None]:
    """Record, in ``log``, the dtype of every random draw made in the block (``dropout``: of
    the tensor it masks), so that a reference run can draw the same numbers
    (:func:`replayed_draws`).

    >>> import keras
    >>> log = []
    >>> with recorded_draws(log):
    ...     _ = keras.random.normal((2,), dtype="float16", seed=1)
    >>> log
    ['float16']
    """
    import keras

    def wrap(_name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def draw(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            log.append(keras.backend.standardize_dtype(out.dtype))
            return out

        return draw

    return _wrapped_draws(wrap)


def replayed_draws(log: list[str]) -> contextlib.AbstractContextManager[None]:
    """Each random draw in the block made in the dtype ``log`` recorded for the same draw of
    the probed call, then cast to the dtype asked: with the same seed state, the reference
    run gets the very numbers the probed call drew (a draw's numbers depend on its dtype:
    noise drawn in float64 is not the bfloat16 noise widened). ``dropout`` draws its mask on
    ones of the recorded dtype and applies it to its input. Draws past the log are left
    alone."""
    import keras
    from keras import ops

    replay = iter(log)

    def wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def draw(*args: Any, **kwargs: Any) -> Any:
            drawn = next(replay, None)
            bound = signature.bind(*args, **kwargs)
            if name == "dropout":
                inputs = bound.arguments["inputs"]
                if drawn is None or keras.backend.standardize_dtype(inputs.dtype) == drawn:
                    return original(*args, **kwargs)
                ones = ops.ones(ops.shape(inputs), dtype=drawn)
                mask = original(**{**bound.arguments, "inputs": ones})
                return inputs * ops.cast(mask, inputs.dtype)
            asked = keras.backend.standardize_dtype(
                bound.arguments.get("dtype") or signature.parameters["dtype"].default
            )
            if drawn is None or drawn == asked:
                return original(*args, **kwargs)
            return ops.cast(original(**{**bound.arguments, "dtype": drawn}), asked)

        return draw

    return _wrapped_draws(wrap)


def draws_note(log: list[str], wide: str) -> str:
    """What the reference did with the probed call's random draws, in words."""
    if not log:
        return ""
    drawn = ", ".join(dict.fromkeys(log))
    return (
        f"{len(log)} random draw(s) replayed: the reference drew the same numbers as the call "
        f"(same seed state, drawn in {drawn}, then widened to {wide})"
    )


# --------------------------------------------------------------------------- a model's layers


def worth_value_check(received: Iterable[Any]) -> bool:
    """A call that does arithmetic on integer tensors (``received``: its ``TensorInfo``s): where
    numbers wrap around, saturate or are truncated while the dtypes look right.

    >>> from dtype_explorer.records import TensorInfo
    >>> worth_value_check([TensorInfo(dtype="uint8", shape=(2,))])
    True
    """
    return any(dtypes.family(t.dtype) in ("int", "uint") for t in received)
