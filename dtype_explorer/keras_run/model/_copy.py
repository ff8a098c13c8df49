"""Copies of a user's model, so that an audit never changes it: a copy to train (the same
layers, policies and weights, compiled as the model is), a clone under another dtype policy,
and every variable put back bitwise after an eager ``training=True`` call.

A clone under a policy is built once per model and policy and reused while the model's config
and layout stay the same, the model's current weights copied in each time (issue 44: the
rebuild and its first call cost more than the audit's own passes).

>>> import keras, numpy as np
>>> inputs = keras.Input((3,))
>>> model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs))
>>> clone = policy_clone(model, "mixed_float16")
>>> [layer.dtype_policy.name for layer in clone.layers[1:]]  # after its InputLayer
['mixed_float16']
>>> model.layers[1].dtype_policy.name
'float32'
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import random
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from dtype_explorer.errors import InvalidSpecError, as_sentence, keras_message
from dtype_explorer.keras_run._compat import load_archive, save_archive
from dtype_explorer.keras_run._keras_state import global_seed_kept
from dtype_explorer.keras_run.model._model_trace import is_softmax
from dtype_explorer.keras_run.model._policy_rebuild import Rebuilt, global_policy, rebuild_under
from dtype_explorer.keras_run.model._samples import declared_inputs, describe_model, keras_flatten
from dtype_explorer.keras_run.model._zero_start import assets_copied, clone_with_weights


@contextlib.contextmanager
def variables_kept(model: Any) -> Iterator[None]:
    """Every variable of ``model`` (weights, moving statistics, seed states) put back bitwise:
    an eager ``training=True`` call updates some of them."""
    import keras

    saved = [(v, keras.ops.convert_to_numpy(v.value).copy()) for v in model.variables]
    try:
        yield
    finally:
        for variable, value in saved:
            variable.assign(value)


#: The loss of a model compiled with no loss (an optimizer only), as reports name it: its own
#: ``train_step`` computes one.
OWN_LOSS = "the loss its own train_step computes"


def is_compiled(model: Any) -> bool:
    """Whether the user compiled ``model`` (``compile()`` ran), with or without a loss: a
    model whose own ``train_step`` computes its loss is compiled with an optimizer only."""
    return bool(getattr(model, "compiled", False))


def loss_name(model: Any) -> str:
    """The compiled loss of ``model`` by name (:data:`OWN_LOSS` where it was compiled with
    none).

    >>> import keras
    >>> def model():
    ...     return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> compiled = model(); compiled.compile(optimizer="sgd", loss="mse"); loss_name(compiled)
    'mse'
    >>> own = model(); own.compile(optimizer="sgd"); loss_name(own)
    'the loss its own train_step computes'
    """
    loss = getattr(model, "loss", None)
    if loss is None:
        return OWN_LOSS
    if isinstance(loss, str):
        return loss
    return getattr(loss, "name", None) or getattr(loss, "__name__", None) or type(loss).__name__


def training_copy(model: Any, sample: Any, policy_name: str) -> Any:
    """A copy of ``model`` to train, built under ``policy_name`` (the model's own policy,
    which decides whether ``compile`` adds loss scaling): the same layers, policies and
    weights; Python's random stream (which Keras draws unseeded layers' seeds from) seeded for
    the copy and put back, so the copy's noise is reproducible and the user's stream
    untouched. Cloned (``clone_model``) where it can be, each layer's assets given to the
    clone's (an adapted ``StringLookup``'s or ``TextVectorization``'s vocabulary, which no
    config or weight carries: ``assets_copied``); else through a ``.keras`` archive: a
    subclassed model, a clone whose weights do not line up."""
    state = random.getstate()
    random.seed(0)
    copy, refused = None, None  # why Keras's clone did not serve: its error, or its weights'
    try:
        with global_policy(policy_name):  # the model's own: compile reads it
            try:
                if declared_inputs(model) is not None:
                    copy, refused = _cloned(model)
                if copy is None:  # subclassed, its clone's weights do not line up (keras-hub)
                    copy = _archive_copy(model)
            except Exception as error:
                raise InvalidSpecError(_not_copied(model, sample, refused, error)) from error
    finally:
        random.setstate(state)
    return copy


def copy_failed(model: Any, sample: Any, kwargs: dict[str, Any], error: Any) -> None:
    """Where the training copy of ``model`` stopped (``error``) on ``sample``, the same call
    of ``model`` itself (``training=True``, its variables put back): an ``InvalidSpecError``
    saying the copy failed, dtype-explorer's own failure, where the model runs; nothing where
    the model raises too (its own error, as the pass recorded it).

    Args:
        model: the model the copy was made of.
        sample: the audited sample.
        kwargs: the call's keyword arguments.
        error: what the copy's call raised (an ``ErrorInfo``: ``type``, ``message``).
    """
    if _own_call_error(model, sample, **{**kwargs, "training": True}) is not None:
        return
    said = f"{error.type}: {as_sentence(keras_message(error.message, limit=300))}"
    raise InvalidSpecError(
        f"mode 'fit' trains a copy of {describe_model(model)}, and the copy failed where the "
        f"model itself runs (a failure of dtype-explorer's copy, not of the model): {said} "
        "Modes that need no copy: call, training, predict."
    )


def _not_copied(model: Any, sample: Any, refused: str | None, error: Exception) -> str:
    """Why mode 'fit' has no copy to train, in Keras's words: a model with declared inputs
    (Functional, Sequential) was cloned (``refused``: what clone_model or the clone's
    ``set_weights`` raised) before its ``.keras`` archive (``error``); a subclassed one has the
    archive only. Where the model's own call raises as well, that is said: mode 'call' audits
    it with no copy."""
    said = f"{type(error).__name__}: {_said(error)}{_raised_in(error)}"
    if refused is not None:
        how = (
            f"Keras's clone_model did not give a copy ({refused}), and writing the model to a "
            f".keras archive raised {said}"
        )
    else:
        how = (
            f"{said} (a subclassed model copies through a .keras archive: it needs "
            "get_config()/from_config())"
        )
    call_error = _own_call_error(model, sample)
    also = (
        ""
        if call_error is None
        else f"; the model's own call raises as well, {type(call_error).__name__}: "
        f"{_said(call_error)} (mode 'call' shows where)"
    )
    return (
        f"mode 'fit' trains a copy of {describe_model(model)}, and it could not be copied: "
        f"{how}{also}; modes that need no copy: call, training, predict"
    )


def _own_call_error(model: Any, sample: Any, **kwargs: Any) -> Exception | None:
    """What ``model(sample, **kwargs)`` itself raises (``None``: it runs), its variables and
    the random streams put back after: whether a copy's failure is the copy's or the
    model's."""
    try:
        with variables_kept(model), global_seed_kept():
            model(sample, **kwargs)
    except Exception as error:
        return error
    return None


