"""A fix that is proven, for integer ids a float ``keras.Input`` rounded: the model cloned with
that Input made again in another dtype (``keras.models.clone_model``'s ``input_tensors``: the
same layers, configs and weights), and what the layers taking the ids as indices (an
``Embedding``, a lookup) received, read inside their ``call`` on the model and on the copy
(``ids_received``): the ids given, or others. For float64 data narrowed on the way in, the
whole model in float64 (``with_dtype``: every layer and every float Input).

>>> import keras, numpy as np
>>> inputs = keras.Input((3,))
>>> model = keras.Model(inputs, keras.layers.Embedding(70000, 2, name="emb")(inputs), name="m")
>>> ids = np.array([[16777217, 5, 7]])
>>> ids_received(model, ids, ("m/emb",), 0).ids_changed  # float32 rounds 16777217
1
>>> copy = with_input_dtype(model, 0, "int32")
>>> copy.inputs[0].dtype, ids_received(copy, ids, ("m/emb",), 0).ids_changed
('int32', 0)
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from dtype_explorer.errors import InvalidSpecError, as_sentence
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run.model._copy import cloned_with_weights
from dtype_explorer.keras_run.model._model_trace import layer_paths
from dtype_explorer.keras_run.model._samples import declared_inputs, describe_model
from dtype_explorer.keras_run.trace import wrapped_entry_points
from dtype_explorer.records import FixMeasure


def with_input_dtype(model: Any, index: int, dtype: str) -> Any:
    """A copy of a Sequential or Functional ``model`` whose ``index``-th ``keras.Input`` (in
    ``model.inputs``' order) is made again with ``dtype`` (its shape and name kept), every
    layer rebuilt from its config, the weights copied.

    Args:
        model: a Sequential or Functional model (never changed).
        index: which of ``model.inputs``.
        dtype: the new Input's dtype.

    Returns:
        The copy.
    """
    import keras

    inputs = declared_inputs(model)
    if inputs is None:
        raise InvalidSpecError(
            f"{describe_model(model)} declares no keras.Input (a subclassed model): there is "
            "no Input to make again in another dtype"
        )
    flat = list(keras.tree.flatten(inputs))
    if not 0 <= index < len(flat):
        raise InvalidSpecError(
            f"{describe_model(model)} has {len(flat)} keras.Input; received: input {index}"
        )
    made = [
        keras.Input(
            shape=tuple(t.shape[1:]),
            dtype=dtype if i == index else t.dtype,
            name=t._keras_history.operation.name,
        )
        for i, t in enumerate(flat)
    ]
    tensors = keras.tree.pack_sequence_as(inputs, made)
    what = f"copy {describe_model(model)} with input {index} as keras.Input(dtype={dtype!r})"
    return cloned_with_weights(model, _as_is, what, input_tensors=tensors)


def with_dtype(model: Any, dtype: str, copies: DtypeCopies | None = None) -> Any:
    """A copy of a Sequential or Functional ``model`` with every layer (nested models' too)
    rebuilt from its config with ``dtype=dtype`` and every float ``keras.Input`` made again in
    ``dtype`` (``clone_model`` keeps the Inputs' own dtypes otherwise), weights copied.

    Args:
        model: a Sequential or Functional model (never changed).
        dtype: the policy of every layer and the dtype of every float Input.
        copies: the copies made of ``model`` for one audit (:class:`DtypeCopies`): the copy
            made once there, shared; ``None``, or another model's: a new copy.

    Returns:
        The copy.

    >>> import keras
    >>> inputs = keras.Input((3,))
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="d")(inputs))
    >>> copy = with_dtype(model, "float64")
    >>> copy.inputs[0].dtype, copy.get_layer("d").compute_dtype
    ('float64', 'float64')
    """
    import keras

    if copies is not None and copies.model is model:
        return copies.get(dtype)

    inputs = declared_inputs(model)
    if inputs is None:
        raise InvalidSpecError(
            f"{describe_model(model)} declares no keras.Input (a subclassed model): clone_model "
            "cannot copy it"
        )
    made = [
        keras.Input(
            shape=tuple(t.shape[1:]),
            dtype=dtype if keras.backend.is_float_dtype(t.dtype) else t.dtype,
            name=t._keras_history.operation.name,
        )
        for t in keras.tree.flatten(inputs)
    ]

    def clone(layer: Any) -> Any:
        config = layer.get_config()
        if isinstance(layer, keras.layers.Layer) and "dtype" in config:
            config = {**config, "dtype": dtype}
        return type(layer).from_config(config)

    what = f"copy {describe_model(model)} with every layer and float keras.Input in {dtype}"
    tensors = keras.tree.pack_sequence_as(inputs, made)
    return cloned_with_weights(model, clone, what, input_tensors=tensors, recursive=True)


class DtypeCopies:
    """The copies :func:`with_dtype` makes of one model, each dtype's made once and shared:
    an audit's float64 reference and its float64 fix call the same copy on the same sample,
    and neither changes it (a call that trains would move its statistics: such an audit
    makes none of these, ``analyses/audit/_check.py``). A copy Keras cannot make raises each
    time it is asked for, as :func:`with_dtype` does.

    Args:
        model: the model copied (never changed).

    >>> import keras
    >>> inputs = keras.Input((3,))
    >>> copies = DtypeCopies(keras.Model(inputs, keras.layers.Dense(2)(inputs)))
    >>> copies.get("float64") is copies.get("float64")
    True
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self._made: dict[str, Any] = {}

    def get(self, dtype: str) -> Any:
        """The model with every layer and float Input in ``dtype`` (:func:`with_dtype`).

        Args:
            dtype: the copy's dtype.

        Returns:
            The copy, made at the first ask.
        """
        if dtype not in self._made:
            self._made[dtype] = with_dtype(self.model, dtype)  # no copies: made here
        return self._made[dtype]


def _as_is(layer: Any) -> Any:
    return type(layer).from_config(layer.get_config())


def ids_received(
    model: Any, sample: Any, readers: tuple[str, ...], index: int, kwargs: dict | None = None
) -> FixMeasure:
    """What the layers at ``readers`` (audit paths) received as their first argument in one
    call of ``model`` on ``sample``, against the ``index``-th input given: how many ids
    changed on the way (only readers handed an array of the input's shape are counted), and
    what they raised.

    Args:
        model: the model, or its copy.
        sample: the audited sample.
        readers: the audit paths of the layers that take the ids as indices.
        index: which of the model's inputs holds the ids.
        kwargs: the call's keyword arguments.

    Returns:
        A ``FixMeasure`` with ``readers``, ``ids``, ``ids_changed`` and ``raised`` (its
        ``finding`` left ``True``: the caller's rule says).
    """
    import keras

    given = np.asarray(keras.tree.flatten(sample)[index])
    seen: dict[str, np.ndarray] = {}

    def wrap(path: str, original: Any) -> Any:
        def call(*args: Any, **kw: Any) -> Any:
            if args and path not in seen:
                seen[path] = numpy_values(args[0])
            return original(*args, **kw)

        return call

    raised = ""
    with contextlib.ExitStack() as stack:
        for layer, path, _ in layer_paths(model).values():
            if path in readers:
                stack.enter_context(wrapped_entry_points(layer, lambda _n, o, p=path: wrap(p, o)))
        try:
            model(sample, **(kwargs or {}))
        except Exception as error:  # an id out of range: the reader raises (tf, torch, numpy)
            raised = f"{type(error).__name__}: {as_sentence(str(error))}"[:200]
    compared = [a for a in seen.values() if a.shape == given.shape]
    changed = sum(int((a.astype(np.float64) != given.astype(np.float64)).sum()) for a in compared)
    return FixMeasure(
        finding=True,
        readers=tuple(readers),
        ids=given.size * len(compared) if compared else None,
        ids_changed=changed if compared else None,
        raised=raised.split(":")[0] if raised else "",
    )
