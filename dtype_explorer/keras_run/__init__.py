"""The engine: Keras run in this process, on the backend it imported.

It knows every target (``catalog``), checks a question and makes its ``ProbeSpec``
(``make_spec``), states what Keras documents (``_rules``), runs the probe and observes every
dtype on the way (``run_probe``, with ``_call_trace`` and ``_numerics``), and puts Keras's global
dtype settings back afterwards (``preserved_keras_state``). Keras itself is imported only when a
function needs it: importing the engine imports no backend.
"""

from __future__ import annotations

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "catalog": "dtype_explorer.keras_run.catalog",
    "variable_dtypes": "dtype_explorer.keras_run._call_trace",
    "wrapped_entry_points": "dtype_explorer.keras_run._call_trace",
    "array_library": "dtype_explorer.keras_run._expect",
    "resolve_function": "dtype_explorer.keras_run._expect",
    "run_keras2": "dtype_explorer.keras_run._keras2",
    "KERAS_STATE_LOCK": "dtype_explorer.keras_run._keras_state",
    "changed_settings": "dtype_explorer.keras_run._keras_state",
    "describe_settings": "dtype_explorer.keras_run._keras_state",
    "global_settings": "dtype_explorer.keras_run._keras_state",
    "preserved_keras_state": "dtype_explorer.keras_run._keras_state",
    "restore_settings": "dtype_explorer.keras_run._keras_state",
    "modes_for": "dtype_explorer.keras_run._modes",
    "check_values": "dtype_explorer.keras_run._numerics",
    "error_limit": "dtype_explorer.keras_run._numerics",
    "reference_dtype": "dtype_explorer.keras_run._numerics",
    "run_probe": "dtype_explorer.keras_run._probe:run",
    "COMMON_POLICIES": "dtype_explorer.keras_run._spec",
    "MAX_KWARGS_DEPTH": "dtype_explorer.keras_run._spec",
    "MAX_SAMPLE_ELEMENTS": "dtype_explorer.keras_run._spec",
    "ShapeArg": "dtype_explorer.keras_run._spec",
    "check_call_kwargs": "dtype_explorer.keras_run._spec",
    "make_spec": "dtype_explorer.keras_run._spec",
    "validate_policy": "dtype_explorer.keras_run._spec",
    "op_trace": "dtype_explorer.keras_run._trace",
    "compiled_by": "dtype_explorer.keras_run._training",
    "global_seed_kept": "dtype_explorer.keras_run._training",
    "train_one_step": "dtype_explorer.keras_run._training",
    "call_arguments": "dtype_explorer.keras_run._values",
}
__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

__all__ = [
    "COMMON_POLICIES",
    "KERAS_STATE_LOCK",
    "MAX_KWARGS_DEPTH",
    "MAX_SAMPLE_ELEMENTS",
    "ShapeArg",
    "array_library",
    "call_arguments",
    "catalog",
    "changed_settings",
    "check_call_kwargs",
    "check_values",
    "compiled_by",
    "describe_settings",
    "error_limit",
    "global_seed_kept",
    "global_settings",
    "make_spec",
    "modes_for",
    "op_trace",
    "preserved_keras_state",
    "reference_dtype",
    "resolve_function",
    "restore_settings",
    "run_keras2",
    "run_probe",
    "train_one_step",
    "validate_policy",
    "variable_dtypes",
    "wrapped_entry_points",
]