def _said(error: BaseException) -> str:
    """Keras's message of ``error`` in one line (its example cut)."""
    return " ".join(keras_message(str(error), limit=300).split("Example:")[0].split())


def _raised_in(error: BaseException) -> str:
    """`` (in keras/src/layers/core/dense.py, _get_kernel_with_merged_lora)``: the innermost
    frame of Keras that raised ``error``, where its traceback keeps one; "" elsewhere."""
    tb, found = error.__traceback__, ""
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if "/keras/src/" in path and "/utils/traceback_utils.py" not in path:
            found = (
                f" (in keras/src/{path.split('/keras/src/', 1)[1]}, {tb.tb_frame.f_code.co_name})"
            )
        tb = tb.tb_next
    return found


def _cloned(model: Any) -> tuple[Any, str | None]:
    """Keras's own ``clone_model`` with the model's weights, or ``None`` and what refused it:
    ``clone_model``'s error, or the clone's weights that do not line up with the model's (a
    keras-hub task: "length 36, expecting 37")."""
    import keras

    try:
        copy = keras.models.clone_model(model)
    except Exception as error:
        return None, f"clone_model raised {type(error).__name__}: {_said(error)}"
    try:
        copy.set_weights(model.get_weights())
    except ValueError as error:
        return (
            None,
            f"the clone's set_weights(model.get_weights()) raised ValueError: {_said(error)}",
        )
    assets_copied(model, copy)  # an adapted lookup's vocabulary: no config, no weight
    return copy, None


def _archive_copy(model: Any) -> Any:
    """``model`` written to a ``.keras`` archive in memory and loaded back (config, weights,
    the variables ``set_weights`` would have to line up), uncompiled."""
    buffer = io.BytesIO()
    write_archive(model, buffer)
    return load_archive(buffer.getvalue(), compile=False)


