"""Fixes that are proven, for wrong numbers in a right dtype (``wraparound``, ``saturation``,
``truncation``, ``reference-error``: :func:`._rules.wrong_numbers`). The change is the one a
user makes before the layer, ``x = keras.ops.cast(x, dtype)``: a copy of the layer (its
config, policy and weights) is given the call's own inputs cast to ``dtype`` and checked
against the same wide reference (``keras_run.values_after_cast``). The cast is the finding's
fix only where the numbers then hold; its ``FixProof`` says what the copy received and
returned, or what was still wrong. The dtypes tried, in order: a wider integer for numbers
that wrapped or saturated (int32 after an 8- or 16-bit integer, else int64), then the
layer's float compute dtype (float32 under an integer policy); the float compute dtype for
numbers truncated or off.

>>> _candidates("wraparound", ("uint8",), ("uint8",), "float32")
['int32', 'float32']
>>> _candidates("truncation", ("int32",), ("int32",), "float32")
['float32']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.analyses.audit import _rules as _audit_rules
from dtype_explorer.errors import as_sentence
from dtype_explorer.keras_run import values_after_cast
from dtype_explorer.records import Finding, FixMeasure, FixProof, LayerCall, ValueFinding

#: The integers a wider integer (int32) holds every sum and product of two of.
_SMALL_INTS = ("int8", "uint8", "int16", "uint16")


def proven(
    checked: Iterable[tuple[LayerCall, Any, ValueFinding | None]], wide: str
) -> list[Finding]:
    """The wrong-numbers findings of ``checked`` (each call, its recorded event: the layer and
    its values, and what the value check found), each with the cast run on a copy of the
    layer: its ``fix`` where the numbers then held, its ``proof`` either way.

    Args:
        checked: the value-checked calls.
        wide: the reference dtype the check used.

    Returns:
        The findings, in the order of the calls.
    """
    findings = []
    for call, event, found in checked:
        for finding in _audit_rules.wrong_numbers([(call, found)]):
            proof = _proof(call, event.layer, event.values, found, wide)
            findings.append(
                finding.model_copy(
                    update={"fix": proof.change if proof.proven else "", "proof": proof}
                )
            )
    return findings


def _proof(
    call: LayerCall, layer: Any, values: Any, found: ValueFinding | None, wide: str
) -> FixProof:
    """Each candidate cast run on a copy of ``layer``, the first whose numbers hold kept."""
    assert found is not None
    received = tuple(t.dtype for t in call.received)
    before = FixMeasure(
        finding=True, at=call.path, received=", ".join(received), wrong=found.text()
    )
    outputs = tuple(t.dtype for t in call.outputs)
    candidates = _candidates(found.kind, received, outputs, call.compute_dtype)
    if not candidates:
        return FixProof(
            not_tried=(
                f"its inputs are {', '.join(received)} already: the numbers go wrong in "
                f"{call.layer_class}'s own computation in {call.compute_dtype}, not in its input"
            )
        )
    tried = []
    after = None
    for dtype in candidates:
        try:
            left, got, returned = values_after_cast(layer, values, call.compute_dtype, wide, dtype)
        except Exception as error:  # Keras refused the copy or the cast: said, never a fix
            said = f"{type(error).__name__}: {as_sentence(str(error))}"[:200]
            tried.append(f"{dtype}: the copy raised {said}")
            continue
        after = FixMeasure(
            finding=left is not None,
            at=call.path,
            received=", ".join(got),
            wrong=left.text() if left is not None else (
                f"the numbers hold against the {wide} reference; it returns "
                f"{', '.join(returned)}"
            ),
        )  # fmt: skip
        tried.append(f"{dtype}: " + (left.text() if left is not None else "the numbers hold"))
        if left is None:
            return FixProof(
                how="input-cast",
                change=_code(call, dtype, len(received)),
                layers=(call.path,),
                input_dtype=dtype,
                proven=True,
                before=before,
                after=after,
                tried=tuple(tried),
            )
    return FixProof(
        how="input-cast",
        layers=(call.path,),
        input_dtype=candidates[-1],
        before=before,
        after=after,
        tried=tuple(tried),
    )


def _candidates(
    kind: str, received: tuple[str, ...], outputs: tuple[str, ...], compute: str
) -> list[str]:
    """The dtypes to cast the inputs to, in order (see the module); none that every input
    already has."""
    floats = compute if dtypes.is_float(compute) else "float32"
    if kind in ("wraparound", "saturation"):
        small = any(d in _SMALL_INTS for d in (*received, *outputs))
        order = ["int32" if small else "int64", floats]
    else:
        order = [floats]
    return [d for d in dict.fromkeys(order) if any(r != d for r in received)]


def _code(call: LayerCall, dtype: str, inputs: int) -> str:
    """The cast as the user writes it before the layer."""
    said = f"# before {call.layer_class}: proven on a copy of the layer, its numbers hold"
    if inputs == 1:
        return f'x = keras.ops.cast(x, "{dtype}")   {said}'
    return f'inputs = [keras.ops.cast(x, "{dtype}") for x in inputs]   {said}'
