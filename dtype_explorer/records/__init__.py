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
``BisectResult``          one question over a range of Keras releases: where it changed
``TraceStep``             one op of a call: its dtypes, what it did to them, its line
``Engine``                a created engine: which Keras release answers, where, its size
``Atlas``                 a survey made into a report (traces summarised); ``AtlasDiff``
                          the cells whose outcome changed between two atlases
========================  ==============================================================
"""

from __future__ import annotations

from dtype_explorer.records import display
from dtype_explorer.records._atlas import (
    CHANGE_KINDS,
    Atlas,
    AtlasCell,
    AtlasChange,
    AtlasDiff,
    AtlasRun,
    ChangeKind,
)
from dtype_explorer.records._audit import (
    AUDIT_MODES,
    ROW_COLUMNS,
    SEVERITIES,
    AuditMode,
    AuditReport,
    Finding,
    FindingKind,
    LayerCall,
    LayerDifference,
    PredictReport,
    Severity,
    TensorInfo,
)
from dtype_explorer.records._base import Record
from dtype_explorer.records._bisect import AnswerChange, BisectProbe, BisectResult
from dtype_explorer.records._engine import (
    ENGINE_FORMS,
    TF_KERAS_BACKEND,
    Engine,
    EnginePackage,
    check_engine_backend,
    engine_package,
    engine_spec,
)
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
    ProbeSpec,
    Stage,
    Status,
    Supplied,
    ValueDivergence,
    ValueFinding,
    VariableDtypes,
    Verdict,
)
from dtype_explorer.records._probe_set import ProbeSet
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
    TraceFlag,
    TraceStep,
    TraceTensor,
)
from dtype_explorer.records._values import (
    MAX_VALUE_ELEMENTS,
    MAX_VALUES_BYTES,
    InputValue,
    values_digest,
)

__all__ = [
    "AUDIT_MODES",
    "CHANGE_KINDS",
    "CLASSIFICATIONS",
    "ENGINE_FORMS",
    "HEAD",
    "KINDS",
    "MAX_VALUES_BYTES",
    "MAX_VALUE_ELEMENTS",
    "MODES",
    "NO_COUNTERPART",
    "RAISES",
    "REFERENCES",
    "ROW_COLUMNS",
    "SEVERITIES",
    "STAGES",
    "TF_KERAS_BACKEND",
    "UNARY",
    "AnswerChange",
    "Atlas",
    "AtlasCell",
    "AtlasChange",
    "AtlasDiff",
    "AtlasRun",
    "AuditMode",
    "AuditReport",
    "BisectProbe",
    "BisectResult",
    "CastStep",
    "Change",
    "ChangeKind",
    "Classification",
    "Conversion",
    "Engine",
    "EnginePackage",
    "ErrorInfo",
    "Expectation",
    "Finding",
    "FindingKind",
    "FitReport",
    "GradientInfo",
    "InputValue",
    "Kind",
    "LayerCall",
    "LayerDifference",
    "Mode",
    "Numerics",
    "OutputValues",
    "PredictReport",
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
    "Supplied",
    "Survey",
    "SurveyCell",
    "TensorInfo",
    "TraceDivergence",
    "TraceFlag",
    "TraceStep",
    "TraceTensor",
    "ValueDivergence",
    "ValueFinding",
    "VariableDtypes",
    "Verdict",
    "check_engine_backend",
    "classify_cell",
    "classify_result",
    "display",
    "engine_package",
    "engine_spec",
    "pair_key",
    "reference_label",
    "values_digest",
]
