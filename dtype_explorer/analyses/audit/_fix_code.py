"""A proven fix written as the user would write it: ``dtype="float32"`` on the named layers
where the user makes them (their own Sequential or Functional model), else
``keras.models.clone_model`` with those layers' dtype changed (a library's model, a layer of a
nested model); a ``keras.dtype_policies.DTypePolicyMap`` keyed by layer paths, passed as the
model's ``dtype``; a ``keras.Input(dtype=...)``; every layer in another dtype (the model
rebuilt); a ``LossScaleOptimizer``. The code is what the audit ran on its copy.

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


def input_code(shape: tuple, dtype: str, readers: tuple[str, ...], why: str = "") -> str:
    """``keras.Input(shape=..., dtype=...)`` in place of the model's Input; ``why``: what it
    was proven to do, else that ids reach ``readers`` intact.

    >>> print(input_code((3,), "int32", ("m/emb",)))
    inputs = keras.Input(shape=(3,), dtype="int32")   # proven on a copy: ids reach m/emb intact
    """
    why = why or (f"ids reach {', '.join(readers)} intact" if readers else "")
    said = f": {why}" if why else ""
    return f'inputs = keras.Input(shape={shape!r}, dtype="{dtype}")   # proven on a copy{said}'


def float32_code(chosen: Any, classes: dict[str, str], root_class: str, spelled: str) -> str:
    """The float32 set a ``keras_run`` trial ran (``how``, ``layers``, ``policy_map``,
    ``default_policy``, ``options``), as code: a ``DTypePolicyMap`` for ``policy-map``, else
    ``dtype="float32"`` on the layers (:func:`layer_dtype_code`).

    Args:
        chosen: the trial that was proven.
        classes: each audit path's class as user code writes it (``LayerCall.spelled``).
        root_class: the model's ``LayerCall.layer_class``.
        spelled: how user code names the model's class (for a map).

    Returns:
        The code.
    """
    if chosen.how == "policy-map":
        return policy_map_code(chosen.policy_map, chosen.default_policy, spelled)
    return layer_dtype_code(chosen.layers, classes, root_class, chosen.options)


def model_dtype_code(dtype: str, inputs: list[tuple[tuple, str]]) -> str:
    """Every layer and float ``keras.Input`` of the model in ``dtype``, made as the audit made
    its copy (``clone_model`` with new Inputs; ``inputs``: each Input's shape and dtype).

    >>> print(model_dtype_code("float64", [((4,), "float64")]))
    def in_float64(layer):  # proven on a copy: every layer and float keras.Input in float64
        return type(layer).from_config({**layer.get_config(), "dtype": "float64"})
    <BLANKLINE>
    inputs = keras.Input(shape=(4,), dtype="float64")
    fixed = keras.models.clone_model(
        model, input_tensors=inputs, clone_function=in_float64, recursive=True
    )
    fixed.set_weights(model.get_weights())
    """
    made = [f'keras.Input(shape={shape!r}, dtype="{d}")' for shape, d in inputs]
    tensors = made[0] if len(made) == 1 else "[" + ", ".join(made) + "]"
    return "\n".join(
        [
            f"def in_{dtype}(layer):  # proven on a copy: every layer and float keras.Input in "
            f"{dtype}",
            f'    return type(layer).from_config({{**layer.get_config(), "dtype": "{dtype}"}})',
            "",
            f"inputs = {tensors}",
            "fixed = keras.models.clone_model(",
            f"    model, input_tensors=inputs, clone_function=in_{dtype}, recursive=True",
            ")",
            "fixed.set_weights(model.get_weights())",
        ]
    )


def loss_scale_code(optimizer: str, recovered: int) -> str:
    """The optimizer wrapped in a ``LossScaleOptimizer``, the model compiled again with it.

    >>> print(loss_scale_code("Adam", 12))
    # proven on a copy: one model.fit step recovered 12 gradient values that underflowed to 0
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam())  # your arguments
    model.compile(optimizer=optimizer, loss=model.loss)
    """
    return "\n".join(
        [
            f"# proven on a copy: one model.fit step recovered {recovered} gradient value"
            f"{'s' if recovered != 1 else ''} that underflowed to 0",
            f"optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.{optimizer}())"
            "  # your arguments",
            "model.compile(optimizer=optimizer, loss=model.loss)",
        ]
    )


def quantize_filters_code(mode: str, names: list[str], config: str, error: float) -> str:
    """``model.quantize`` leaving the layers named ``names`` float, as the audit ran it.

    >>> print(quantize_filters_code("int8", ["head"], "", 0.01))
    # proven on a copy: the output error is 0.01 of its largest value, these layers float
    model.quantize("int8", filters=lambda layer: layer.name not in ("head",))
    """
    quoted = ", ".join(f'"{n}"' for n in names) + ("," if len(names) == 1 else "")
    return "\n".join(
        [
            f"# proven on a copy: the output error is {error:.2g} of its largest value, these "
            "layers float",
            f'model.quantize("{mode}"{config}, filters=lambda layer: layer.name not in ({quoted}))',
        ]
    )


def quantize_policy_code(how: str, policy: str, mode: str, config: str, spelled: str) -> str:
    """The model made again under ``policy`` (``how``: ``"cloned"`` or ``"reloaded"``, as
    ``keras_run.policy_rebuild`` made it), then quantized, as the audit ran it.

    >>> print(quantize_policy_code("reloaded", "mixed_bfloat16", "int8", "", "MyModel"))
    # proven on a copy: quantize("int8") runs under mixed_bfloat16
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    fixed = MyModel.from_config({**model.get_config(), "dtype": "mixed_bfloat16"})
    keras.config.set_dtype_policy(previous)
    fixed.set_weights(model.get_weights())
    fixed.quantize("int8")
    """
    head = f'# proven on a copy: quantize("{mode}") runs under {policy}'
    tail = ["fixed.set_weights(model.get_weights())", f'fixed.quantize("{mode}"{config})']
    if how == "reloaded":
        return "\n".join(
            [
                head,
                "previous = keras.config.dtype_policy()",
                f'keras.config.set_dtype_policy("{policy}")',
                f'fixed = {spelled}.from_config({{**model.get_config(), "dtype": "{policy}"}})',
                "keras.config.set_dtype_policy(previous)",
                *tail,
            ]
        )
    name = "in_" + policy.replace("-", "_")
    return "\n".join(
        [
            head,
            f"def {name}(op):  # each layer under {policy}; Keras operations as they are",
            "    config = op.get_config()",
            "    if isinstance(op, keras.layers.Layer):",
            f'        config = {{**config, "dtype": "{policy}"}}',
            "    return type(op).from_config(config)",
            "",
            f"fixed = keras.models.clone_model(model, clone_function={name}, recursive=True)",
            *tail,
        ]
    )
