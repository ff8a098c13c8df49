"""A user's own model or instance, handled without changing it: packed, copied, run, trained,
quantized and saved.

``_instance`` packs a user's layer, model, loss or metric for a worker (Keras's own format);
``_copy`` makes the copies an audit trains or clones; ``_model_trace`` records a model's real
forward pass, layer call by layer call (``ModelTracer``); ``_samples`` are a model's inputs
and the tensors of a pass as records; ``_training`` runs one real training step; ``_quantize``
quantizes copies as Keras does; ``_roundtrip`` and ``_roundtrip_preset`` save and load.

It may import the foundation, ``records``, the op trace (``keras_run.trace``) and the engine's
top-level rooms (numerics, instance kinds); the probe paths and Keras 2 import it, never the
reverse.
"""

from __future__ import annotations

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "init_parameters": "dtype_explorer.keras_run.model._copy",
    "pack": "dtype_explorer.keras_run.model._instance",
    "Packed": "dtype_explorer.keras_run.model._instance",
    "_autocast_events": "dtype_explorer.keras_run.model._model_trace",
    "_HALF": "dtype_explorer.keras_run.model._model_trace",
    "_tensor_kwargs": "dtype_explorer.keras_run.model._model_trace",
    "LayerEvent": "dtype_explorer.keras_run.model._model_trace",
    "ModelTracer": "dtype_explorer.keras_run.model._model_trace",
    "ADDED_IN": "dtype_explorer.keras_run.model._quantize",
    "lacking_mode": "dtype_explorer.keras_run.model._quantize",
    "stored_variables": "dtype_explorer.keras_run.model._quantize",
    "tensor_infos": "dtype_explorer.keras_run.model._samples",
    "compiled_by": "dtype_explorer.keras_run.model._training",
    "global_seed_kept": "dtype_explorer.keras_run.model._training",
    "train_one_step": "dtype_explorer.keras_run.model._training",
}
__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
