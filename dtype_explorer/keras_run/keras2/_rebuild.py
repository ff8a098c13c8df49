"""A Keras 3 model rebuilt in Keras 2 (``tf_keras``), in the Keras 2 engine's worker: its
Keras 3 config (``keras.saving.serialize_keras_object``, the arguments the user did not set
taken out) translated into Keras 2's, the model built from it and its weights set layer by
layer.

What the translation changes: a dtype policy serialized as a dict (``{"class_name":
"DTypePolicy", "config": {"name": "mixed_float16"}}``) becomes its name, as Keras 2 writes it;
``InputLayer``'s ``batch_shape`` becomes ``batch_input_shape``; a functional model's nodes
(``{"args": [<keras tensor>], "kwargs": {}}``) become Keras 2's ``[[name, node, tensor,
kwargs]]``. An argument Keras 2's layer does not take is dropped where it is ``None`` (a
newer Keras's default, ``quantization_config=None``) and named in a note; anything else Keras
2 lacks (a layer class, an argument set to a value, a quantized policy, a subclassed model or
a custom layer) is refused by name (:class:`Keras2Refusal`).

>>> policy = {"module": "keras", "class_name": "DTypePolicy",
...           "config": {"name": "mixed_float16"}, "registered_name": None}
>>> _policy_name(policy, "Dense")
'mixed_float16'
>>> _node({"args": [{"class_name": "__keras_tensor__",
...                  "config": {"keras_history": ["x", 0, 0]}}], "kwargs": {}}, "Dense")
[['x', 0, 0, {}]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dtype_explorer.keras_run.model import init_parameters

#: Keras 3's model classes, as serialized, and the Keras 2 class each one is rebuilt as.
_MODELS = {"Functional": "Model", "Sequential": "Sequential"}
#: The arguments Keras 2's ``Layer.__init__`` takes through ``**kwargs``.
_LAYER_KWARGS = {
    "input_dim",
    "input_shape",
    "batch_input_shape",
    "batch_size",
    "weights",
    "activity_regularizer",
    "autocast",
    "implementation",
}
#: Keras 3's policy classes that have a Keras 2 counterpart (a policy name).
_FLOAT_POLICIES = ("DTypePolicy", "FloatDTypePolicy", "Policy")


class Keras2Refusal(ValueError):
    """What a Keras 3 model holds that Keras 2 lacks, by name."""


def rebuild_in_keras2(
    config: dict[str, Any],
    weights: dict[str, list[Any]],
    policy: str | None,
    model_policy: str | None = None,
) -> tuple[Any, list[str]]:
    """The Keras 3 model serialized as ``config`` rebuilt with tf_keras, under Keras 2's global
    policy ``policy`` (the Keras 3 process's, which the layers given no dtype were built
    under), its weights set from ``weights`` (by top-level layer name).

    Args:
        config: ``keras.saving.serialize_keras_object(model)`` (Keras 3), made JSON.
        weights: each top-level layer's ``get_weights()``, by layer name.
        policy: the Keras 3 process's global dtype policy's name (``None``: Keras 2's own).
        model_policy: the Keras 3 model's own policy (a Functional model's config does not
            hold it): the Keras 2 model gets it, as if built under it.

    Returns:
        The Keras 2 model and the notes on what the translation left out.

    Raises:
        Keras2Refusal: the model holds what Keras 2 lacks, named.
    """
    import tf_keras

    dropped: list[str] = []
    translated = _model_config(config, dropped)
    kind = getattr(tf_keras, _MODELS[config["class_name"]])
    if policy is not None:
        tf_keras.mixed_precision.set_global_policy(policy)
    try:
        model = kind.from_config(translated)
    except Keras2Refusal:
        raise
    except Exception as exc:
        raise Keras2Refusal(
            f"tf_keras {tf_keras.__version__} cannot rebuild this model from its translated "
            f"config ({type(exc).__name__}: {str(exc).splitlines()[0][:300]})"
        ) from None
    if model_policy is not None and model_policy != model.dtype_policy.name:
        model._set_dtype_policy(model_policy)
    _set_weights(model, weights)
    notes = []
    if dropped:
        notes.append(
            "left out of the config, unknown to Keras 2 and None (their default): "
            + ", ".join(sorted(set(dropped)))
        )
    return model, notes


def _model_config(config: dict[str, Any], dropped: list[str]) -> dict[str, Any]:
    """The Keras 2 config of a serialized Keras 3 Functional or Sequential model."""
    name = config.get("class_name")
    module = str(config.get("module", ""))
    if name not in _MODELS or not module.startswith("keras"):
        raise Keras2Refusal(
            f"Keras 2 can rebuild a Functional or Sequential Keras 3 model from its config; "
            f"this one is {module}.{name} (a subclassed model: write it in tf.keras and audit "
            "it in the Keras 2 kernel)"
        )
    inner = dict(config["config"])
    layers = [_layer_entry(entry, dropped) for entry in inner.pop("layers")]
    if name == "Sequential":
        out = {"name": inner["name"], "layers": layers}
        if inner.get("build_input_shape") is not None:
            out["build_input_shape"] = inner["build_input_shape"]
        return out
    return {
        "name": inner["name"],
        "trainable": inner.get("trainable", True),
        "layers": layers,
        "input_layers": _endpoints(inner["input_layers"]),
        "output_layers": _endpoints(inner["output_layers"]),
    }


def _endpoints(found: list[Any]) -> list[list[Any]]:
    """Keras 3 writes one input as ``[name, 0, 0]``, Keras 2 always a list of them."""
    return [list(found)] if found and isinstance(found[0], str) else [list(e) for e in found]


def _layer_entry(entry: dict[str, Any], dropped: list[str]) -> dict[str, Any]:
    """One serialized Keras 3 layer of a model as Keras 2's functional config holds it."""
    cls = _keras2_layer_class(entry)
    name = entry["class_name"]
    config = {k: _argument(v, name, k) for k, v in entry["config"].items()}
    if name == "InputLayer" and "batch_shape" in config:
        config["batch_input_shape"] = config.pop("batch_shape")
    known = _parameters(cls)
    for key in [k for k in config if k not in known]:
        if config[key] is not None:
            raise Keras2Refusal(
                f"Keras 2's tf.keras.layers.{name} has no argument {key!r}: the layer "
                f"{config.get('name')!r} sets {name}.{key}={config[key]!r}"
            )
        del config[key]
        dropped.append(f"{name}.{key}")
    out = {"class_name": name, "config": config}
    if "inbound_nodes" in entry:
        out["name"] = config.get("name", entry.get("name"))
        out["inbound_nodes"] = [_node(n, name) for n in entry["inbound_nodes"]]
    return out


