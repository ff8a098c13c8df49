"""What one dtype-changing step did to the values it carried (``CastLoss``): measured by
comparing the values before and after the step (``keras_run.cast_loss``), and worded here,
once, for every view.

A step is a place where a dtype changes: the conversion of a model's input to its
``keras.Input`` dtype, an autocast on entry to a layer, a variable read in the compute dtype,
an ``ops.cast``. Each count is of values that step lost, never of what a later step did:

* ``rounded``: integers (integer dtype, or integer-valued floats) that no longer round-trip:
  ``19999 -> 20000`` in float16, which holds integers exactly only up to 2048;
* ``overflowed``: finite values that became inf; ``underflowed``: non-zero values that became
  zero; ``subnormal``: normal values that became subnormal (precision lost gradually);
* ``wrapped`` and ``saturated``: integers outside the target integer's range, taken modulo
  its width or clipped to its bounds (``int64 -> int32``).

>>> loss = CastLoss(step="keras-input", where="input 0", source="int64", target="float16",
...                 count=3, rounded=2, first_index=(0, 0), examples=((19999, 20000), (2049, 2048)))
>>> loss.cause, loss.text()
('rounding', 'int64 -> float16: 2 of 3 integers rounded (19999 -> 20000, 2049 -> 2048; \
float16 holds integers exactly only up to 2048), first at [0, 0]')

Every cause the values met is said, the worst with its examples:

>>> CastLoss(step="keras-input", where="input 0", source="int64", target="float16", count=3,
...          overflowed=1, rounded=1, first_index=(0, 0), examples=((70000, float("inf")),)).text()
'int64 -> float16: 1 of 3 finite values overflowed to inf (70000 -> inf; float16 holds at \
most 65504), first at [0, 0]; also 1 of 3 integers rounded (float16 holds integers exactly only \
up to 2048)'
"""

from __future__ import annotations

from typing import Literal

from dtype_explorer import dtypes
from dtype_explorer.records._base import Record

#: The steps that change a dtype: a model input converted to its ``keras.Input`` dtype, an
#: autocast on entry to a layer, a variable read in another dtype, an ``ops.cast``, a Python
#: number an op converted to a tensor before computing (``operand``: torch's backend makes a
#: Python float a ``floatx`` tensor, also for an op on float64), an array a creation op made
#: in its ``dtype=`` from the numbers asked (``creation``: ``arange(3000, dtype="float16")``).
CastStepKind = Literal["keras-input", "autocast", "variable-read", "cast", "operand", "creation"]
#: What a step lost, the worst first (:attr:`CastLoss.cause`).
Cause = Literal["overflow", "wrap", "saturation", "rounding", "underflow", "subnormal"]
#: Which counts name which cause, in :data:`Cause`'s order.
_CAUSES: tuple[tuple[str, Cause], ...] = (
    ("overflowed", "overflow"),
    ("wrapped", "wrap"),
    ("saturated", "saturation"),
    ("rounded", "rounding"),
    ("underflowed", "underflow"),
    ("subnormal", "subnormal"),
)
#: The count field of each cause (:data:`_CAUSES` read the other way).
_FIELDS: dict[Cause, str] = {cause: field for field, cause in _CAUSES}
#: What each cause did to the values, in a count's words (:meth:`CastLoss.text`).
_CAUSE_WORDS: dict[Cause, str] = {
    "rounding": "integers rounded",
    "overflow": "finite values overflowed to inf",
    "underflow": "non-zero values underflowed to zero",
    "subnormal": "values became subnormal",
    "wrap": "integers wrapped around",
    "saturation": "integers saturated at the bounds",
}
#: How many value pairs a record keeps (``examples``).
MAX_EXAMPLES = 4


