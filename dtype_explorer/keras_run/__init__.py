"""The engine: Keras run in this process, on the backend it imported.

It knows every target (``catalog``), checks a question and makes its ``ProbeSpec``
(``make_spec``), states what Keras documents (``_rules``), runs the probe and observes every
dtype on the way (``run_probe``, with ``_call_trace`` and ``_numerics``), and puts Keras's global
dtype settings back afterwards (``preserved_keras_state``). Keras itself is imported only when a
function needs it: importing the engine imports no backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy
from dtype_explorer.keras_run import _facts

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "catalog": "dtype_explorer.keras_run.catalog",
    "variable_dtypes": "dtype_explorer.keras_run.trace._call_trace",
    "wrapped_entry_points": "dtype_explorer.keras_run.trace._call_trace",
    "array_library": "dtype_explorer.keras_run._expect",
    "resolve_function": "dtype_explorer.keras_run._expect",
    "tf_reference_stop": "dtype_explorer.keras_run.references._tf_reference:stop",
    "tf_reference_submit": "dtype_explorer.keras_run.references._tf_reference:submit",
    "get_policy": "dtype_explorer.keras_run._compat",
    "read_facts": "dtype_explorer.keras_run._facts",
    "write_facts_snapshot": "dtype_explorer.keras_run._facts",
    "KerasSnapshot": "dtype_explorer.keras_run._integrity:Snapshot",
    "keras_changes": "dtype_explorer.keras_run._integrity:changes",
    "restore_keras": "dtype_explorer.keras_run._integrity:restore",
    "keras_snapshot": "dtype_explorer.keras_run._integrity:snapshot",
    "Packed": "dtype_explorer.keras_run.model._instance",
    "instance_kind": "dtype_explorer.keras_run._instance_kind",
    "pack": "dtype_explorer.keras_run.model._instance",
    "run_keras2": "dtype_explorer.keras_run.keras2._probe",
    "keras2_vs_keras3": "dtype_explorer.keras_run.keras2._compare",
    "keras2_pack": "dtype_explorer.keras_run.keras2._instance",
    "KERAS2_LACKS": "dtype_explorer.keras_run.keras2._model_trace",
    "Keras2Tracer": "dtype_explorer.keras_run.keras2._model_trace",
    "is_keras2": "dtype_explorer.keras_run.keras2._model_trace",
    "keras2_inputs": "dtype_explorer.keras_run.keras2._model_trace",
    "keras2_state_kept": "dtype_explorer.keras_run.keras2._model_trace",
    "keras2_variables_kept": "dtype_explorer.keras_run.keras2._model_trace",
    "Keras2Refusal": "dtype_explorer.keras_run.keras2._rebuild",
    "keras2_copy": "dtype_explorer.keras_run.keras2._modes",
    "keras2_train_on_batch": "dtype_explorer.keras_run.keras2._modes:train_on_batch",
    "rebuild_in_keras2": "dtype_explorer.keras_run.keras2._rebuild",
    "KERAS_STATE_LOCK": "dtype_explorer.keras_run._keras_state",
    "changed_settings": "dtype_explorer.keras_run._keras_state",
    "describe_settings": "dtype_explorer.keras_run._keras_state",
    "global_seed_kept": "dtype_explorer.keras_run._keras_state",
    "global_settings": "dtype_explorer.keras_run._keras_state",
    "preserved_keras_state": "dtype_explorer.keras_run._keras_state",
    "restore_settings": "dtype_explorer.keras_run._keras_state",
    "tensorflow_if_imported": "dtype_explorer.keras_run._lazy_tensorflow",
    "arguments_given": "dtype_explorer.keras_run.model._copy",
    "init_parameters": "dtype_explorer.keras_run.model._copy",
    "compile_copy": "dtype_explorer.keras_run.model._copy",
    "configs_written": "dtype_explorer.keras_run.model._copy",
    "is_compiled": "dtype_explorer.keras_run.model._copy",
    "loss_name": "dtype_explorer.keras_run.model._copy",
    "policy_clone": "dtype_explorer.keras_run.model._copy",
    "policy_rebuild": "dtype_explorer.keras_run.model._copy",
    "rebuilt_notes": "dtype_explorer.keras_run.model._policy_rebuild",
    "training_copy": "dtype_explorer.keras_run.model._copy",
    "copy_failed": "dtype_explorer.keras_run.model._copy",
    "variables_kept": "dtype_explorer.keras_run.model._copy",
    "ModelTracer": "dtype_explorer.keras_run.model._model_trace",
    "modes_for": "dtype_explorer.keras_run._mode_rules",
    "QuantizeRequest": "dtype_explorer.keras_run.model._quantize",
    "leaf_outputs": "dtype_explorer.keras_run.model._quantize",
    "model_copy": "dtype_explorer.keras_run.model._quantize",
    "quantization_modes": "dtype_explorer.keras_run.model._quantize",
    "quantize_layers": "dtype_explorer.keras_run.model._quantize",
    "quantized_leaving_float": "dtype_explorer.keras_run.model._quantize",
    "keras_quantization_summary": "dtype_explorer.keras_run.model._quantize",
    "quantize_request": "dtype_explorer.keras_run.model._quantize",
    "uncalibrated_modes": "dtype_explorer.keras_run.model._quantize",
    "round_trips": "dtype_explorer.keras_run.model._roundtrip",
    "cast_loss": "dtype_explorer.keras_run._exactness",
    "layer_damage": "dtype_explorer.keras_run.model._layer_damage",
    "Float32Fix": "dtype_explorer.keras_run.model._proven_fix",
    "float32_fix": "dtype_explorer.keras_run.model._proven_fix",
    "float32_copy": "dtype_explorer.keras_run.model._proven_fix",
    "trained_in_float32": "dtype_explorer.keras_run.model._frozen_fix",
    "fitting_labels": "dtype_explorer.keras_run.model._loss_scale_fix",
    "loss_scale_measures": "dtype_explorer.keras_run.model._loss_scale_fix",
    "float_outputs": "dtype_explorer.keras_run.model._proven_fix",
    "nonfinite_outputs": "dtype_explorer.keras_run.model._proven_fix",
    "overflow_measures": "dtype_explorer.keras_run.model._proven_fix",
    "ids_received": "dtype_explorer.keras_run.model._input_fix",
    "with_input_dtype": "dtype_explorer.keras_run.model._input_fix",
    "with_dtype": "dtype_explorer.keras_run.model._input_fix",
    "DtypeCopies": "dtype_explorer.keras_run.model._input_fix",
    "check_values": "dtype_explorer.keras_run._numerics",
    "error_limit": "dtype_explorer.keras_run._numerics",
    "layer_values_wrong": "dtype_explorer.keras_run._layer_values",
    "values_after_cast": "dtype_explorer.keras_run._layer_values",
    "reference_dtype": "dtype_explorer.keras_run._numerics",
    "worth_value_check": "dtype_explorer.keras_run._numerics",
    "run_probe": "dtype_explorer.keras_run.probe._run:run",
    "declared_inputs": "dtype_explorer.keras_run.model._samples",
    "describe_model": "dtype_explorer.keras_run.model._samples",
    "expected_inputs": "dtype_explorer.keras_run.model._samples",
    "keras_flatten": "dtype_explorer.keras_run.model._samples",
    "nonfinite_count": "dtype_explorer.keras_run.model._samples",
    "sample_for": "dtype_explorer.keras_run.model._samples",
    "sample_text": "dtype_explorer.keras_run.model._samples",
    "tensor_info": "dtype_explorer.keras_run.model._samples",
    "COMMON_POLICIES": "dtype_explorer.keras_run._spec",
    "MAX_KWARGS_DEPTH": "dtype_explorer.keras_run._spec",
    "MAX_SAMPLE_ELEMENTS": "dtype_explorer.keras_run._spec",
    "ShapeArg": "dtype_explorer.keras_run._spec",
    "check_call_kwargs": "dtype_explorer.keras_run._spec",
    "make_spec": "dtype_explorer.keras_run._spec",
    "validate_policy": "dtype_explorer.keras_run._spec",
    "keep_trace_installed": "dtype_explorer.keras_run.trace._in_place:keep_installed",
    "op_trace": "dtype_explorer.keras_run.trace._op_trace",
    "compiled_by": "dtype_explorer.keras_run.model._training",
    "predict_compiled_by": "dtype_explorer.keras_run.model._training",
    "train_one_step": "dtype_explorer.keras_run.model._training",
    "train_steps": "dtype_explorer.keras_run.model._training",
    "call_arguments": "dtype_explorer.keras_run._values",
    "numpy_values": "dtype_explorer.keras_run._arrays",
    "audit_question": "dtype_explorer.keras_run._as_code",
    "unimplemented": "dtype_explorer.keras_run._tool_error",
    "refused_by": "dtype_explorer.keras_run._tool_error",
    "check_precision": "dtype_explorer.keras_run._environment",
    "freeze_for_good": "dtype_explorer.keras_run._heap",
    "heap_frozen": "dtype_explorer.keras_run._heap",
    "precision_set": "dtype_explorer.keras_run._environment",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.keras_run import catalog
    from dtype_explorer.keras_run._arrays import numpy_values
    from dtype_explorer.keras_run._as_code import audit_question
    from dtype_explorer.keras_run._compat import get_policy
    from dtype_explorer.keras_run._environment import check_precision, precision_set
    from dtype_explorer.keras_run._exactness import cast_loss
    from dtype_explorer.keras_run._expect import array_library, resolve_function
    from dtype_explorer.keras_run._facts import read_facts, write_facts_snapshot
    from dtype_explorer.keras_run._heap import freeze_for_good, heap_frozen
    from dtype_explorer.keras_run._instance_kind import instance_kind
    from dtype_explorer.keras_run._integrity import Snapshot as KerasSnapshot
    from dtype_explorer.keras_run._integrity import changes as keras_changes
    from dtype_explorer.keras_run._integrity import restore as restore_keras
    from dtype_explorer.keras_run._integrity import snapshot as keras_snapshot
    from dtype_explorer.keras_run._keras_state import (
        KERAS_STATE_LOCK,
        changed_settings,
        describe_settings,
        global_seed_kept,
        global_settings,
        preserved_keras_state,
        restore_settings,
    )
    from dtype_explorer.keras_run._layer_values import layer_values_wrong, values_after_cast
    from dtype_explorer.keras_run._lazy_tensorflow import tensorflow_if_imported
    from dtype_explorer.keras_run._mode_rules import modes_for
    from dtype_explorer.keras_run._numerics import (
        check_values,
        error_limit,
        reference_dtype,
        worth_value_check,
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
    from dtype_explorer.keras_run._tool_error import refused_by, unimplemented
    from dtype_explorer.keras_run._values import call_arguments
    from dtype_explorer.keras_run.keras2._compare import keras2_vs_keras3
    from dtype_explorer.keras_run.keras2._instance import keras2_pack
    from dtype_explorer.keras_run.keras2._model_trace import (
        KERAS2_LACKS,
        Keras2Tracer,
        is_keras2,
        keras2_inputs,
        keras2_state_kept,
        keras2_variables_kept,
    )
    from dtype_explorer.keras_run.keras2._modes import keras2_copy
    from dtype_explorer.keras_run.keras2._modes import train_on_batch as keras2_train_on_batch
    from dtype_explorer.keras_run.keras2._probe import run_keras2
    from dtype_explorer.keras_run.keras2._rebuild import Keras2Refusal, rebuild_in_keras2
    from dtype_explorer.keras_run.model._copy import (
        arguments_given,
        compile_copy,
        configs_written,
        copy_failed,
        init_parameters,
        is_compiled,
        loss_name,
        policy_clone,
        policy_rebuild,
        training_copy,
        variables_kept,
    )
    from dtype_explorer.keras_run.model._frozen_fix import trained_in_float32
    from dtype_explorer.keras_run.model._input_fix import (
        DtypeCopies,
        ids_received,
        with_dtype,
        with_input_dtype,
    )
    from dtype_explorer.keras_run.model._instance import Packed, pack
    from dtype_explorer.keras_run.model._layer_damage import layer_damage
    from dtype_explorer.keras_run.model._loss_scale_fix import (
        fitting_labels,
        loss_scale_measures,
    )
    from dtype_explorer.keras_run.model._model_trace import ModelTracer
    from dtype_explorer.keras_run.model._policy_rebuild import rebuilt_notes
    from dtype_explorer.keras_run.model._proven_fix import (
        Float32Fix,
        float32_copy,
        float32_fix,
        float_outputs,
        nonfinite_outputs,
        overflow_measures,
    )
    from dtype_explorer.keras_run.model._quantize import (
        QuantizeRequest,
        keras_quantization_summary,
        leaf_outputs,
        model_copy,
        quantization_modes,
        quantize_layers,
        quantize_request,
        quantized_leaving_float,
        uncalibrated_modes,
    )
    from dtype_explorer.keras_run.model._roundtrip import round_trips
    from dtype_explorer.keras_run.model._samples import (
        declared_inputs,
        describe_model,
        expected_inputs,
        keras_flatten,
        nonfinite_count,
        sample_for,
        sample_text,
        tensor_info,
    )
    from dtype_explorer.keras_run.model._training import (
        compiled_by,
        predict_compiled_by,
        train_one_step,
        train_steps,
    )
    from dtype_explorer.keras_run.probe._run import run as run_probe
    from dtype_explorer.keras_run.references._tf_reference import stop as tf_reference_stop
    from dtype_explorer.keras_run.references._tf_reference import submit as tf_reference_submit
    from dtype_explorer.keras_run.trace._call_trace import variable_dtypes, wrapped_entry_points
    from dtype_explorer.keras_run.trace._in_place import keep_installed as keep_trace_installed
    from dtype_explorer.keras_run.trace._op_trace import op_trace

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]
