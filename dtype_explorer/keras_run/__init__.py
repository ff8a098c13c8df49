"""The engine: Keras run in this process, on the backend it imported.

It knows every target (``catalog``), checks a question and makes its ``ProbeSpec``
(``make_spec``), states what Keras documents (``_rules``), runs the probe and observes every
dtype on the way (``run_probe``, with ``_call_trace`` and ``_numerics``), and puts Keras's global
dtype settings back afterwards (``preserved_keras_state``). Keras itself is imported only when a
function needs it: importing the engine imports no backend.
"""

from __future__ import annotations

from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._call_trace import variable_dtypes, wrapped_entry_points
from dtype_explorer.keras_run._expect import array_library, resolve_function
from dtype_explorer.keras_run._facts import read_facts, write_facts_snapshot
from dtype_explorer.keras_run._instance import Packed, instance_kind, pack
from dtype_explorer.keras_run._keras2 import run_keras2
from dtype_explorer.keras_run._keras_state import (
    KERAS_STATE_LOCK,
    changed_settings,
    describe_settings,
    global_settings,
    preserved_keras_state,
    restore_settings,
)
from dtype_explorer.keras_run._model_copy import (
    compile_copy,
    is_compiled,
    policy_clone,
    training_copy,
    variables_kept,
)
from dtype_explorer.keras_run._model_trace import ModelTracer
from dtype_explorer.keras_run._modes import modes_for
from dtype_explorer.keras_run._numerics import (
    check_values,
    error_limit,
    layer_values_wrong,
    reference_dtype,
    worth_value_check,
)
from dtype_explorer.keras_run._probe import run as run_probe
from dtype_explorer.keras_run._samples import (
    declared_inputs,
    describe_model,
    expected_inputs,
    keras_flatten,
    nonfinite_count,
    sample_for,
    sample_text,
    tensor_info,
)
from dtype_explorer.keras_run._spec import (
    COMMON_POLICIES,
    MAX_KWARGS_DEPTH,
    MAX_SAMPLE_ELEMENTS,
    ShapeArg,
    check_call_kwargs,
    make_spec,
    validate_policy,
)
from dtype_explorer.keras_run._trace import op_trace
from dtype_explorer.keras_run._training import compiled_by, global_seed_kept, train_one_step
from dtype_explorer.keras_run._values import call_arguments

__all__ = [
    "COMMON_POLICIES",
    "KERAS_STATE_LOCK",
    "MAX_KWARGS_DEPTH",
    "MAX_SAMPLE_ELEMENTS",
    "ModelTracer",
    "Packed",
    "ShapeArg",
    "array_library",
    "call_arguments",
    "catalog",
    "changed_settings",
    "check_call_kwargs",
    "check_values",
    "compile_copy",
    "compiled_by",
    "declared_inputs",
    "describe_model",
    "describe_settings",
    "error_limit",
    "expected_inputs",
    "global_seed_kept",
    "global_settings",
    "instance_kind",
    "is_compiled",
    "keras_flatten",
    "layer_values_wrong",
    "make_spec",
    "modes_for",
    "nonfinite_count",
    "op_trace",
    "pack",
    "policy_clone",
    "preserved_keras_state",
    "read_facts",
    "reference_dtype",
    "resolve_function",
    "restore_settings",
    "run_keras2",
    "run_probe",
    "sample_for",
    "sample_text",
    "tensor_info",
    "train_one_step",
    "training_copy",
    "validate_policy",
    "variable_dtypes",
    "variables_kept",
    "worth_value_check",
    "wrapped_entry_points",
    "write_facts_snapshot",
]