class CastLoss(Record):
    """The values one dtype-changing step lost, in numbers (see the module docstring)."""

    step: CastStepKind
    #: Which tensor: ``input 0``, a variable's name, an op's argument.
    where: str
    source: str
    target: str
    #: How many values were compared.
    count: int
    rounded: int = 0
    overflowed: int = 0
    underflowed: int = 0
    subnormal: int = 0
    wrapped: int = 0
    saturated: int = 0
    #: The first element (row-major) that changed, of the worst cause.
    first_index: tuple[int, ...] = ()
    #: ``(before, after)`` pairs of that cause, the first ones in row-major order.
    examples: tuple[tuple[float, float], ...] = ()

    @property
    def lost(self) -> int:
        """How many values the step changed beyond rounding of non-integers."""
        return sum(getattr(self, field) for field, _ in _CAUSES)

    @property
    def cause(self) -> Cause | None:
        """The worst thing the step did (overflow before rounding); ``None``: nothing."""
        return next(iter(self.causes), None)

    @property
    def causes(self) -> tuple[Cause, ...]:
        """Every cause the step's values met, the worst first (:attr:`cause` is the first)."""
        return tuple(cause for field, cause in _CAUSES if getattr(self, field))

    def text(self) -> str:
        """One line: the step's dtypes, the counts of its worst cause with examples and the
        first index, then the count of each other cause (``19999 -> 20000`` beside
        ``70000 -> inf``: ids that overflowed and ids that rounded are both said)."""
        head = f"{self.source} -> {self.target}: "
        causes = self.causes
        if not causes:
            return head + f"all {self.count} values kept"
        shown = ", ".join(f"{_num(b)} -> {_num(a)}" for b, a in self.examples)
        inner = "; ".join(p for p in (shown, _why(causes[0], self.target)) if p)
        at = f", first at [{', '.join(map(str, self.first_index))}]" if self.first_index else ""
        text = head + self._counted(causes[0]) + (f" ({inner})" if inner else "") + at
        for cause in causes[1:]:
            why = _why(cause, self.target)
            text += f"; also {self._counted(cause)}" + (f" ({why})" if why else "")
        return text

    def _counted(self, cause: Cause) -> str:
        """``2 of 3 integers rounded``: how many values ``cause`` took, of those compared."""
        n = getattr(self, _FIELDS[cause])
        return f"{n} of {self.count} {_CAUSE_WORDS[cause]}"


def _why(cause: str, target: str) -> str:
    """The property of ``target`` that explains ``cause``."""
    if cause == "rounding":
        limit = dtypes.exact_integers(target)
        return f"{target} holds integers exactly only up to {limit}" if limit else ""
    if cause in ("overflow", "underflow", "subnormal") and dtypes.family(target) == "float":
        big, tiny = dtypes.float_limits(target)
        if cause == "overflow":
            return f"{target} holds at most {_num(big)}"
        if cause == "underflow":  # zero below half the smallest subnormal (or, where a
            # backend flushes subnormals, below the smallest normal)
            sub = dtypes.smallest_subnormal(target)
            return f"{target}'s smallest normal is {tiny:.3g}, its smallest subnormal {sub:.3g}"
        return f"{target}'s smallest normal is {tiny:.3g}"
    bounds = dtypes.int_range(target)
    return f"{target} holds {bounds[0]}..{bounds[1]}" if bounds else ""


