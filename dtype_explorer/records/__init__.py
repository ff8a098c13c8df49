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
``ModelGraph``            that pass as a graph: every layer once, the tensors between them
``BisectResult``          one question over a range of Keras releases: where it changed
``TraceStep``             one op of a call: its dtypes, what it did to them, its line
``TraceResult``           the user's own code run as written: its steps, value, errors
``Engine``                a created engine: which Keras release answers, where, its size
``Atlas``                 a survey made into a report (traces summarised); ``AtlasDiff``
                          the cells whose outcome changed between two atlases
========================  ==============================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "display": "dtype_explorer.records.display",
    "CHANGE_KINDS": "dtype_explorer.records._atlas",
    "Atlas": "dtype_explorer.records._atlas",
    "AtlasCell": "dtype_explorer.records._atlas",
    "AtlasChange": "dtype_explorer.records._atlas",
    "AtlasDiff": "dtype_explorer.records._atlas",
    "AtlasRun": "dtype_explorer.records._atlas",
    "ChangeKind": "dtype_explorer.records._atlas",
    "AUDIT_MODES": "dtype_explorer.records._audit",
    "ROW_COLUMNS": "dtype_explorer.records._audit",
    "SEVERITIES": "dtype_explorer.records._audit",
    "AuditMode": "dtype_explorer.records._audit",
    "AuditReport": "dtype_explorer.records._audit",
    "Finding": "dtype_explorer.records._audit",
    "FindingKind": "dtype_explorer.records._audit",
    "LayerCall": "dtype_explorer.records._audit",
    "LayerDifference": "dtype_explorer.records._audit",
    "PredictReport": "dtype_explorer.records._audit",
    "Severity": "dtype_explorer.records._audit",
    "TensorInfo": "dtype_explorer.records._audit",
    "Record": "dtype_explorer.records._base",
    "AuditQuestion": "dtype_explorer.records._as_code",
    "CodeArray": "dtype_explorer.records._as_code",
    "CodeCopy": "dtype_explorer.records._as_code",
    "KerasCall": "dtype_explorer.records._as_code",
    "MAX_LITERAL_ELEMENTS": "dtype_explorer.records._as_code",
    "MAX_WEIGHT_ELEMENTS": "dtype_explorer.records._as_code",
    "CastLoss": "dtype_explorer.records._exactness",
    "LayerDamage": "dtype_explorer.records._exactness",
    "where_precision_goes": "dtype_explorer.records._exactness",
    "FixHow": "dtype_explorer.records._fix",
    "GraphEdge": "dtype_explorer.records._graph",
    "GraphNode": "dtype_explorer.records._graph",
    "ModelGraph": "dtype_explorer.records._graph",
    "NodeKind": "dtype_explorer.records._graph",
    "FixMeasure": "dtype_explorer.records._fix",
    "FixProof": "dtype_explorer.records._fix",
    "MAX_EXAMPLES": "dtype_explorer.records._exactness",
    "QuantizationReport": "dtype_explorer.records._quantize",
    "KerasQuantizedLayer": "dtype_explorer.records._quantize",
    "keras_summary_rows": "dtype_explorer.records._quantize",
    "QuantizedLayer": "dtype_explorer.records._quantize",
    "QuantizeStatus": "dtype_explorer.records._quantize",
    "RoundTrip": "dtype_explorer.records._quantize",
    "RoundTripReport": "dtype_explorer.records._quantize",
    "StoredVariable": "dtype_explorer.records._quantize_layer",
    "LayerQuantization": "dtype_explorer.records._quantize_layer",
    "compute_path": "dtype_explorer.records._quantize_layer",
    "AnswerChange": "dtype_explorer.records._bisect",
    "BisectProbe": "dtype_explorer.records._bisect",
    "BisectResult": "dtype_explorer.records._bisect",
    "ENGINE_FORMS": "dtype_explorer.records._engine",
    "TF_KERAS_BACKEND": "dtype_explorer.records._engine",
    "Engine": "dtype_explorer.records._engine",
    "EnginePackage": "dtype_explorer.records._engine",
    "check_engine_backend": "dtype_explorer.records._engine",
    "engine_package": "dtype_explorer.records._engine",
    "engine_spec": "dtype_explorer.records._engine",
    "NIGHTLY": "dtype_explorer.records._engine",
    "NIGHTLY_PACKAGE": "dtype_explorer.records._engine",
    "engine_label": "dtype_explorer.records._engine",
    "answered_by": "dtype_explorer.records._engine",
    "release_label": "dtype_explorer.records._engine",
    "is_moving": "dtype_explorer.records._engine",
    "nightly_date": "dtype_explorer.records._engine",
    "pinned_engine": "dtype_explorer.records._engine",
    "CompareCell": "dtype_explorer.records._compare",
    "CompareColumn": "dtype_explorer.records._compare",
    "CompareRow": "dtype_explorer.records._compare",
    "Comparison": "dtype_explorer.records._compare",
    "compare": "dtype_explorer.records._compare",
    "HEAD": "dtype_explorer.records._numerics",
    "UNSUPPORTED": "dtype_explorer.records._probe",
    "own_words": "dtype_explorer.records._probe",
    "VERDICT_WORDS": "dtype_explorer.records._probe",
    "MODES": "dtype_explorer.records._probe",
    "PRECISIONS": "dtype_explorer.records._probe",
    "STAGES": "dtype_explorer.records._probe",
    "CastStep": "dtype_explorer.records._probe",
    "ErrorInfo": "dtype_explorer.records._probe",
    "Expectation": "dtype_explorer.records._probe",
    "FitReport": "dtype_explorer.records._fit",
    "FitStep": "dtype_explorer.records._fit",
    "FrozenVariable": "dtype_explorer.records._fit",
    "GradientInfo": "dtype_explorer.records._fit",
    "MAX_FIT_STEPS": "dtype_explorer.records._fit",
    "Mode": "dtype_explorer.records._probe",
    "Numerics": "dtype_explorer.records._numerics",
    "OutputValues": "dtype_explorer.records._numerics",
    "Precision": "dtype_explorer.records._probe",
    "ProbeResult": "dtype_explorer.records._probe",
    "ProbeSpec": "dtype_explorer.records._probe",
    "Supplied": "dtype_explorer.records._probe",
    "Stage": "dtype_explorer.records._probe",
    "Status": "dtype_explorer.records._probe",
    "ValueDivergence": "dtype_explorer.records._numerics",
    "ValueFinding": "dtype_explorer.records._numerics",
    "VariableDtypes": "dtype_explorer.records._probe",
    "Verdict": "dtype_explorer.records._probe",
    "ProbeSet": "dtype_explorer.records._probe_set",
    "KINDS": "dtype_explorer.records._promotion",
    "NO_COUNTERPART": "dtype_explorer.records._probe",
    "RAISES": "dtype_explorer.records._promotion",
    "REFERENCES": "dtype_explorer.records._promotion",
    "UNARY": "dtype_explorer.records._promotion",
    "Kind": "dtype_explorer.records._promotion",
    "PromotionCell": "dtype_explorer.records._promotion",
    "PromotionTable": "dtype_explorer.records._promotion",
    "RefCell": "dtype_explorer.records._promotion",
    "pair_key": "dtype_explorer.records._promotion",
    "reference_label": "dtype_explorer.records._promotion",
    "CLASSIFICATIONS": "dtype_explorer.records._survey",
    "Classification": "dtype_explorer.records._survey",
    "Survey": "dtype_explorer.records._survey",
    "axis_policy": "dtype_explorer.records._survey",
    "SurveyCell": "dtype_explorer.records._survey",
    "classify_cell": "dtype_explorer.records._survey",
    "classify_result": "dtype_explorer.records._survey",
    "CodeComparison": "dtype_explorer.records._code_trace",
    "CodeEnvironment": "dtype_explorer.records._code_trace",
    "CodeError": "dtype_explorer.records._code_trace",
    "CodeStatus": "dtype_explorer.records._code_trace",
    "TraceResult": "dtype_explorer.records._code_trace",
    "TracedValue": "dtype_explorer.records._code_trace",
    "Change": "dtype_explorer.records._trace",
    "Conversion": "dtype_explorer.records._trace",
    "SourceLine": "dtype_explorer.records._trace",
    "TraceDivergence": "dtype_explorer.records._trace",
    "TraceFlag": "dtype_explorer.records._trace",
    "TraceStep": "dtype_explorer.records._trace",
    "TraceTensor": "dtype_explorer.records._trace",
    "MAX_VALUE_ELEMENTS": "dtype_explorer.records._values",
    "MAX_VALUES_BYTES": "dtype_explorer.records._values",
    "InputValue": "dtype_explorer.records._values",
    "values_digest": "dtype_explorer.records._values",
    "AtlasCollector": "dtype_explorer.records._atlas",
    "AtlasWritten": "dtype_explorer.records._atlas",
    "AtlasStoreWriter": "dtype_explorer.records._atlas_table",
    "combine_classes": "dtype_explorer.records._survey",
    "op_policy": "dtype_explorer.records._survey",
    "op_dtypes": "dtype_explorer.records._survey",
    "ARRAYS_ONLY": "dtype_explorer.records._survey",
    "ANY_POLICY": "dtype_explorer.records._survey",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.records import display
    from dtype_explorer.records._as_code import (
        MAX_LITERAL_ELEMENTS,
        MAX_WEIGHT_ELEMENTS,
        AuditQuestion,
        CodeArray,
        CodeCopy,
        KerasCall,
    )
    from dtype_explorer.records._atlas import (
        CHANGE_KINDS,
        Atlas,
        AtlasCell,
        AtlasChange,
        AtlasCollector,
        AtlasDiff,
        AtlasRun,
        AtlasWritten,
        ChangeKind,
    )
    from dtype_explorer.records._atlas_table import AtlasStoreWriter
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
    from dtype_explorer.records._code_trace import (
        CodeComparison,
        CodeEnvironment,
        CodeError,
        CodeStatus,
        TracedValue,
        TraceResult,
    )
    from dtype_explorer.records._compare import (
        CompareCell,
        CompareColumn,
        CompareRow,
        Comparison,
        compare,
    )
    from dtype_explorer.records._engine import (
        ENGINE_FORMS,
        NIGHTLY,
        NIGHTLY_PACKAGE,
        TF_KERAS_BACKEND,
        Engine,
        EnginePackage,
        answered_by,
        check_engine_backend,
        engine_label,
        engine_package,
        engine_spec,
        is_moving,
        nightly_date,
        pinned_engine,
        release_label,
    )
    from dtype_explorer.records._exactness import (
        MAX_EXAMPLES,
        CastLoss,
        LayerDamage,
        where_precision_goes,
    )
    from dtype_explorer.records._fit import (
        MAX_FIT_STEPS,
        FitReport,
        FitStep,
        FrozenVariable,
        GradientInfo,
    )
    from dtype_explorer.records._fix import FixHow, FixMeasure, FixProof
    from dtype_explorer.records._graph import GraphEdge, GraphNode, ModelGraph, NodeKind
    from dtype_explorer.records._numerics import (
        HEAD,
        Numerics,
        OutputValues,
        ValueDivergence,
        ValueFinding,
    )
    from dtype_explorer.records._probe import (
        MODES,
        NO_COUNTERPART,
        PRECISIONS,
        STAGES,
        UNSUPPORTED,
        VERDICT_WORDS,
        CastStep,
        ErrorInfo,
        Expectation,
        Mode,
        Precision,
        ProbeResult,
        ProbeSpec,
        Stage,
        Status,
        Supplied,
        VariableDtypes,
        Verdict,
        own_words,
    )
    from dtype_explorer.records._probe_set import ProbeSet
    from dtype_explorer.records._promotion import (
        KINDS,
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
    from dtype_explorer.records._quantize import (
        KerasQuantizedLayer,
        QuantizationReport,
        QuantizedLayer,
        QuantizeStatus,
        RoundTrip,
        RoundTripReport,
        keras_summary_rows,
    )
    from dtype_explorer.records._quantize_layer import (
        LayerQuantization,
        StoredVariable,
        compute_path,
    )
    from dtype_explorer.records._survey import (
        ANY_POLICY,
        ARRAYS_ONLY,
        CLASSIFICATIONS,
        Classification,
        Survey,
        SurveyCell,
        axis_policy,
        classify_cell,
        classify_result,
        combine_classes,
        op_dtypes,
        op_policy,
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

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]
