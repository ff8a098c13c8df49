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
"""

from __future__ import annotations

from typing import Literal

from dtype_explorer import dtypes
from dtype_explorer.records._base import Record

#: The steps that change a dtype: a model input converted to its ``keras.Input`` dtype, an
#: autocast on entry to a layer, a variable read in another dtype, an ``ops.cast``.
CastStepKind = Literal["keras-input", "autocast", "variable-read", "cast"]
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
        return next((cause for field, cause in _CAUSES if getattr(self, field)), None)

    def text(self) -> str:
        """One line: the step's dtypes, the counts of its cause, examples, the first index."""
        head = f"{self.source} -> {self.target}: "
        cause = self.cause
        if cause is None:
            return head + f"all {self.count} values kept"
        n = getattr(self, dict((c, f) for f, c in _CAUSES)[cause])
        what = {
            "rounding": "integers rounded",
            "overflow": "finite values overflowed to inf",
            "underflow": "non-zero values underflowed to zero",
            "subnormal": "values became subnormal",
            "wrap": "integers wrapped around",
            "saturation": "integers saturated at the bounds",
        }[cause]
        shown = ", ".join(f"{_num(b)} -> {_num(a)}" for b, a in self.examples)
        why = _why(cause, self.target)
        inner = "; ".join(p for p in (shown, why) if p)
        at = f", first at [{', '.join(map(str, self.first_index))}]" if self.first_index else ""
        return head + f"{n} of {self.count} {what}" + (f" ({inner})" if inner else "") + at


def _why(cause: str, target: str) -> str:
    """The property of ``target`` that explains ``cause``."""
    if cause == "rounding":
        limit = dtypes.exact_integers(target)
        return f"{target} holds integers exactly only up to {limit}" if limit else ""
    if cause in ("overflow", "underflow", "subnormal") and dtypes.family(target) == "float":
        big, tiny = dtypes.float_limits(target)
        return (
            f"{target} holds at most {_num(big)}"
            if cause == "overflow"
            else f"{target}'s smallest normal is {tiny:.3g}"
        )
    bounds = dtypes.int_range(target)
    return f"{target} holds {bounds[0]}..{bounds[1]}" if bounds else ""


def _num(value: float) -> str:
    """An integer-valued number without its ``.0``; others in ``g`` form."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
