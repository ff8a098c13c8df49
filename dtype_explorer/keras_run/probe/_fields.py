"""The fields a probe path accumulates for its ``ProbeResult``, typed: every path (layer, op,
objective, Keras 2) returns a ``ProbeFields``, and ``_probe.run`` adds the spec, the backend,
the versions and the timings. A ``TypedDict``, not a record: a path fills it stage by stage
(``outcome`` first, then the trace, the numerics, the fit step), and ``ProbeResult`` validates
it once, at the end."""

from __future__ import annotations

from typing import Any, TypedDict

from dtype_explorer.records import (
    CastStep,
    ErrorInfo,
    Expectation,
    FitReport,
    KerasCall,
    LayerQuantization,
    Numerics,
    Supplied,
    TraceStep,
    VariableDtypes,
)


class ProbeFields(TypedDict, total=False):
    """``ProbeResult``'s fields that a probe path finds (see ``records.ProbeResult``)."""

    status: str
    error: ErrorInfo
    verdict: str
    documented_dtype: str | None
    declared_dtype: str | None
    result_type_args: tuple[str, ...]
    basis: tuple[str, ...]
    expected_by: str | None
    expectations: tuple[Expectation, ...]
    output_dtype: str | None
    output_dtypes: tuple[str, ...]
    output_verdicts: tuple[Any, ...]
    device: str
    cast_path: tuple[CastStep, ...]
    variables: dict[str, VariableDtypes]
    trace: tuple[TraceStep, ...]
    trace_dropped: int
    trace_note: str
    execution: str
    compiled: bool | None
    numerics: Numerics
    fit: FitReport
    kernel: str | None
    supplied: tuple[Supplied, ...]
    quantization: LayerQuantization | None
    called: KerasCall | None
