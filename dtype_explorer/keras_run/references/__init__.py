"""The array libraries a ``keras.ops`` answer is set beside: NumPy, jax, torch and TensorFlow;
and on openvino, OpenVINO's op set.

``_calls`` says how each library's counterpart of an op is called (or that it has none),
``_adapters`` the counterparts whose arguments differ from Keras's, ``_tf_reference`` runs
``tf.experimental.numpy`` with its NumPy behaviour on, in a process of its own, and
``_openvino`` finds an op's namesake in OpenVINO's op set (or says why there is none).

It may import the foundation and ``records`` only; the expectations (``keras_run._expect``)
use it through the names below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Public name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "call_reference": "dtype_explorer.keras_run.references._calls",
    "NO_COUNTERPART": "dtype_explorer.keras_run.references._calls",
    "no_counterpart": "dtype_explorer.keras_run.references._calls",
    "tf_reference_run": "dtype_explorer.keras_run.references._tf_reference:run",
    "openvino_path": "dtype_explorer.keras_run.references._openvino:opset_path",
    "openvino_said": "dtype_explorer.keras_run.references._openvino:said",
    "openvino_why_none": "dtype_explorer.keras_run.references._openvino:why_none",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.keras_run.references._calls import (
        NO_COUNTERPART,
        call_reference,
        no_counterpart,
    )
    from dtype_explorer.keras_run.references._openvino import opset_path as openvino_path
    from dtype_explorer.keras_run.references._openvino import said as openvino_said
    from dtype_explorer.keras_run.references._openvino import why_none as openvino_why_none
    from dtype_explorer.keras_run.references._tf_reference import run as tf_reference_run

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]
