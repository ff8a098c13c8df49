"""What Keras was given, written down as data for "copy as code" (``records.KerasCall``,
``records.AuditQuestion``): the arguments of a call as nodes over arrays (an array's exact
values where it is small: ``records.MAX_LITERAL_ELEMENTS``), a constructor's JSON keyword
arguments (a serialized sub-layer as a ``layer`` node), and an audit's question with the
model's config where a script can rebuild it. The records write the code from these.

>>> import numpy as np
>>> arrays = []
>>> value_node((np.zeros((1, 2), "int8"), 3), arrays)
{'tuple': [{'array': 0}, {'value': 3}]}
>>> arrays[0].dtype, arrays[0].shape
('int8', (1, 2))
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run.model import config_text
from dtype_explorer.records import (
    MAX_LITERAL_ELEMENTS,
    MAX_WEIGHT_ELEMENTS,
    AuditQuestion,
    CodeArray,
    InputValue,
)

#: The most characters a model's serialized config may hold to travel in an audit's report
#: (a larger model's script loads the user's saved model instead).
MAX_CONFIG_CHARS = 200_000


class Unwritable(Exception):
    """A value no script can write (a Python function, an object of the user's)."""


@dataclass(frozen=True)
class Ref:
    """Array ``index`` of a call recorded elsewhere (``arrays[index]`` of its ``KerasCall``)."""

    index: int


def code_array(
    value: Any,
    *,
    tensor: str | None = None,
    listed: bool = False,
    user: int | None = None,
    made: str = "",
) -> CodeArray:
    """One array a call was given, as ``records.CodeArray``: its dtype and shape, its values
    when small (never the user's: they are in the spec already)."""
    array = np.asarray(value)
    if array.dtype.kind in "OUS":
        array = array.astype(str)
        name = "string"
    else:
        name = dtypes.standardize(array.dtype, "values")
    data = None
    if user is None and math.prod(array.shape) <= MAX_LITERAL_ELEMENTS:
        data = InputValue.of_array(array)
    return CodeArray(
        dtype=name,
        shape=tuple(int(d) for d in array.shape),
        data=data,
        user=user,
        tensor=tensor,
        listed=listed,
        made=made,
    )


def value_node(value: Any, arrays: list[CodeArray], depth: int = 0) -> Any:
    """``value`` as a node (``records._as_code``): an array (or a backend tensor, read back as
    one) appended to ``arrays``; Python numbers, strings and ``None`` as values; tuples, lists
    and dicts nested; anything else raises :class:`Unwritable`."""
    if depth > 16:
        raise Unwritable("nests more than 16 deep")
    if isinstance(value, Ref):
        return {"array": value.index}
    if value is None or isinstance(value, bool | int | float | str):
        return {"value": value}
    if isinstance(value, tuple | list):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {kind: [value_node(v, arrays, depth + 1) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": [[k, value_node(v, arrays, depth + 1)] for k, v in value.items()]}
    if isinstance(value, np.ndarray | np.generic):
        arrays.append(code_array(value))
        return {"array": len(arrays) - 1}
    if hasattr(value, "dtype") and hasattr(value, "shape"):  # a backend tensor
        import keras

        array = numpy_values(value)  # a 0-d bfloat16 TensorFlow tensor too
        arrays.append(code_array(array, tensor=keras.backend.standardize_dtype(value.dtype)))
        return {"array": len(arrays) - 1}
    raise Unwritable(f"a {type(value).__module__}.{type(value).__qualname__}")


def json_node(value: Any) -> Any:
    """A constructor's JSON keyword argument as a node: a serialized layer (a dict with
    ``class_name``, as ``keras.layers.deserialize`` takes it, and as the catalog passes a
    sub-layer) as a ``layer`` node, the rest as values, lists and dicts.

    >>> json_node([{"class_name": "Dense", "config": {"units": 2}}, 3])
    {'list': [{'layer': {'class_name': 'Dense', 'config': {'units': 2}}}, {'value': 3}]}
    """
    if isinstance(value, dict) and "class_name" in value:
        return {"layer": value}
    if isinstance(value, dict):
        return {"dict": [[k, json_node(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return {"list": [json_node(v) for v in value]}
    return {"value": value}


def model_config(model: Any) -> tuple[Any, str]:
    """The model as ``keras.saving.serialize_keras_object`` writes it, when a script can
    rebuild it from that alone (every layer Keras's own, JSON, at most
    :data:`MAX_CONFIG_CHARS`); else ``None`` and why not. Written by
    ``keras_run.model.config_text``: once per audit, once for good for the tool's own copy."""
    own = [
        layer
        for layer in _layers(model)
        if not type(layer).__module__.startswith(("keras.", "keras_hub."))
    ]
    if own or not type(model).__module__.startswith("keras."):
        named = type(own[0] if own else model).__qualname__
        return None, f"it holds {named}, a class of yours: its config needs your code"
    text, error = config_text(model)
    if text is None:
        return None, f"Keras could not write its config as JSON ({error})"
    if len(text) > MAX_CONFIG_CHARS:
        return None, f"its config is {len(text)} characters (the most written out: 200000)"
    return json.loads(text), ""


def _layers(model: Any) -> list[Any]:
    """Every layer of ``model``, nested models' included."""
    found, stack = [], list(getattr(model, "layers", ()))
    while stack and len(found) < 100_000:
        layer = stack.pop()
        found.append(layer)
        stack.extend(getattr(layer, "layers", ()))
    return found


def compile_config(model: Any) -> Any:
    """``model.get_compile_config()`` as JSON, or ``None`` (not compiled, or not JSON)."""
    try:
        config = model.get_compile_config()
        return None if config is None else json.loads(json.dumps(config))
    except Exception:
        return None


def audit_question(
    target: Any,
    model: Any,
    sample: Any,
    *,
    sample_given: bool,
    labels: Any,
    call_kwargs: dict[str, Any] | None,
    timeout: float | None,
    steps: int,
    quantize: Any,
) -> AuditQuestion:
    """``check_model``'s question as data (``records.AuditQuestion``): the sample the audit
    ran (and the labels given) as nodes over arrays, the arguments, and what a raw script
    needs to make the model again: ``target``'s config (the model, or its rebuild under
    ``policy=``) where it can, and how ``model`` is compiled.

    Args:
        target: the model the audit ran (before any training copy or quantization).
        model: the user's model (its compile config).
        sample: the sample the audit ran on.
        sample_given: whether the user gave it.
        labels: the labels the user gave (``None``: the audit's own).
        call_kwargs: the call's keyword arguments, JSON.
        timeout: the re-probes' time limit asked.
        steps: the training steps asked.
        quantize: the quantization asked (a mode's name, or a config).

    Returns:
        The ``AuditQuestion``; a sample no script can write is ``None`` in it.
    """
    arrays: list[CodeArray] = []
    try:
        sample_node = value_node(sample, arrays)
    except Unwritable:
        sample_node, arrays = None, []
    labels_node = None
    if labels is not None:
        try:
            labels_node = value_node(labels, arrays)
        except Unwritable:
            labels_node = None
    config, note = model_config(target)
    # counted from the shapes first: a big model's weights are not read to be left out
    count = sum(math.prod(w.shape) for w in target.weights) if config is not None else 0
    few = 0 < count <= MAX_WEIGHT_ELEMENTS
    weights = target.get_weights() if few else []
    return AuditQuestion(
        sample=sample_node,
        labels=labels_node,
        arrays=tuple(arrays),
        sample_given=sample_given,
        labels_given=labels_node is not None,
        call_kwargs=dict(call_kwargs or {}),
        timeout=timeout,
        steps=steps,
        quantize=None if quantize is None else _quantize_name(quantize),
        quantize_config=quantize is not None and not isinstance(quantize, str),
        config=config,
        model_note=note,
        compile_config=compile_config(model) if getattr(model, "compiled", False) else None,
        weights=tuple(code_array(w) for w in weights) if few else None,
    )


def _quantize_name(quantize: Any) -> str:
    """A mode's name as asked, or a config's class name."""
    return quantize if isinstance(quantize, str) else type(quantize).__name__