def _num(value: float) -> str:
    """An integer-valued number without its ``.0``; others in ``g`` form."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class LayerDamage(Record):
    """One layer output against the same model run in a wider ``reference`` dtype
    (``check_model``'s per-layer reference): the error, and the output's headroom.

    ``rel_rms``: ``rms(out - ref) / rms(ref)``; ``sqnr_db``: ``10 log10(sum ref^2 / sum
    (out - ref)^2)`` (``None`` when they are equal); ``max_abs_error``: ``max |out - ref|``;
    ``amax``: ``max |out|`` of the finite values; ``top_bits``: ``log2(largest finite /
    amax)``, the headroom before overflow; ``bottom_bits``: ``log2(smallest non-zero |out| /
    smallest normal)``, negative once values are subnormal. ``reference_amax`` and
    ``reference_input_amax``: ``max |x|`` of the finite values of this output and of the
    call's float inputs in the reference run (what the layer would hold and receive with no
    overflow upstream: the audit chooses the layers to keep in float32 from them).
    ``nonfinite``: inf/NaN among the output's values; ``compared``: how many values are
    finite in both, the ones the error is measured on (``None``: not counted).

    >>> d = LayerDamage(path="m/d", layer_class="Dense", dtype="float16", reference="float32",
    ...                 rel_rms=0.001, sqnr_db=60.0, max_abs_error=0.01, amax=8.0,
    ...                 top_bits=12.9, bottom_bits=14.0)
    >>> d.text()
    'm/d (Dense, float16): rel RMS 0.001, SQNR 60.0 dB, max |err| 0.01, amax 8, headroom 12.9 \
bits to the largest finite, its smallest non-zero value 14.0 bits above the smallest normal'
    """

    path: str
    layer_class: str
    call_index: int = 0
    output: int = 0
    dtype: str
    reference: str
    rel_rms: float
    sqnr_db: float | None = None
    max_abs_error: float
    amax: float | None = None
    top_bits: float | None = None
    bottom_bits: float | None = None
    nonfinite: int = 0
    compared: int | None = None
    reference_amax: float | None = None
    reference_input_amax: float | None = None

    def text(self) -> str:
        """One line: where, the error, the headroom."""
        sqnr = "exact" if self.sqnr_db is None else f"{self.sqnr_db:.1f} dB"
        room = ""
        if self.top_bits is not None:
            room = f", headroom {self.top_bits:.1f} bits to the largest finite"
        if self.bottom_bits is not None:  # of the smallest non-zero value, not of amax
            b = self.bottom_bits
            room += f", its smallest non-zero value {abs(b):.1f} bits " + (
                "above the smallest normal" if b >= 0 else "below the smallest normal (subnormal)"
            )
        bad = f", {self.nonfinite} inf/NaN" if self.nonfinite else ""
        if self.nonfinite and self.compared == 0:  # nothing finite to measure an error on
            return f"{self.path} ({self.layer_class}, {self.dtype}): {self.nonfinite} inf/NaN, " + (
                "no value finite in both to measure the error on"
            )
        return (
            f"{self.path} ({self.layer_class}, {self.dtype}): rel RMS {self.rel_rms:.3g}, "
            f"SQNR {sqnr}, max |err| {self.max_abs_error:.3g}"
            + (f", amax {self.amax:.4g}" if self.amax is not None else "")
            + room
            + bad
        )


def where_precision_goes(damage: tuple[LayerDamage, ...]) -> tuple[list[LayerDamage], str]:
    """The layers sorted by error (the largest first), and the path of the first layer whose
    error jumps: in forward order, the first whose relative RMS error is more than
    :data:`JUMP` times both every earlier layer's and its dtype's epsilon (``""``: none).

    >>> mk = lambda p, e: LayerDamage(path=p, layer_class="Dense", dtype="float16",
    ...     reference="float32", rel_rms=e, max_abs_error=e)
    >>> ranked, jump = where_precision_goes((mk("a", 1e-4), mk("b", 2e-4), mk("c", 0.05)))
    >>> [d.path for d in ranked], jump
    (['c', 'b', 'a'], 'c')
    """
    ranked = sorted(damage, key=lambda d: -d.rel_rms)
    worst = 0.0
    for d in damage:
        eps = dtypes.tolerance(d.dtype) / dtypes.TOLERANCE_ULPS
        if d.rel_rms > JUMP * max(worst, eps):
            return ranked, d.path
        worst = max(worst, d.rel_rms)
    return ranked, ""


#: How many times the error so far (or the dtype's epsilon) a layer's error must exceed to
#: be where precision goes.
JUMP = 10.0