def _keras2_layer_class(entry: dict[str, Any]) -> type:
    """tf_keras's class of the serialized Keras 3 layer ``entry``, or :class:`Keras2Refusal`."""
    import tf_keras

    name, module = entry.get("class_name"), str(entry.get("module") or "")
    if not module.startswith("keras"):
        raise Keras2Refusal(
            f"the layer class {module}.{name} is not Keras's own: Keras 2 cannot rebuild it "
            "from a Keras 3 config (write it in tf.keras and audit it in the Keras 2 kernel)"
        )
    if name in _MODELS:
        raise Keras2Refusal(f"a {name} model nested inside the model is not rebuilt in Keras 2")
    found = getattr(tf_keras.layers, str(name), None)
    if not isinstance(found, type):
        raise Keras2Refusal(
            f"Keras 2 has no layer {name}: tf.keras.layers has no {name} "
            f"(tf_keras {tf_keras.__version__})"
        )
    return found


def _argument(value: Any, layer: str, key: str) -> Any:
    """A layer argument as Keras 2 reads it: a dtype policy by its name."""
    if key == "dtype" and isinstance(value, dict):
        return _policy_name(value, layer)
    return value


def _policy_name(policy: dict[str, Any], layer: str) -> str:
    """A Keras 3 dtype policy serialized as a dict, as Keras 2 names it."""
    kind = policy.get("class_name")
    if kind not in _FLOAT_POLICIES:
        raise Keras2Refusal(
            f"Keras 2 has no {kind} (the dtype policy of a {layer}): only float policies "
            f"(float32, mixed_float16, ...) have a Keras 2 counterpart; received: {policy!r}"
        )
    return str(policy["config"]["name"])


def _node(node: Any, layer: str) -> list[list[Any]]:
    """A Keras 3 functional node (``{"args": [...], "kwargs": {...}}``) as Keras 2's: one
    ``[layer name, node index, tensor index, kwargs]`` per input tensor."""
    if not isinstance(node, dict):
        return node  # already Keras 2's
    args, kwargs = node.get("args", []), dict(node.get("kwargs") or {})
    if len(args) != 1 or _tensors(kwargs):
        raise Keras2Refusal(
            f"a {layer} called with {len(args)} positional arguments or tensors among its "
            f"keyword arguments is not rebuilt in Keras 2; received: {node!r}"
        )
    tensors = _tensors(args[0])
    return [
        [*t["config"]["keras_history"], kwargs if i == 0 else {}] for i, t in enumerate(tensors)
    ]


def _tensors(value: Any) -> list[dict[str, Any]]:
    """The serialized Keras tensors in ``value``, in order."""
    if isinstance(value, dict):
        if value.get("class_name") == "__keras_tensor__":
            return [value]
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, list):
        return [t for v in value for t in _tensors(v)]
    return []


def _parameters(cls: type) -> set[str]:
    """Every named ``__init__`` parameter along ``cls``'s MRO, and Keras 2's layer kwargs."""
    return init_parameters(cls) | set(_LAYER_KWARGS)


def _set_weights(model: Any, weights: dict[str, list[Any]]) -> None:
    """Each top-level layer's weights set from Keras 3's, by name; a count or a shape that
    differs is refused, naming the layer."""
    for layer in model.layers:
        given = [np.asarray(w) for w in weights.get(layer.name, [])]
        own = layer.get_weights()
        if [w.shape for w in own] != [w.shape for w in given]:
            raise Keras2Refusal(
                f"the weights of {type(layer).__name__} {layer.name!r} differ between Keras 3 "
                f"and Keras 2: Keras 3 has {[w.shape for w in given]}, Keras 2 "
                f"{[w.shape for w in own]}"
            )
        if own:
            layer.set_weights(given)
