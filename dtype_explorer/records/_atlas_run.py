"""One backend's answer in the atlas (``AtlasRun``: the outcome, the three dtypes, the verdict,
the cast path, the error cut short, the op trace summarised) and a cell of them
(``AtlasCell``); Keras's per-process object numbers dropped (:func:`unnumbered`)."""

from __future__ import annotations

import re

from dtype_explorer.records._base import Record
from dtype_explorer.records._probe import CastStep, ProbeResult
from dtype_explorer.records._survey import (
    Classification,
    classify_result,
)

#: The longest error message an atlas keeps (the first lines say what Keras refused).
MAX_MESSAGE = 400


class AtlasRun(Record):
    """One backend's answer to a cell, without the op trace (summarised)."""

    status: str
    outcome: str
    classification: Classification
    output_dtype: str | None = None
    output_dtypes: tuple[str, ...] = ()
    documented_dtype: str | None = None
    declared_dtype: str | None = None
    verdict: str = "error"
    cast_path: tuple[CastStep, ...] = ()
    path_text: str = ""
    error_type: str | None = None
    error_where: str | None = None
    error_message: str | None = None
    device: str = "cpu"
    #: The op trace in brief: how many ops the call ran, the first that changed a dtype (with
    #: what it did and its line in Keras), the first whose output held inf/NaN, and each
    #: flagged step with its flags (``#3 ops.exp: first inf/NaN from finite inputs``, worded
    #: by ``TraceStep.flags`` as the text, the cards and the widget word them).
    trace_ops: int = 0
    first_change: str | None = None
    first_change_note: str | None = None
    first_change_at: str | None = None
    first_nonfinite: str | None = None
    trace_flags: tuple[str, ...] = ()

    @classmethod
    def from_result(cls, result: ProbeResult, compute_dtype: str) -> AtlasRun:
        change = result.first_dtype_change()
        nonfinite = result.first_nonfinite_step()
        error = result.error
        steps = tuple(
            step.model_copy(update={"name": unnumbered(step.name)}) if step.name else step
            for step in result.cast_path
        )
        return cls(
            status=result.status,
            outcome=result.outcome,
            classification=classify_result(result, compute_dtype),
            output_dtype=result.output_dtype,
            output_dtypes=result.output_dtypes,
            documented_dtype=result.documented_dtype,
            declared_dtype=result.declared_dtype,
            verdict=result.verdict,
            cast_path=steps,
            path_text=unnumbered(result.path_text()),
            error_type=error.type if error else None,
            error_where=error.where if error else None,
            error_message=unnumbered(error.message[:MAX_MESSAGE]) if error else None,
            device=result.device,
            trace_ops=len(result.call_trace()),
            first_change=change.op if change else None,
            first_change_note=change.change_text() if change else None,
            first_change_at=change.source.short if change and change.source else None,
            first_nonfinite=nonfinite.op if nonfinite else None,
            trace_flags=tuple(
                f"#{s.index} {s.op}: {s.flag_text()}" for s in result.call_trace() if s.flags
            ),
        )


_NAME_PART = re.compile(
    r"(?<![\w.])([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z][A-Za-z0-9]*)*)_\d+(?=[/'\"\s),:]|$)"
)


def unnumbered(text: str) -> str:
    """``text`` without the numbers Keras appends to the names it makes unique per process
    (``seed_generator_6/seed_generator_state`` -> ``seed_generator/seed_generator_state``).

    >>> unnumbered("seed_generator_6/seed_generator_state (variables)")
    'seed_generator/seed_generator_state (variables)'
    >>> unnumbered("Layer 'lstm_3' expected 1 input; float16 (kernel)")
    "Layer 'lstm' expected 1 input; float16 (kernel)"
    """
    return _NAME_PART.sub(r"\1", text)


class AtlasCell(Record):
    """One target on one input dtype under one policy: each backend's (or ``backend/mode``'s)
    run and the cell's class across them."""

    target: str
    input_dtype: str
    policy: str
    compute_dtype: str
    classification: Classification
    runs: dict[str, AtlasRun]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.target, self.input_dtype, self.policy)
