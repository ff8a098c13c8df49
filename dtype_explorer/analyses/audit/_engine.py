"""The audit on another Keras release (an engine, ``dx.engines``): the model serialized here
(its config and weights), rebuilt in that release's worker on this process's backend, audited
there, and the report sent back.

Arguments the user did not set (left at this release's defaults, ``dtype="float32"`` among
them) are taken out first (:func:`user_set_only`): the older release builds each layer with
its own defaults, as its users do, under this process's global policy. A newer release writes
arguments an older one does not know (``quantization_config=None``): those left at ``None``
are dropped from the config before it is rebuilt, and named in a note; anything else the
older release refuses fails loudly.

>>> _older_config({"module": "keras.layers", "class_name": "Dense",
...                "config": {"units": 2, "not_an_argument": None}}, dropped := [])
{'module': 'keras.layers', 'class_name': 'Dense', 'config': {'units': 2}}
>>> dropped
['Dense.not_an_argument']
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
import math
import random
from collections.abc import Callable
from typing import Any

from dtype_explorer.errors import InvalidSpecError, first_line
from dtype_explorer.keras_run import arguments_given, describe_model, init_parameters
from dtype_explorer.records import AuditReport
from dtype_explorer.runtime import engines, pool

#: The key under which the config sent to an engine carries this process's global dtype
#: policy, which the layers given no dtype were built under (:func:`user_set_only`).
GLOBAL_POLICY = "dtype_explorer_global_policy"


@dataclasses.dataclass(frozen=True)
class EngineQuestion:
    """``check_model``'s question for another Keras release (``engine``), as both engines'
    audits take it: Keras 3 releases (:func:`check_on_engine`) and Keras 2
    (:func:`._audit_tf_keras.check_on_tf_keras`). ``requested``: the ``backends=`` asked for;
    ``options``: check_model's ``call_kwargs``, ``mode``, ``labels`` and ``quantize``."""

    model: Any
    sample: Any
    policy: str | None
    requested: list[str]
    timeout: float | None
    engine: str
    options: dict[str, Any]


def check_on_engine(
    asked: EngineQuestion, *, audit: Callable[..., dict[str, Any] | str]
) -> AuditReport:
    """``check_model`` in the engine's worker on this process's backend, on the model rebuilt
    there from its config and weights (``asked``); ``options`` are check_model's ``call_kwargs``,
    ``mode`` and ``labels``. ``audit`` (a module-level function, run in the worker) rebuilds
    the model there (:func:`rebuild`) and audits it: ``audit(config, weights, sample, policy,
    options)``, the report as a dict or why it could not be rebuilt. ``options``'
    ``quantize`` (a mode's name, :func:`quantize_by_name`) is checked and done there, by that
    release."""
    import keras

    model, sample, engine, options = asked.model, asked.sample, asked.engine, asked.options
    if engine.startswith("tf_keras"):
        raise InvalidSpecError(
            "check_on_engine rebuilds a model in a Keras 3 release; the Keras 2 engine's "
            f"is _audit_tf_keras.check_on_tf_keras; received: engine={engine!r}"
        )
    if asked.requested:
        raise InvalidSpecError(
            "check_model on an engine audits on this process's backend only; give backends= "
            f"or engine=, not both; received: backends={asked.requested!r}, engine={engine!r}"
        )
    config, sample = travelling(model, sample, engine)
    config = {**config, GLOBAL_POLICY: keras.config.dtype_policy().name}
    weights = [keras.ops.convert_to_numpy(w) for w in model.weights]
    if options.get("labels") is not None:
        options = {
            **options,
            "labels": keras.tree.map_structure(keras.ops.convert_to_numpy, options["labels"]),
        }
    engines.ensure(engine)
    backend = keras.backend.backend()
    future = pool.call(
        backend,
        audit,
        config,
        weights,
        sample,
        asked.policy,
        options,
        timeout=math.inf if asked.timeout is None else asked.timeout + 120,
        engine=engine,
    )
    answer = future.result()
    if isinstance(answer, str):
        raise InvalidSpecError(answer)
    report = AuditReport.from_dict(answer)
    note = f"audited with Keras {report.keras} (engine {engine}), the model rebuilt from its config"
    return report.model_copy(update={"engine": engine, "notes": (*report.notes, note)})


def travelling(model: Any, sample: Any, engine: str) -> tuple[dict[str, Any], Any]:
    """The model as it travels to an engine's worker: its config as JSON, holding only the
    arguments the user set (:func:`user_set_only`), and the sample as NumPy.

    Raises:
        InvalidSpecError: a config that is not JSON (a layer or argument Keras cannot
            serialize), naming the engine.
    """
    import keras

    try:
        config = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
    except (TypeError, ValueError) as exc:
        raise InvalidSpecError(
            f"{describe_model(model)} cannot be rebuilt from its config for engine "
            f"{engine!r}: {exc}"
        ) from None
    if sample is not None:
        sample = keras.tree.map_structure(keras.ops.convert_to_numpy, sample)
    return user_set_only(config, arguments_given(model)), sample


def quantize_by_name(quantize: Any, engine: str) -> str:
    """``check_model``'s ``quantize=`` for an engine: a mode by name (``"int8"``,
    ``"int4/128"``), which that release checks against its own modes and quantizes with. A
    ``keras.quantizers`` config is an object of the installed Keras, and is refused.

    >>> quantize_by_name(" int8", "keras==3.11.3")
    'int8'
    """
    if isinstance(quantize, str) and quantize.strip():
        return quantize.strip()
    raise InvalidSpecError(
        f"check_model(engine={engine!r}) quantizes the copy rebuilt there with that release's "
        "Keras: give quantize= as a mode name ('int8', 'float8', 'int4', 'int4/<block size>'); "
        "a keras.quantizers config belongs to the installed Keras and cannot be sent. "
        f"Received: quantize={quantize!r}"
    )


