"""Keras 2 beside Keras 3 on the same question: the grid of both answers (``records.compare``,
a column per Keras) and whether their *values* diverge: the first output's values, element
by element, within the tolerance of the narrower dtype. A pure function of the two results
(no Keras): values are compared only where both ran on the same numbers (no weights, or
weights from deterministic initializers the user gave, or the user's own values into a
layer without weights).

>>> from dtype_explorer.records import Numerics, OutputValues, ProbeResult, ProbeSpec
>>> def answer(head, dtype):
...     out = OutputValues(dtype=dtype, shape=(2,), head=head)
...     return ProbeResult(spec=ProbeSpec(target="Add"), status="ok", backend="tensorflow",
...                        output_dtype=dtype,
...                        numerics=Numerics(outputs=(out,), output_count=2))
>>> d = keras2_vs_keras3(answer((-56.0, 101.0), "int8"), answer((200.0, 101.0), "int16"))
>>> d.diverges, d.first, d.summary
(True, 0, 'values diverge: element 0 is -56 in Keras 2 (int8), 200 in Keras 3 (int16)')
"""

from __future__ import annotations

from dtype_explorer import dtypes
from dtype_explorer.records import Comparison, ProbeResult, Record, compare

#: Initializers whose numbers are the same in Keras 2 and Keras 3.
SAME_NUMBERS = ("ones", "zeros", "identity")


class ValueDivergence(Record):
    """Whether Keras 2's and Keras 3's values differ on the same question.

    Attributes:
        grid: both answers side by side (``records.compare``), columns ``labels``.
        comparable: whether the two ran on the same numbers (``note`` says why not).
        diverges: whether a compared element differs beyond the narrower dtype's tolerance.
        first: the flat index of the first such element, ``None`` when none.
        max_abs_diff: the largest difference among the compared elements.
        compared: how many elements were compared (the records keep the first few).
        summary: the finding in a sentence.
    """

    grid: Comparison
    comparable: bool
    note: str = ""
    diverges: bool = False
    first: int | None = None
    max_abs_diff: float | None = None
    compared: int = 0
    summary: str = ""


def keras2_vs_keras3(
    keras2: ProbeResult, keras3: ProbeResult, labels: tuple[str, str] = ("Keras 2", "Keras 3")
) -> ValueDivergence:
    """Keras 2's answer beside Keras 3's, and whether their values diverge.

    Args:
        keras2: the answer with ``engine="tf_keras"`` (or in the Keras 2 kernel).
        keras3: the same question answered by Keras 3.
        labels: the two columns' names.

    Returns:
        A :class:`ValueDivergence`.
    """
    grid = compare([keras2, keras3], labels=list(labels))
    why = _incomparable(keras2) or _incomparable(keras3)
    if why:
        return ValueDivergence(grid=grid, comparable=False, note=why, summary=why)
    a, b = keras2.numerics.outputs[0], keras3.numerics.outputs[0]  # type: ignore[union-attr]
    limit = max(dtypes.tolerance(a.dtype), dtypes.tolerance(b.dtype))
    pairs = list(zip(a.head, b.head))
    diffs = [
        None if x is None or y is None else abs(x - y) / max(abs(x), abs(y), 1.0) for x, y in pairs
    ]
    first = next(
        (
            i
            for i, (d, (x, y)) in enumerate(zip(diffs, pairs))
            if (d is None and x != y) or (d or 0) > limit
        ),
        None,
    )
    finite = [abs(x - y) for x, y in pairs if x is not None and y is not None]
    if first is None:
        summary = f"same values (first {len(pairs)} elements, within {limit:g})"
    else:
        x, y = pairs[first]
        summary = (
            f"values diverge: element {first} is {_num(x)} in {labels[0]} ({a.dtype}), "
            f"{_num(y)} in {labels[1]} ({b.dtype})"
        )
    return ValueDivergence(
        grid=grid,
        comparable=True,
        diverges=first is not None,
        first=first,
        max_abs_diff=max(finite) if finite else None,
        compared=len(pairs),
        summary=summary,
    )


def _incomparable(result: ProbeResult) -> str:
    """Why ``result``'s values cannot be set beside the other Keras's, or ``""``."""
    if not result.ok or result.numerics is None or not result.numerics.outputs:
        return f"no values to compare: {result.spec.target} did not answer with values"
    own = {
        k.removesuffix("_initializer"): v
        for k, v in result.spec.kwargs.items()
        if k.endswith("_initializer")
    }
    drawn = [n for n in result.variables if own.get(n) not in SAME_NUMBERS]
    if drawn and not result.spec.target.startswith(("losses.", "metrics.")):
        return (
            f"values not compared: {', '.join(drawn)} drawn by each Keras's own initializer "
            "(give e.g. kernel_initializer='ones' to compare)"
        )
    return ""


def _num(x: float | None) -> str:
    return "inf/NaN" if x is None else f"{x:.6g}"