def write_archive(target: Any, buffer: io.BytesIO) -> None:
    """``target`` written to ``buffer`` as a ``.keras`` archive, weights in h5 (Keras's main,
    keras-nightly 3.16.0.dev, writes h5 only and takes no format; ``keras_run._compat``)."""
    save_archive(target, buffer)


def compile_copy(copy: Any, model: Any, outputs: Any) -> None:
    """Compile the copy as the model is (its compile config; a fresh optimizer of the same
    kind), or, for a model not compiled, with SGD and a loss fitting its output."""
    import keras

    if is_compiled(model):
        try:
            copy.compile_from_config(model.get_compile_config())
            return
        except Exception:
            optimizer = model.optimizer
            copy.compile(
                optimizer=type(optimizer).from_config(optimizer.get_config()),
                loss=model.loss,
                run_eagerly=model.run_eagerly,
            )
            return
    last = keras_flatten(outputs)
    softmax = bool(last) and _softmax_output(copy)
    loss = "sparse_categorical_crossentropy" if softmax else "mean_squared_error"
    copy.compile(optimizer=keras.optimizers.SGD(0.01), loss=loss)


def _softmax_output(model: Any) -> bool:
    from keras.src.models.functional import Functional

    functional = getattr(model, "_functional", None) or model
    if isinstance(functional, Functional):
        makers = [t._keras_history.operation for t in functional.outputs]
    else:
        makers = list(getattr(model, "layers", ())[-1:])
    return bool(makers) and all(is_softmax(layer) for layer in makers)


#: Clones under a policy, by model (held weakly) and policy: (the model's fingerprint, clone).
_CLONES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


#: The copies :func:`policy_rebuild` made: never handed to the user nor changed by the tool
#: (each use runs them or copies them), so their config is not written out again to see
#: whether it changed (issue 44: ``get_config`` of the clone was a third of the rebuild).
_OWN: weakref.WeakSet = weakref.WeakSet()


def own_copy(model: Any) -> bool:
    """Whether ``model`` is a copy :func:`policy_rebuild` made (the tool's, not the user's).

    >>> import keras
    >>> inputs = keras.Input((3,))
    >>> model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    >>> own_copy(model), own_copy(policy_clone(model, "mixed_float16"))
    (False, True)
    """
    try:
        return model in _OWN
    except TypeError:  # a model that cannot be held weakly
        return False


#: The config texts written inside :func:`configs_written` (on this thread), by model id.
_WRITTEN = threading.local()
#: The config texts of the tool's own copies, written once each (they never change).
_OWN_TEXTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def configs_written() -> Iterator[None]:
    """Inside, each model's config is written once (:func:`config_text`): for an audit, whose
    model does not change while it runs (the clone's fingerprint and the question's config
    were two writes of the same config, a third of a second on a ResNet50)."""
    outer = getattr(_WRITTEN, "texts", None)
    if outer is None:
        _WRITTEN.texts = {}
    try:
        yield
    finally:
        if outer is None:
            _WRITTEN.texts = None


def config_text(model: Any) -> tuple[str | None, str]:
    """``keras.saving.serialize_keras_object(model)`` as JSON text, or ``None`` and the name
    of the error that stopped it; written once per model inside :func:`configs_written`, and
    once for good for the tool's own copy (:func:`own_copy`).

    >>> import keras
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> with configs_written():
    ...     config_text(model) is config_text(model)
    True
    """
    import keras

    own = own_copy(model)
    texts = _OWN_TEXTS if own else getattr(_WRITTEN, "texts", None)
    # an audit builds a model given unbuilt: its config then has a build config
    key = model if own else (id(model), bool(getattr(model, "built", False)))
    found = texts.get(key) if texts is not None else None
    if found is not None and (own or found[0] is model):
        return found[1]
    try:
        written: tuple[str | None, str] = (
            json.dumps(keras.saving.serialize_keras_object(model)),
            "",
        )
    except Exception as error:
        written = (None, type(error).__name__)
    if texts is not None:
        texts[key] = (model, written)
    return written


