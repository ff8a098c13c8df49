"""A proven fix written as the user would write it: ``dtype="float32"`` on the named layers
where the user makes them (their own Sequential or Functional model), else
``keras.models.clone_model`` with those layers' dtype changed (a library's model, a layer of a
nested model); a ``keras.dtype_policies.DTypePolicyMap`` keyed by layer paths, passed as the
model's ``dtype``; a ``keras.Input(dtype=...)``. The code is what the audit ran on its copy.

>>> print(policy_map_code({"block/attention": "float32", "block/attention/.*": "float32"},
...                       "mixed_float16", "keras_hub.models.GPT2Backbone"))
# proven on a copy: these layer paths in float32, every other layer as before
policy_map = keras.dtype_policies.DTypePolicyMap(default_policy="mixed_float16")
policy_map["block/attention"] = "float32"
policy_map["block/attention/.*"] = "float32"
fixed = keras_hub.models.GPT2Backbone.from_config({**model.get_config(), "dtype": policy_map})
fixed.set_weights(model.get_weights())
# or pass dtype=policy_map where you make it (its constructor, or from_preset)
"""

from __future__ import annotations

from typing import Any

#: The classes whose layers a user makes in their own code (``LayerCall.layer_class``).
USER_BUILT = ("Functional", "Sequential")


def layer_dtype_code(
    layers: tuple[str, ...],
    classes: dict[str, str],
    model_class: str,
    options: dict[str, Any],
) -> str:
    """``dtype="float32"`` on the layers at ``layers`` (audit paths): in their constructors
    where they are the user's own model's top-level layers, else through ``clone_model``.

    Args:
        layers: the audit paths put in float32.
        classes: each path's class as user code writes it (``LayerCall.spelled``).
        model_class: the model's ``LayerCall.layer_class``.
        options: the ``clone_model`` arguments the audit used beside ``clone_function``.

    Returns:
        The code.

    >>> print(layer_dtype_code(("m/big",), {"m/big": "keras.layers.Dense"}, "Functional", {}))
    keras.layers.Dense(..., name="big", dtype="float32")   # proven on a copy
    """
    names = [p.rsplit("/", 1)[-1] for p in layers]
    if model_class in USER_BUILT and all(p.count("/") == 1 for p in layers):
        return "\n".join(
            f'{classes.get(p) or "layer"}(..., name="{n}", dtype="float32")   # proven on a copy'
            for p, n in zip(layers, names, strict=True)
        )
    extra = "".join(f", {k}={v!r}" for k, v in options.items())
    quoted = ", ".join(f'"{n}"' for n in names)
    return "\n".join(
        [
            "def in_float32(layer):  # proven on a copy: these layers in float32, the others "
            "as they are",
            "    config = layer.get_config()",
            f"    if layer.name in ({quoted},):",
            '        config["dtype"] = "float32"',
            "    return type(layer).from_config(config)",
            "",
            f"fixed = keras.models.clone_model(model, clone_function=in_float32{extra})",
            "fixed.set_weights(model.get_weights())",
        ]
    )


def policy_map_code(policy_map: dict[str, str], default: str, model_class: str) -> str:
    """A ``DTypePolicyMap`` of ``policy_map`` over ``default``, the model made again with it
    as its dtype (``model_class``: how user code names the model's class)."""
    keys = [f'policy_map["{key}"] = "{policy}"' for key, policy in policy_map.items()]
    return "\n".join(
        [
            "# proven on a copy: these layer paths in float32, every other layer as before",
            f'policy_map = keras.dtype_policies.DTypePolicyMap(default_policy="{default}")',
            *keys,
            f'fixed = {model_class}.from_config({{**model.get_config(), "dtype": policy_map}})',
            "fixed.set_weights(model.get_weights())",
            "# or pass dtype=policy_map where you make it (its constructor, or from_preset)",
        ]
    )


def input_code(shape: tuple, dtype: str, readers: tuple[str, ...]) -> str:
    """``keras.Input(shape=..., dtype=...)`` in place of the model's Input.

    >>> print(input_code((3,), "int32", ("m/emb",)))
    inputs = keras.Input(shape=(3,), dtype="int32")   # proven on a copy: ids reach m/emb intact
    """
    why = f": ids reach {', '.join(readers)} intact" if readers else ""
    return f'inputs = keras.Input(shape={shape!r}, dtype="{dtype}")   # proven on a copy{why}'
