"""The probe paths: one probe run in this process, from a ``ProbeSpec`` to its ``ProbeResult``.

``_run`` is the one entry point (``keras_run.run_probe``): it sets the policy and floatx and
hands the spec to its target's path: ``_layer`` (a layer, made as ``_layer_target`` says, in
the modes of ``_modes``, against the reference of ``_layer_reference``, quantized by
``_quantize_layer``), ``_op`` (a ``keras.ops`` function) or ``_objective`` (a loss or a
metric). The stages every path runs are in ``_stages``, what they share (errors told apart,
outputs made into steps) in ``_observe``, and the fields they return in ``_fields``.

It may import the foundation, ``records``, the op trace (``keras_run.trace``), the model
passes (``keras_run.model``) and the engine's top-level rooms (rules, expectations, numerics,
values, the catalog). Keras 2 (``keras_run.keras2``) uses its stages through the names below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "ProbeFields": "dtype_explorer.keras_run.probe._fields",
    "broadcast": "dtype_explorer.keras_run.probe._observe",
    "error_info": "dtype_explorer.keras_run.probe._observe",
    "Invalid": "dtype_explorer.keras_run.probe._observe",
    "output_note": "dtype_explorer.keras_run.probe._observe",
    "call_layer": "dtype_explorer.keras_run.probe._stages",
    "Called": "dtype_explorer.keras_run.probe._stages",
    "construct": "dtype_explorer.keras_run.probe._stages",
    "input_count": "dtype_explorer.keras_run.probe._stages",
    "layer_caller": "dtype_explorer.keras_run.probe._stages",
    "layer_inputs": "dtype_explorer.keras_run.probe._stages",
    "LayerInputs": "dtype_explorer.keras_run.probe._stages",
    "recorded_call": "dtype_explorer.keras_run.probe._stages",
    "supplied": "dtype_explorer.keras_run.probe._stages",
    "timed": "dtype_explorer.keras_run.probe._stages",
    "variable_steps": "dtype_explorer.keras_run.probe._stages",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.keras_run.probe._fields import ProbeFields
    from dtype_explorer.keras_run.probe._observe import Invalid, broadcast, error_info, output_note
    from dtype_explorer.keras_run.probe._stages import (
        Called,
        LayerInputs,
        call_layer,
        construct,
        input_count,
        layer_caller,
        layer_inputs,
        recorded_call,
        supplied,
        timed,
        variable_steps,
    )

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]
