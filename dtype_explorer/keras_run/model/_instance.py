"""A user's layer, model, loss or metric *instance*, probed as it is: it travels (to a worker,
or to the in-process probe's copy) in Keras's own format, a ``.keras`` archive written in
memory (config, weights, assets: a quantized kernel, an adapted vocabulary), and is loaded
back under Keras's safe mode, with the custom classes the archive names registered for that
load only. The user's object is never called, built or changed: every probe works on a copy.

What Keras's format leaves out travels beside it, and is put back on the copy: a metric's
state (its variables are not saved in an archive) and a loss's dtype (``Loss.get_config``
has none).

>>> import keras
>>> layer = keras.layers.Dense(2, dtype="bfloat16")
>>> layer.build((None, 3))
>>> copy = pack(layer).load()
>>> copy is layer, copy.dtype_policy.name, copy.kernel.dtype
(False, 'bfloat16', 'bfloat16')
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dtype_explorer.keras_run._compat import load_archive
from dtype_explorer.keras_run._instance_kind import instance_kind, own_policy
from dtype_explorer.keras_run._lazy_tensorflow import tensorflow_if_imported
from dtype_explorer.keras_run.model._copy import policy_clone, write_archive
from dtype_explorer.records import Supplied

#: What an instance probe works on: the kinds of Keras object that are probed as they are.
INSTANCE_KINDS = ("layer", "metric", "loss")


@dataclass(frozen=True)
class Packed:
    """An instance in Keras's own format, and what that format leaves out.

    Attributes:
        kind: ``"layer"``, ``"metric"`` or ``"loss"``.
        class_name: the instance's class, for messages (``"Dense"``).
        archive: the ``.keras`` archive's bytes (config, weights, assets).
        custom: the custom classes and functions the archive names, by registered name;
            registered only while the archive loads.
        policy: the instance's dtype policy name (``"int8_from_bfloat16"``).
        state: a metric's variables' values, in order (an archive holds none of them).
        keras_class: the instance's class when it is Keras's own ``keras.layers`` class of
            that name (an adapted ``TextVectorization``), not a user's subclass; else ``None``.
    """

    kind: str
    class_name: str
    archive: bytes
    custom: dict[str, Any] = field(default_factory=dict)
    policy: str = "float32"
    state: tuple[np.ndarray, ...] = ()
    keras_class: str | None = None

    def load(self) -> Any:
        """A fresh copy of the instance: the archive loaded under safe mode (no lambdas or
        marshalled code), ``custom`` registered for this load only, what the archive leaves
        out put back."""
        import keras
        from keras.src.saving.serialization_lib import SafeModeScope

        with SafeModeScope(True), keras.saving.custom_object_scope(self.custom):
            copy = load_archive(self.archive, compile=False, safe_mode=True)
        if self.kind == "loss" and own_policy(copy) != self.policy:
            from keras.src import dtype_policies

            copy._dtype_policy = dtype_policies.get(self.policy)
            copy._dtype = copy._dtype_policy.compute_dtype
        for variable, value in zip(copy.variables if self.kind == "metric" else (), self.state):
            variable.assign(value)
        return copy

    def rebuilt(self, policy: str) -> tuple[Any, Supplied]:
        """The instance rebuilt from its config under ``policy`` (the user asked for another
        one than its own), and the note that says what that dropped."""
        import keras
        from keras.src.saving.serialization_lib import SafeModeScope

        copy = self.load()
        config = {k: v for k, v in copy.get_config().items() if k != "dtype"}
        with SafeModeScope(True), keras.saving.custom_object_scope(self.custom):
            rebuilt = type(copy).from_config(config)
        return rebuilt, rebuilt_note(self.class_name, self.policy, policy, dropped(copy))

    def widened(self, dtype: str) -> Any:
        """A copy under the policy ``dtype`` (a numerics reference; weights are set by the
        caller): a model cloned layer by layer, a layer from its config."""
        import keras
        from keras.src.saving.serialization_lib import SafeModeScope

        copy = self.load()
        with SafeModeScope(True), keras.saving.custom_object_scope(self.custom):
            if isinstance(copy, keras.Model):
                return policy_clone(copy, dtype)
            return type(copy).from_config({**copy.get_config(), "dtype": dtype})


def pack(target: Any) -> Packed:
    """``target`` (a Keras layer, model, loss or metric instance) in Keras's format.

    Args:
        target: the instance; only read (written to an archive), never called or changed.

    Returns:
        The ``Packed`` instance; ``Packed.load()`` gives a copy.

    Raises:
        TypeError: ``target`` is not a Keras instance.
        Exception: what Keras raised writing the archive (a layer whose ``get_config`` is
            missing or not JSON).

    >>> import keras
    >>> metric = keras.metrics.MeanIoU(num_classes=2)
    >>> _ = metric.update_state([0, 1], [1, 1])
    >>> packed = pack(metric)
    >>> packed.kind, packed.policy == metric.dtype
    ('metric', True)
    >>> keras.ops.convert_to_numpy(packed.load().variables[0]).tolist()
    [[0, 1], [0, 1]]
    """
    import keras

    kind = instance_kind(target)
    if kind is None:
        raise TypeError(f"not a Keras layer, model, loss or metric instance: {type(target)}")
    buffer = io.BytesIO()
    # save_model's own checks (``model.built``) are a Layer's: a metric or loss has none; the
    # config written imports no TensorFlow where nothing has (the worker's path comes here)
    with tensorflow_if_imported():
        write_archive(target, buffer)
    archive = buffer.getvalue()
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        named = _registered_names(json.loads(zf.read("config.json")))
    state = (
        tuple(np.array(keras.ops.convert_to_numpy(v.value)) for v in target.variables)
        if kind == "metric"
        else ()
    )
    name = type(target).__name__
    return Packed(
        kind=kind,
        class_name=name,
        archive=archive,
        custom=_custom_objects(target, named),
        policy=own_policy(target),
        state=state,
        keras_class=name if type(target) is getattr(keras.layers, name, None) else None,
    )


def _registered_names(config: Any) -> set[str]:
    """Every ``registered_name`` in a serialized config (the custom objects it names)."""
    names: set[str] = set()
    stack = [config]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("registered_name"), str):
                names.add(item["registered_name"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return names


def _custom_objects(target: Any, named: set[str]) -> dict[str, Any]:
    """The custom classes and functions among ``named``: the instance's own classes (its
    layers', not Keras's) and this session's registered objects."""
    import keras

    found: dict[str, Any] = {}
    layers = target._flatten_layers() if isinstance(target, keras.layers.Layer) else [target]
    for obj in layers:
        cls = type(obj)
        if not cls.__module__.startswith("keras"):
            found[keras.saving.get_registered_name(cls)] = cls
    found.update(keras.saving.get_custom_objects())
    return {name: obj for name, obj in found.items() if name in named}


