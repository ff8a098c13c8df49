"""Save and load a model the ways Keras offers, in a temporary directory, and compare what
comes back with what left, layer by layer (``check_model(..., mode="save")``): the native
``.keras`` archive; the legacy ``.h5`` file (Sequential and Functional models, h5py
installed); ``model.export`` to a SavedModel read back through ``keras.layers.TFSMLayer``
(the tensorflow backend); a keras-hub model's ``save_to_preset``/``from_preset``, with and
without ``dtype=`` (:mod:`._roundtrip_preset`). The model is only read (saved); each load is a
new model.

>>> import keras, numpy as np
>>> inputs = keras.Input((3,))
>>> model = keras.Model(inputs, keras.layers.Dense(2, dtype="bfloat16", name="d")(inputs))
>>> x = np.ones((2, 3), "float32")
>>> trip = round_trips(model, x, {}, formats=(".keras",)).trips[0]
>>> trip.outcome, trip.dtype_changes, trip.loaded_output_dtypes, trip.max_abs_difference
('compared', (), ('bfloat16',), 0.0)
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import keras_message
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run._compat import export_saved_model, layer_quantization_mode
from dtype_explorer.keras_run._lazy_tensorflow import LEGACY_H5, WRITERS, tensorflow_if_imported
from dtype_explorer.keras_run.model._model_trace import layer_paths
from dtype_explorer.keras_run.model._roundtrip_preset import (
    is_preset,
    load_preset,
    preset_formats,
    save_preset,
)
from dtype_explorer.keras_run.model._samples import declared_inputs, keras_flatten
from dtype_explorer.records import ErrorInfo, RoundTrip, RoundTripReport

FORMATS = (".keras", ".h5", "SavedModel")


def round_trips(
    model: Any, sample: Any, arguments: dict[str, Any], formats: tuple[str, ...] = FORMATS
) -> RoundTripReport:
    """Each format of ``formats`` that applies to ``model`` here, then a keras-hub model's
    presets: saved, loaded back, compared (policies, variable dtypes, the outputs' dtypes and
    values on ``sample``).

    Args:
        model: the Keras model (only read: each load is a new model).
        sample: what the model and each loaded model are called on.
        arguments: the call's keyword arguments.
        formats: the formats tried, of :data:`FORMATS`.

    Returns:
        A ``RoundTripReport``: one ``RoundTrip`` per format, or none, with ``call_error``,
        where the model's own call on ``sample`` raised (Keras's error: nothing is saved).
    """
    try:
        returned = model(sample, **arguments)
    except Exception as error:  # the model's own call: Keras's (or the user's layers') answer
        said = keras_message(str(error), limit=600)
        return RoundTripReport(call_error=ErrorInfo(type=type(error).__name__, message=said))
    # Read outside the try: a failure of this tool's reading is never Keras's.
    before = [numpy_values(x) for x in keras_flatten(returned)]
    trips = []
    with tempfile.TemporaryDirectory(prefix="dx-roundtrip-") as tmp:
        for fmt in (*formats, *preset_formats(model)):
            why = _not_applicable(model, fmt)
            if why:
                trips.append(RoundTrip(format=fmt, outcome="not-applicable", why=why))
                continue
            trips.append(_trip(model, sample, arguments, fmt, os.path.join(tmp, "m"), before))
    return RoundTripReport(trips=tuple(trips))


def _not_applicable(model: Any, fmt: str) -> str:
    import keras

    functional = declared_inputs(model) is not None
    if fmt == ".h5" and importlib.util.find_spec("h5py") is None:
        return "h5py is not installed"
    if fmt == ".h5" and not functional:
        return "the legacy .h5 format saves Sequential and Functional models"
    if fmt == "SavedModel" and keras.backend.backend() != "tensorflow":
        return "TFSMLayer reads a SavedModel back on the tensorflow backend only"
    if fmt == "SavedModel" and importlib.util.find_spec("tensorflow") is None:
        return "tensorflow is not installed"
    return ""


def _trip(
    model: Any, sample: Any, arguments: dict, fmt: str, base: str, before: list[np.ndarray]
) -> RoundTrip:
    import keras

    stage = "save"
    try:
        if fmt == "SavedModel":
            export_saved_model(model, base)
            stage = "load"
            loaded = keras.layers.TFSMLayer(base, call_endpoint="serve")
            stage = "call"
            returned = loaded(_as_declared(model, sample))
            changes: tuple[str, ...] = ()
            compared = 0
        else:
            if is_preset(fmt):
                path = save_preset(model, base)
                stage = "load"
                loaded = load_preset(model, path, fmt)
            else:
                path = base + fmt
                # the tool's own file, written and read back here: the .h5 format's JSON helpers
                # ask for TensorFlow as they write and read it (nothing of it can be TensorFlow's
                # where TensorFlow is not imported)
                with tensorflow_if_imported((*WRITERS, *LEGACY_H5)):
                    model.save(path)
                    stage = "load"
                    loaded = keras.saving.load_model(path, compile=False)
            changes, compared = _changes(model, loaded)
            stage = "call"
            returned = loaded(sample, **arguments)
    except Exception as error:
        info = ErrorInfo(type=type(error).__name__, message=keras_message(str(error), limit=600))
        return RoundTrip(format=fmt, outcome="raised", stage=stage, error=info)
    # Read outside the try: a failure of this tool's reading is never Keras's "call raised".
    after = [numpy_values(x) for x in keras_flatten(returned)]
    return RoundTrip(
        format=fmt,
        dtype_changes=changes,
        output_dtypes=tuple(str(a.dtype) for a in before),
        loaded_output_dtypes=tuple(str(a.dtype) for a in after),
        max_abs_difference=_max_abs(before, after),
        layers_compared=compared,
    )


def _as_declared(model: Any, sample: Any) -> Any:
    """``sample`` in the dtypes of the model's ``keras.Input``s: a SavedModel's signature takes
    exactly those (Keras's own call converts; ``TFSMLayer`` does not). A ``string`` input keeps
    the text as given (NumPy has no ``string`` dtype; TensorFlow takes its str arrays)."""
    import keras

    inputs = getattr(model, "inputs", None) or []
    flat = keras.tree.flatten(sample)
    if len(flat) != len(inputs):
        return sample
    cast = [
        np.asarray(x) if t.dtype == "string" else np.asarray(x).astype(t.dtype)
        for x, t in zip(flat, inputs)
    ]
    return keras.tree.pack_sequence_as(sample, cast)


def _changes(model: Any, loaded: Any) -> tuple[tuple[str, ...], int]:
    """``path: what → what`` for every policy and variable dtype that changed or went missing,
    layers matched in walk order (auto-named layers, ``softmax_4``, load under new names)."""
    import keras

    def table(m: Any) -> list[tuple[str, str, list[str]]]:
        return [
            (
                path.split("/", 1)[-1],
                _policy(layer),
                [keras.backend.standardize_dtype(v.dtype) for v in layer.weights],
            )
            for layer, path, _ in layer_paths(m).values()
        ]

    was, now = table(model), table(loaded)
    changes = []
    if len(was) != len(now):
        changes.append(f"{model.name}: {len(was)} layers → {len(now)} after loading")
    for (path, policy, variables), (_, policy2, variables2) in zip(was, now):
        if policy != policy2:
            changes.append(f"{path}: policy ({policy}) → ({policy2})")
        if variables != variables2:
            changes.append(f"{path}: variables {_counted(variables)} → {_counted(variables2)}")
    return tuple(changes), len(was)


def _counted(dtypes: list[str]) -> str:
    """``float32, int8`` in order, runs counted: ``11 bfloat16, float32``; ``none``."""
    runs: list[list] = []
    for dtype in dtypes:
        if runs and runs[-1][0] == dtype:
            runs[-1][1] += 1
        else:
            runs.append([dtype, 1])
    return ", ".join(d if n == 1 else f"{n} {d}" for d, n in runs) or "none"


#: A functional model's own policy, in a round trip: ``Functional.get_config`` holds no dtype
#: (it loads under the global policy) and no tensor is cast by it (its inputs are
#: standardized to its ``Input``\ s' dtypes, its layers compute under their own policies).
FUNCTIONAL_CONTAINER = "functional container (its own policy is not saved and casts nothing)"


def _policy(layer: Any) -> str:
    """What a layer's policy makes of it: compute and variable dtype, quantization mode. A
    quantized keras-hub model loads back with every layer holding the model's
    ``DTypePolicyMap`` (``map_float32``), which resolves per layer to the same dtypes. An
    ``InputLayer``: the dtype of its tensor (its policy is whatever was global when built). A
    functional model itself: :data:`FUNCTIONAL_CONTAINER` (its policy is never compared)."""
    import keras
    from keras.src.models.functional import Functional

    if isinstance(layer, keras.layers.InputLayer):  # its policy computes nothing
        return f"input {keras.backend.standardize_dtype(layer.output.dtype)}"
    if type(layer) is Functional:  # Keras saves no dtype for it; its graph's layers compute
        return FUNCTIONAL_CONTAINER
    mode = layer_quantization_mode(layer)
    quantized = f", quantized {mode}" if mode else ""
    return f"compute {layer.compute_dtype}, variables {layer.variable_dtype}{quantized}"


def _max_abs(before: list[np.ndarray], after: list[np.ndarray]) -> float | None:
    """The largest ``|before - after|`` over the outputs, each pair of numbers read wide
    (:func:`_wide`); ``None`` when the outputs cannot be set side by side (their counts or
    shapes differ); outputs that are not numbers (text) are left out."""
    if len(before) != len(after) or any(a.shape != b.shape for a, b in zip(before, after)):
        return None
    diffs = []
    for a, b in zip(before, after):
        wide_a, wide_b = _wide(a), _wide(b)
        if wide_a is None or wide_b is None:
            continue
        diffs.append(float(np.max(np.abs(wide_a - wide_b))) if a.size else 0.0)
    return max(diffs, default=0.0)


def _wide(array: np.ndarray) -> np.ndarray | None:
    """``array`` as float64 (complex128 for a complex one), where it holds numbers: NumPy's
    bool, integer and float types, and ``ml_dtypes``' bfloat16 and float8 types (NumPy's
    dtype kind ``'V'``, a Keras model's 16- and 8-bit float outputs); ``None`` for text.

    >>> import ml_dtypes
    >>> _wide(np.array([1.5], ml_dtypes.bfloat16)).dtype, _wide(np.array(["a"])) is None
    (dtype('float64'), True)
    """
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    if array.dtype.kind in "biuf" or dtypes.is_float(array.dtype.name):
        return array.astype(np.float64)
    return None