def _fingerprint(model: Any) -> str:
    """What a clone is built from besides the weights: the model's config and, per weight, its
    layer, shape, dtype and trainability (a config Keras cannot write: a fresh text each time,
    so no clone is reused). For the tool's own copy (:func:`own_copy`), its layers and their
    policies stand for its config."""
    weights = [(w.path, tuple(w.shape), str(w.dtype), w.trainable) for w in model.weights]
    if own_copy(model):
        layers = model._flatten_layers(include_self=False, recursive=True)
        policies = [(id(la), getattr(la, "dtype_policy", None)) for la in layers]
        return repr([(i, getattr(p, "name", p)) for i, p in policies]) + repr(weights)
    config = config_text(model)[0]
    if config is None:  # not JSON as Keras writes it: its config with the odd values spelled
        try:
            config = json.dumps(model.get_config(), sort_keys=True, default=_plain)
        except Exception:
            return repr(object())
    return config + repr(weights)


def _plain(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else repr(value)


def policy_clone(model: Any, policy: str) -> Any:
    """A copy of ``model`` with every layer under ``policy`` (:func:`policy_rebuild`), or an
    ``InvalidSpecError`` saying why there is none: no way to rebuild it, or layers the
    rebuild could not put under the policy (a copy that answers for the old one).

    Args:
        model: a Keras model (never changed).
        policy: a dtype policy name.

    Returns:
        The clone, holding ``model``'s weights now.
    """
    done = policy_rebuild(model, policy)
    if done.model is None:
        raise InvalidSpecError(
            f"could not rebuild {describe_model(model)} under policy {policy!r}: {done.failed}"
        )
    import keras

    kept = [  # the layers the rebuild itself made (nested ones may fix their own on purpose)
        f"{layer.name} ({type(layer).__name__}, still {layer.dtype_policy.name})"
        for layer in done.model.layers
        if not isinstance(layer, keras.layers.InputLayer)
        and getattr(layer, "dtype_policy", None) is not None
        and layer.dtype_policy.name != policy
    ]
    if kept:  # auditing it would answer for the old policy, not for the one asked about
        shown = ", ".join(kept[:5]) + (f", ... ({len(kept)} in all)" if len(kept) > 5 else "")
        raise InvalidSpecError(
            f"could not rebuild {describe_model(model)} under policy {policy!r}: rebuilt from "
            f"its config with dtype={policy!r}, these layers kept another policy: {shown}. "
            "Their get_config()/from_config() drop the dtype argument (pass **kwargs on to "
            "Layer.__init__), or they fix their own dtype."
        )
    return done.model


def policy_rebuild(model: Any, policy: str) -> Rebuilt:
    """``model`` rebuilt under ``policy`` as Keras can (cloned, else reloaded from its config:
    ``_policy_rebuild``), built once per model and policy, then reused with the model's
    current weights while its config and weights' layout are unchanged.

    Args:
        model: a Keras model (never changed).
        policy: a dtype policy name.

    Returns:
        The ``Rebuilt``: the copy holding ``model``'s weights now, how it was made and the
        layers it left under another policy; or, with no copy, why none could be made.
    """
    stamp = _fingerprint(model)
    try:
        found = _CLONES.get(model, {}).get(policy)
    except TypeError:  # a model that cannot be held weakly
        found = None
    if found is not None and found[0] == stamp:
        done = found[1]
        if done.model is not None:
            weights_copied(done.model, model)
        return done
    done = rebuild_under(model, policy)
    with contextlib.suppress(TypeError):
        _CLONES.setdefault(model, {})[policy] = (stamp, done)
        if done.model is not None:
            _OWN.add(done.model)
    return done


def weights_copied(target: Any, source: Any) -> None:
    """``target.set_weights(source.get_weights())`` without the round trip through NumPy:
    each of ``target.weights`` assigned a copy of its counterpart's value, in the order
    ``set_weights`` pairs them (a layout that differs: through ``set_weights``, which says
    why).

    On jax a variable's ``assign`` keeps the very array it is given, so ``target`` would hold
    ``source``'s buffers: a ``model.predict`` or ``fit`` step that Keras compiles with them
    donated (an audit's ``mode="predict"`` on the policy's copy) deleted them, and with them
    the user's weights (their model's next call raised "Buffer has been deleted or
    donated"). There each value is copied first; tensorflow's and torch's ``assign`` copy
    into the variable's own storage already.
    """
    pairs = list(zip(target.weights, source.weights, strict=False))
    same = len(target.weights) == len(source.weights) and all(
        tuple(t.shape) == tuple(s.shape) and t.dtype == s.dtype for t, s in pairs
    )
    if not same:
        target.set_weights(source.get_weights())
        return
    values = _own_buffers([s.value for _, s in pairs])
    for (t, _), value in zip(pairs, values, strict=True):
        t.assign(value)


def _own_buffers(values: list[Any]) -> list[Any]:
    """``values`` made their own buffers before ``assign`` keeps them: copied on jax (whose
    ``assign`` keeps the array given), in one ``device_put`` (half the time of a copy each:
    ResNet50's 320 weights in 16-30 ms); as they are elsewhere."""
    import keras

    if keras.backend.backend() != "jax":
        return values
    import jax

    try:
        return list(jax.device_put(values, may_alias=False))
    except TypeError:  # a jax without may_alias: a copy each
        return [jax.numpy.array(value, copy=True) for value in values]


def cloned_with_weights(model: Any, clone_function: Any, what: str, **options: Any) -> Any:
    """``keras.models.clone_model(model, clone_function=...)`` with the model's weights set; a
    failure is an ``InvalidSpecError`` saying what could not be done (``what``) and why.

    Args:
        model: a Sequential or Functional model.
        clone_function: rebuilds each layer (Keras's own argument).
        what: the work, in words ("rebuild ... under policy 'mixed_float16'").
        **options: more of ``clone_model``'s arguments (``recursive``, ``input_tensors``).

    Returns:
        The clone, carrying the model's current weights.
    """
    try:
        return clone_with_weights(model, clone_function, **options)
    except Exception as error:
        raise InvalidSpecError(
            f"could not {what}: {type(error).__name__}: {as_sentence(str(error))}"
        ) from error


def arguments_given(model: Any) -> dict[str, frozenset[str]]:
    """The arguments each layer of ``model`` (nested ones too) was given, by layer name: read
    from the record Keras keeps of its constructor's arguments as passed
    (``Operation._auto_config``, defaults filled in), those that differ from the
    ``__init__``'s defaults or came through its ``**kwargs``. ``Discretization(dtype="float32")``
    records ``dtype="float32"``, ``Discretization()`` ``dtype=None``, though both configs write
    float32. A layer rebuilt from a config (loaded, cloned) was given every argument its config
    holds. A layer with an argument Keras could not record, or whose name two layers share,
    is left out.

    Args:
        model: a Keras model or layer.

    Returns:
        ``{layer name: the names of the arguments given}``.

    >>> import keras
    >>> inputs = keras.Input((3,))
    >>> out = keras.layers.Discretization([0.5], dtype="float32", name="d")(inputs)
    >>> given = arguments_given(keras.Model(inputs, keras.layers.Dense(2, name="e")(out)))
    >>> sorted(given["d"]), sorted(given["e"])
    (['bin_boundaries', 'dtype'], ['units'])
    """
    flatten = getattr(model, "_flatten_layers", None)
    layers = list(flatten(include_self=True, recursive=True)) if flatten else [model]
    given: dict[str, frozenset[str]] = {}
    seen: set[str] = set()
    shared: set[str] = set()
    for layer in layers:
        name = getattr(layer, "name", None)
        if name in seen:
            shared.add(name)
        seen.add(name)
        recorded = getattr(getattr(layer, "_auto_config", None), "config", None)
        if isinstance(name, str) and isinstance(recorded, dict):
            given[name] = _not_default(type(layer), recorded)
    return {k: v for k, v in given.items() if k not in shared}


def init_parameters(cls: type) -> set[str]:
    """Every named parameter of the ``__init__``s along ``cls``'s MRO (what a config of that
    class may carry), for Keras 3 and Keras 2 classes alike.

    >>> class A:
    ...     def __init__(self, units, *args, **kwargs): ...
    >>> class B(A):
    ...     def __init__(self, rate=0.5, **kwargs): ...
    >>> sorted(init_parameters(B))
    ['rate', 'self', 'units']
    """
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        with contextlib.suppress(TypeError, ValueError):
            names.update(
                p.name
                for p in inspect.signature(init).parameters.values()
                if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
            )
    return names


def _not_default(cls: type, recorded: dict[str, Any]) -> frozenset[str]:
    """The names in ``recorded`` whose value is not ``cls.__init__``'s default for them."""
    try:
        parameters = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return frozenset(recorded)
    found = set()
    for key, value in recorded.items():
        default = parameters[key].default if key in parameters else inspect.Parameter.empty
        try:
            same = default is not inspect.Parameter.empty and bool(value == default)
        except Exception:  # a default that does not compare: taken as given
            same = False
        if not same:
            found.add(key)
    return frozenset(found)