def dropped(instance: Any) -> tuple[str, ...]:
    """What a rebuild from ``instance``'s config loses: its weights, its quantization, its
    adapted state (a vocabulary, a mean and variance: assets or non-trainable state)."""
    lost = []
    if getattr(instance, "weights", None):
        lost.append(f"its {len(instance.weights)} weights (freshly initialized instead)")
    mode = getattr(getattr(instance, "dtype_policy", None), "quantization_mode", None)
    if mode:
        lost.append(f"its {mode} quantization")
    if getattr(instance, "is_adapted", False) or _has_assets(instance):
        lost.append("its adapted state (vocabulary, statistics)")
    return tuple(lost)


def _has_assets(instance: Any) -> bool:
    """Whether the instance saves state beside its variables (a lookup table's vocabulary)."""
    return callable(getattr(instance, "save_assets", None))


def rebuilt_note(name: str, own: str, asked: str, lost: tuple[str, ...]) -> Supplied:
    """The ``Supplied`` record of an instance rebuilt under another policy than its own.

    >>> note = rebuilt_note("Dense", "bfloat16", "float32", ("its 2 weights",))
    >>> note.value
    "Dense rebuilt from its config under policy 'float32'"
    >>> note.why
    "policy= differs from its own 'bfloat16'; dropped its 2 weights"
    """
    said = "; dropped " + ", ".join(lost) if lost else "; nothing else dropped"
    return Supplied(
        part="layer",
        value=f"{name} rebuilt from its config under policy {asked!r}",
        why=f"policy= differs from its own {own!r}{said}",
    )
