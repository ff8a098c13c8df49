"""A result's numbers: a bounded sample of each output's values, the wrong numbers found in a
right dtype, where backends part, and the numerical side effects of running in a dtype.

>>> OutputValues(dtype="float32", shape=(2, 3), head=(1.0,) * 6).element(4)
(1, 1)
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dtype_explorer.records._base import Record

#: How many leading elements of each output a result carries (``OutputValues.head``).
HEAD = 32
#: ``precision-loss``: integer data (ids, labels, counts) cast to a float too narrow to hold
#: every one of them exactly (above 2048 for float16, 256 for bfloat16).
ValueProblem = Literal[
    "wraparound", "saturation", "truncation", "reference-error", "nonfinite", "precision-loss"
]


class OutputValues(Record):
    """A bounded sample of one output's values: its first :data:`HEAD` elements (row-major;
    ``None`` for inf/NaN), the count of inf/NaN, and the sum of the finite magnitudes."""

    index: int = 0
    dtype: str
    shape: tuple[int, ...] = ()
    head: tuple[float | None, ...] = ()
    nonfinite: int = 0
    abs_sum: float | None = None

    def element(self, flat: int) -> tuple[int, ...]:
        """The index of the ``flat``-th element (row-major) in this output's shape."""
        size = 1
        for dim in self.shape:
            size *= dim
        if not self.shape or flat >= size:
            return (flat,)
        index = []
        for dim in reversed(self.shape):
            index.append(flat % dim)
            flat //= dim
        return tuple(reversed(index))


class ValueFinding(Record):
    """A right dtype with wrong numbers, at the first output element that shows it: ``value``
    observed there, ``expected`` by the same computation in a wider type (``reference_dtype``)."""

    kind: ValueProblem
    output: int = 0
    element: tuple[int, ...] = ()
    value: float | str | None = None
    expected: float | str | None = None
    reference_dtype: str | None = None
    message: str = ""

    def text(self) -> str:
        """``wraparound at output 0 [0]: 44 where 300 (uint8 holds 0..255)`` (a scalar
        output has no ``[...]``)."""
        at = f" [{', '.join(map(str, self.element))}]" if self.element else ""
        where = f"output {self.output}{at}"
        return f"{self.kind} at {where}: {self.message}"


class ValueDivergence(Record):
    """Backends that gave numbers far apart (beyond ``tolerance``, relative to the values'
    scale) for the same inputs and weights, at the first element where they part."""

    output: int = 0
    element: tuple[int, ...] = ()
    values: dict[str, float | None] = Field(default_factory=dict)
    tolerance: float = 0.0
    message: str = ""


class Numerics(Record):
    """Numerical side effects of running in this dtype.

    ``nonfinite_from_finite`` counts inf/NaN outputs produced from finite inputs;
    ``max_rel_error`` compares with the same layer and weights run in ``reference_dtype``.
    """

    nonfinite_from_finite: int = 0
    output_count: int = 0
    max_abs_output: float | None = None
    max_rel_error: float | None = None
    reference_dtype: str | None = None
    note: str = ""
    #: A bounded sample of every output's values (the first :data:`HEAD` elements and a sum),
    #: what ``ProbeSet.value_divergence`` compares across backends.
    outputs: tuple[OutputValues, ...] = ()
    #: Wrong numbers in a right dtype: wraparound, saturation, truncation, error against the
    #: reference run, inf/NaN from finite input; each names its first element.
    findings: tuple[ValueFinding, ...] = ()
    #: Whether these values may be compared with another backend's: not when a random layer
    #: drew them (``comparable_note`` says why).
    comparable: bool = True
    comparable_note: str = ""
    #: The largest magnitude among the integer inputs' values (``None``: no integer input),
    #: what the ``precision-loss`` rule compares with a 16-bit float's exact integers.
    max_abs_integer_input: float | None = None