def rebuild(config: dict[str, Any], weights: list[Any]) -> tuple[Any, str | None] | str:
    """In an engine's worker: the model rebuilt from its ``config`` and ``weights`` with this
    release's Keras, and the note naming the arguments left out of the config (``None``: none);
    or why it could not be rebuilt."""
    import keras

    dropped: list[str] = []
    config = dict(config)
    policy = config.pop(GLOBAL_POLICY, None)
    saved = keras.config.dtype_policy()
    try:
        if policy is not None:  # the layers the user left without a dtype take this one
            keras.config.set_dtype_policy(policy)
        model = keras.saving.deserialize_keras_object(_older_config(config, dropped))
        model.set_weights(weights)
    except Exception as exc:
        return (
            f"Keras {keras.__version__} cannot rebuild this model from its config "
            f"({type(exc).__name__}: {first_line(str(exc))})"
        )
    finally:
        keras.config.set_dtype_policy(saved)
    note = None
    if dropped:
        note = (
            f"left out of the config, unknown to Keras {keras.__version__} and None (their "
            f"default): {', '.join(sorted(set(dropped)))}"
        )
    return model, note


def user_set_only(config: Any, given: dict[str, frozenset[str]] | None = None) -> Any:
    """``config`` (a serialized model, in this process's Keras) with every layer argument
    left at its default here taken out, so that the older release builds each layer with
    *its* defaults, as its users do (3.15.1 writes ``dtype="float32"`` for a Discretization
    given no dtype; Keras 3.11.3 built with that answers float32, without it int64).

    An argument is at its default when it equals the ``__init__`` parameter's default, or
    when the layer rebuilt here from its config without that argument writes the same value
    for it. The name and the arguments without a default are kept, and so is every argument
    the user gave, even at its default (``Discretization(dtype="float32")``: 3.11.3 answers
    float32 for it, as for its users who write that).

    Args:
        config: ``keras.saving.serialize_keras_object(model)`` made JSON.
        given: the arguments each layer was built with, by layer name
            (``keras_run.arguments_given``); a layer not named there is judged by its config
            alone.

    Returns:
        The same config with the arguments the user did not set left out (models, input
        layers and classes outside Keras kept as they are).
    """
    given = given or {}
    if isinstance(config, list):
        return [user_set_only(c, given) for c in config]
    if not isinstance(config, dict):
        return config
    out = {k: user_set_only(v, given) for k, v in config.items()}
    cls = _serialized_class(out) if isinstance(out.get("config"), dict) else None
    if cls is not None and _plain_layer(cls):
        at_default = _at_default(cls, config) - given.get(out["config"].get("name"), frozenset())
        out["config"] = {k: v for k, v in out["config"].items() if k not in at_default}
    return out


def _plain_layer(cls: type) -> bool:
    import keras

    return issubclass(cls, keras.layers.Layer) and not issubclass(
        cls, (keras.Model, keras.layers.InputLayer)
    )


def _at_default(cls: type, entry: dict[str, Any]) -> set[str]:
    """The arguments of the serialized layer ``entry`` left at their defaults here."""
    given = entry["config"]
    defaults = _init_defaults(cls)
    found = {k for k, v in given.items() if k in defaults and _json(defaults[k]) == v}
    for key in given.keys() - found - {"name"}:
        if key in defaults and _rebuilt_value(entry, key) == given[key]:
            found.add(key)
    return found


def _rebuilt_value(entry: dict[str, Any], key: str) -> Any:
    """``key``'s value in the config of the layer rebuilt from ``entry`` without ``key``
    (``_MISSING`` when it cannot be rebuilt so)."""
    import keras

    rest = {k: v for k, v in entry["config"].items() if k != key}
    bare = {k: entry[k] for k in ("module", "class_name", "registered_name") if k in entry}
    state = random.getstate()  # a fresh SeedGenerator draws from Python's stream
    try:
        layer = keras.saving.deserialize_keras_object({**bare, "config": rest})
        return _json(keras.saving.serialize_keras_object(layer))["config"].get(key, _MISSING)
    except Exception:  # the layer needs it: kept
        return _MISSING
    finally:
        random.setstate(state)


_MISSING = object()


def _json(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return _MISSING


def _init_defaults(cls: type) -> dict[str, Any]:
    """Every named ``__init__`` parameter along ``cls``'s MRO with a default, and that default
    (the subclass's first)."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        with contextlib.suppress(TypeError, ValueError):
            found.update(
                (p.name, p.default)
                for p in inspect.signature(init).parameters.values()
                if p.default is not p.empty
            )
    return found


def _older_config(config: Any, dropped: list[str]) -> Any:
    """``config`` (a serialized Keras object) with the arguments this process's Keras does not
    know left out where their value is ``None`` (what a newer release's default writes, e.g.
    ``quantization_config``); every other value is kept, so anything else fails loudly."""
    if isinstance(config, list):
        return [_older_config(c, dropped) for c in config]
    if not isinstance(config, dict):
        return config
    out = {k: _older_config(v, dropped) for k, v in config.items()}
    inner = out.get("config")
    cls = _serialized_class(out) if isinstance(inner, dict) else None
    if cls is not None:
        known = init_parameters(cls)
        for key in [k for k, v in inner.items() if v is None and k not in known]:
            del inner[key]
            dropped.append(f"{out['class_name']}.{key}")
    return out


def _serialized_class(config: dict[str, Any]) -> type | None:
    module, name = config.get("module"), config.get("class_name")
    if not isinstance(module, str) or not isinstance(name, str) or not module.startswith("keras"):
        return None
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return found if isinstance(found, type) else None
