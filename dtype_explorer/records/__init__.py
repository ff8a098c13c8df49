"""The data model: every answer the package gives is one of these records.

A record is immutable, JSON in and JSON out (``to_json``/``from_json``, ``to_dict``/
``from_dict``), and carries the facts derived from it (a result's ``outcome``, a survey cell's
classification, a promotion cell's kind), computed once, here. Views draw records and compute
nothing; records reach their views through ``display``, never by importing them.

========================  ==============================================================
``ProbeSpec``             one question: target, input dtypes, policy, backend, ...
``ProbeResult``           its answer: the cast path, the documented, declared and
                          observed dtypes, the verdict, numerics, versions
``ProbeSet``              one question answered by several backends
``Survey``                targets x dtypes x policies x backends, classified per cell
``PromotionTable``        an op over every pair of dtypes, beside the array libraries
``AuditReport``           a model's forward pass, layer by layer, and its findings
``TraceStep``             one op of a call: its dtypes, what it did to them, its line
========================  ==============================================================
"""

from __future__ import annotations

from dtype_explorer.records import display
from dtype_explorer.records._audit import (
    ROW_COLUMNS,
    SEVERITIES,
    AuditReport,
    Finding,
    FindingKind,
    LayerCall,
    Severity,
    TensorInfo,
)
from dtype_explorer.records._base import Record
from dtype_explorer.records._probe import (
    HEAD,
    MODES,
    STAGES,
    CastStep,
    ErrorInfo,
    Expectation,
    FitReport,
    GradientInfo,
    Mode,
    Numerics,
    OutputValues,
    ProbeResult,
    ProbeSet,
    ProbeSpec,
    Stage,
    Status,
    ValueDivergence,
    ValueFinding,
    VariableDtypes,
    Verdict,
)
from dtype_explorer.records._promotion import (
    KINDS,
    NO_COUNTERPART,
    RAISES,
    REFERENCES,
    UNARY,
    Kind,
    PromotionCell,
    PromotionTable,
    RefCell,
    pair_key,
    reference_label,
)
from dtype_explorer.records._survey import (
    CLASSIFICATIONS,
    Classification,
    Survey,
    SurveyCell,
    classify_cell,
    classify_result,
)
from dtype_explorer.records._trace import (
    Change,
    Conversion,
    SourceLine,
    TraceDivergence,
    TraceStep,
    TraceTensor,
)

__all__ = [
    "CLASSIFICATIONS",
    "HEAD",
    "KINDS",
    "MODES",
    "NO_COUNTERPART",
    "RAISES",
    "REFERENCES",
    "ROW_COLUMNS",
    "SEVERITIES",
    "STAGES",
    "UNARY",
    "AuditReport",
    "CastStep",
    "Change",
    "Classification",
    "Conversion",
    "ErrorInfo",
    "Expectation",
    "Finding",
    "FindingKind",
    "FitReport",
    "GradientInfo",
    "Kind",
    "LayerCall",
    "Mode",
    "Numerics",
    "OutputValues",
    "ProbeResult",
    "ProbeSet",
    "ProbeSpec",
    "PromotionCell",
    "PromotionTable",
    "Record",
    "RefCell",
    "Severity",
    "SourceLine",
    "Stage",
    "Status",
    "Survey",
    "SurveyCell",
    "TensorInfo",
    "TraceDivergence",
    "TraceStep",
    "TraceTensor",
    "ValueDivergence",
    "ValueFinding",
    "VariableDtypes",
    "Verdict",
    "classify_cell",
    "classify_result",
    "display",
    "pair_key",
    "reference_label",
]
