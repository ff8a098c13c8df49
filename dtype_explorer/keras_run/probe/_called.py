"""The call a probe makes, recorded for "copy as code" (``ProbeResult.called``, a
``records.KerasCall``): a layer's class and the keyword arguments it was built with (the
catalog's, the user's, the seed a mode set), its inputs as nested and the call's keyword
arguments; an op's arguments as ``keras.ops`` got them (the catalog's fixed inputs, the
user's keywords bound as the probe binds them). Each array with its dtype and shape, its
values where small, whether it was made a backend tensor first. Recording never changes or
stops a probe: what cannot be recorded is said (``unwritable``), or the answer has none.
"""

from __future__ import annotations

import json
from typing import Any

from dtype_explorer.keras_run._as_code import Ref, Unwritable, code_array, json_node, value_node
from dtype_explorer.keras_run._values import call_arguments
from dtype_explorer.keras_run.catalog import INDEX_HIGH, LayerEntry, OpEntry, op_calls
from dtype_explorer.records import CodeArray, KerasCall, ProbeSpec


def layer_called(
    spec: ProbeSpec, entry: LayerEntry, cls: Any, kwargs: dict[str, Any], inputs: Any
) -> KerasCall | None:
    """A layer probe's call: ``cls`` (the catalog's class, the user's, or an instance's
    maker) built with ``kwargs``, called on ``inputs`` (``_stages.LayerInputs``) nested as
    given, with the spec's call keyword arguments; ``None`` if it cannot be recorded."""
    try:
        arrays = [
            code_array(
                leaf,
                listed=isinstance(leaf, list),
                user=i if inputs.user else None,
                made=_made(spec, inputs.roles[i] if i < len(inputs.roles) else "float"),
            )
            for i, leaf in enumerate(inputs.leaves)
        ]
        nested = inputs.nested([Ref(i) for i in range(len(arrays))])
        args = tuple(value_node(node, arrays) for node in nested)
        keywords = {k: value_node(v, arrays) for k, v in call_arguments(spec.call_kwargs).items()}
        name, custom, instance = _layer_name(spec, entry, cls)
        config = _own_config(cls) if instance and not custom else None
        return KerasCall(
            kind="layer",
            name=name,
            custom=custom,
            instance=instance and config is None,
            config=config,
            init_kwargs={} if instance else {k: json_node(v) for k, v in kwargs.items()},
            args=args,
            kwargs=keywords,
            arrays=tuple(arrays),
            style=entry.input_style,
        )
    except Exception:  # never the probe's failure: the answer then has no recorded call
        return None


def _own_config(maker: Any) -> Any:
    """A user's instance of Keras's own layer class, as its serialized config (JSON): the
    script makes it again from that; ``None`` where it cannot be written."""
    try:
        return json.loads(json.dumps(maker.serialized()))
    except Exception:
        return None


def _serialized(instance: Any) -> Any:
    """An instance of Keras's own class as its serialized config (JSON), else ``None``."""
    import keras

    if not type(instance).__module__.startswith("keras."):
        return None
    try:
        return json.loads(json.dumps(keras.saving.serialize_keras_object(instance)))
    except Exception:
        return None


def _made(spec: ProbeSpec, role: str) -> str:
    """How the tool made a sample of ``role``, for a stand-in's comment."""
    if role == "index":
        return f"integers below {INDEX_HIGH}, seed {spec.seed}"
    return f"the {spec.values!r} preset, seed {spec.seed}"


def _layer_name(spec: ProbeSpec, entry: LayerEntry, cls: Any) -> tuple[str, bool, bool]:
    """How the script names the layer: ``keras.layers.<Name>`` for Keras's own class, the
    user's class by its qualified name; and whether it is the user's class, and an instance."""
    packed = getattr(cls, "packed", None)
    if packed is not None:  # an InstanceMaker: the user's instance
        keras_class = getattr(packed, "keras_class", None)
        if keras_class:
            return f"keras.layers.{keras_class}", False, True
        return spec.target.removeprefix("custom:"), True, True
    if spec.target.startswith("custom:"):
        return getattr(cls, "__qualname__", spec.target.removeprefix("custom:")), True, False
    return f"keras.layers.{entry.name}", False, False


