"""A user's own model or instance, handled without changing it: packed, copied, run, trained,
quantized and saved.

``_instance`` packs a user's layer, model, loss or metric for a worker (Keras's own format);
``_copy`` makes the copies an audit trains or clones (under another policy through
``_policy_rebuild``: cloned, else made again from the model's config; every clone carries the
model's weights through ``_zero_start``, its own started at zero, not drawn); ``_model_trace``
records a model's real forward pass, layer call by layer call (``ModelTracer``; what a call
was given and received, read the same by Keras 2's trace, in ``_layer_calls``); ``_samples``
are a model's inputs and the tensors of a pass as records; ``_training`` runs one real
training step; ``_quantize`` quantizes copies as Keras does; ``_roundtrip`` and
``_roundtrip_preset`` save and load; ``_layer_damage`` compares each layer with the model in
float32; ``_proven_fix`` and ``_input_fix`` make and run the copies a fix is proven on (layers
in float32: ``dtype=`` through ``clone_model``, or a ``DTypePolicyMap`` of layer paths; a
``keras.Input`` in another dtype).

It may import the foundation, ``records``, the op trace (``keras_run.trace``) and the engine's
top-level rooms (numerics, instance kinds); the probe paths and Keras 2 import it, never the
reverse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "autocast_events": "dtype_explorer.keras_run.model._layer_calls",
    "tensor_kwargs": "dtype_explorer.keras_run.model._layer_calls",
    "init_parameters": "dtype_explorer.keras_run.model._copy",
    "own_copy": "dtype_explorer.keras_run.model._copy",
    "config_text": "dtype_explorer.keras_run.model._copy",
    "configs_written": "dtype_explorer.keras_run.model._copy",
    "pack": "dtype_explorer.keras_run.model._instance",
    "Packed": "dtype_explorer.keras_run.model._instance",
    "LayerEvent": "dtype_explorer.keras_run.model._model_trace",
    "ModelTracer": "dtype_explorer.keras_run.model._model_trace",
    "ADDED_IN": "dtype_explorer.keras_run.model._quantize",
    "check_int4_block": "dtype_explorer.keras_run.model._quantize",
    "lacking_mode": "dtype_explorer.keras_run.model._quantize",
    "stored_variables": "dtype_explorer.keras_run.model._quantize",
    "tensor_infos": "dtype_explorer.keras_run.model._samples",
    "compiled_by": "dtype_explorer.keras_run.model._training",
    "predict_compiled_by": "dtype_explorer.keras_run.model._training",
    "train_one_step": "dtype_explorer.keras_run.model._training",
    "train_steps": "dtype_explorer.keras_run.model._training",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.keras_run.model._copy import (
        config_text,
        configs_written,
        init_parameters,
        own_copy,
    )
    from dtype_explorer.keras_run.model._instance import Packed, pack
    from dtype_explorer.keras_run.model._layer_calls import autocast_events, tensor_kwargs
    from dtype_explorer.keras_run.model._model_trace import LayerEvent, ModelTracer
    from dtype_explorer.keras_run.model._quantize import (
        ADDED_IN,
        check_int4_block,
        lacking_mode,
        stored_variables,
    )
    from dtype_explorer.keras_run.model._samples import tensor_infos
    from dtype_explorer.keras_run.model._training import (
        compiled_by,
        predict_compiled_by,
        train_one_step,
        train_steps,
    )


__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]
