"""Keras 2 (``tf_keras``, ``TF_USE_LEGACY_KERAS=1``): a probe run in the Keras 2 engine's worker.

``_probe`` is its entry point (``run_keras2``: a layer, loss or metric on Keras 2), with its
``_modes``, ``_objective`` (losses and metrics), ``_values`` (the user's values, the
numerics), ``_op_trace`` (TensorFlow's op callbacks), ``_documented`` (the output dtype
tf_keras's own docstrings state: its policy rule) and ``_instance`` (a user's tf.keras layer
as given); ``_model_trace`` records a Keras 2 model's forward pass as Keras 3's is
recorded, ``_rebuild`` rebuilds a Keras 3 model in Keras 2, and ``_compare`` sets Keras 2
beside Keras 3.

It may import the foundation, ``records`` and the rest of the engine (the probe paths' stages,
the model passes, the op trace); nothing in the engine imports it: it is reached through
``keras_run``'s public names only.
"""

from __future__ import annotations

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {}
__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]