def op_called(
    spec: ProbeSpec, entry: OpEntry, inputs: Any, kwargs: dict[str, Any]
) -> KerasCall | None:
    """An op probe's call, after the eager call made its values (``_op._OpInputs.made``, in
    call order): ``keras.ops.<name>`` with its arguments bound as the probe binds them."""
    name = f"keras.{entry.name}"
    function = entry.name.rsplit(".", 1)[-1]
    if function in op_calls.CONTROL_FLOW and entry.name.count(".") == 1:
        return KerasCall(
            kind="op",
            name=name,
            unwritable=f"{entry.name} takes Python functions: the ones the probe passes are "
            "dtype-explorer's own; dx.probe above asks it again",
        )
    try:
        counter = iter(range(len(inputs.made)))
        args, _ = op_calls.build(inputs.leaves, lambda leaf, i: Ref(next(counter)))
        args, bound = op_calls.bound(op_calls.resolve(entry.name), args, dict(kwargs))
        arrays = [_op_array(spec, made, asked) for made, asked in zip(inputs.made, inputs.asked)]
        refs = {i: a for i, a in enumerate(arrays) if isinstance(a, CodeArray)}
        kept = [refs[i] for i in sorted(refs)]
        renumbered = {old: new for new, old in enumerate(sorted(refs))}

        def node(value: Any) -> Any:
            if isinstance(value, Ref) and value.index not in refs:
                return {"value": arrays[value.index]}  # a Python number, passed as it is
            if isinstance(value, Ref):
                return {"array": renumbered[value.index]}
            return value_node(value, kept)

        return KerasCall(
            kind="op",
            name=name,
            args=tuple(_nodes(a, node) for a in args),
            kwargs={k: _nodes(v, node) for k, v in bound.items()},
            arrays=tuple(kept),
        )
    except Unwritable as why:
        return KerasCall(kind="op", name=name, unwritable=f"the call was given {why}")
    except Exception:  # never the probe's failure: the answer then has no recorded call
        return None


def _nodes(value: Any, node: Any) -> Any:
    """``value`` as nodes, each ``Ref`` and leaf through ``node``."""
    if isinstance(value, tuple | list) and not isinstance(value, Ref):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {kind: [_nodes(v, node) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[k, _nodes(v, node)] for k, v in value.items()]}
    return node(value)


def _op_array(spec: ProbeSpec, made: tuple[dict, int | None, Any], asked: str | None) -> Any:
    """One value of an op's call: a Python number as it is; an array (the user's by its
    number; a list the user gave, ``listed``) with the dtype it was made a tensor of."""
    _, i, value = made
    if isinstance(value, bool | int | float):
        return value
    user = i if spec.user_values is not None and i is not None else None
    how = "the catalog's fixed input" if i is None else f"the probe's sample, seed {spec.seed}"
    return code_array(value, tensor=asked, listed=isinstance(value, list), user=user, made=how)


def objective_called(
    spec: ProbeSpec,
    entry: Any,
    values: list[Any],
    built: dict[str, Any],
    call_kwargs: dict[str, Any],
    *,
    instance: Any = None,
) -> KerasCall | None:
    """A loss's or a metric's call: a function (``keras.losses.mean_squared_error``) called on
    ``values`` with its keywords, or a class built with ``built`` (the user's ``instance``: its
    serialized config, where Keras can write it, else a name to fill in) and called (a metric:
    ``update_state``, then ``result()``); ``None`` if it cannot be recorded."""
    function = entry.kind in ("loss-function", "metric-function")
    name = f"keras.{entry.name}"
    kind = "op" if function else "loss" if entry.kind == "loss" else "metric"
    try:
        arrays: list[CodeArray] = []
        args = []
        for i, value in enumerate(values):
            if spec.user_values is not None:
                arrays.append(code_array(value, listed=isinstance(value, list), user=i))
                args.append({"array": len(arrays) - 1})
            else:  # the tool's sample, a backend tensor of the asked dtype
                args.append(value_node(value, arrays))
        keywords = {k: value_node(v, arrays) for k, v in call_kwargs.items()}
        given = instance is not None
        init = {} if function or given else {k: value_node(v, []) for k, v in built.items()}
        config = _serialized(instance) if given else None
        return KerasCall(
            kind=kind,
            name=name,
            instance=given and config is None,
            config=config,
            init_kwargs=init,
            args=tuple(args),
            kwargs=keywords,
            arrays=tuple(arrays),
        )
    except Unwritable as why:
        return KerasCall(kind=kind, name=name, unwritable=f"the call was given {why}")
    except Exception:  # never the probe's failure: the answer then has no recorded call
        return None
