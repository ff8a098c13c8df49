"""A user's model rebuilt under another dtype policy, as Keras itself can rebuild it.

Two ways, in this order (issue 39 item 15):

1. **cloned**: ``keras.models.clone_model`` (nested models too, where the release can), each
   *layer* rebuilt from its config with ``dtype=policy``; a Keras operation that is a node of
   the graph but no layer (``h + a`` is an ``Add``, ``x[:, 0]`` a ``GetItem``) has no dtype
   argument, follows its inputs' dtypes, and is rebuilt as Keras's own clone does it, from
   its config. The clone is made with ``policy`` as the global policy, as a model built
   under it is: the model itself (and a nested one) then has that policy, and the compile
   ``clone_model`` gives a compiled model's clone reads it (under ``mixed_float16`` it wraps
   the optimizer in a ``LossScaleOptimizer``, as Keras's ``compile`` does for a model built
   under that policy);
2. **reloaded**: where it cannot be cloned (a subclassed model, weights that do not line up):
   the model made again from its own config, as loading it does, under the policy as the
   global one and with ``dtype=policy`` where its config has a dtype (a keras-hub backbone
   passes it to every layer it makes), built from its build config, the weights copied in.

What neither could put under the policy is said, never hidden: ``kept`` names every layer
still under another policy (one that fixes its own dtype), and ``failed`` says why no
rebuild worked, each way's reason.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dtype_explorer.errors import as_sentence
from dtype_explorer.keras_run.model._samples import declared_inputs
from dtype_explorer.keras_run.model._zero_start import clone_with_weights


@dataclass(frozen=True)
class Rebuilt:
    """A model rebuilt under a policy.

    Attributes:
        model: the rebuilt model, carrying the user's weights; ``None`` when neither way worked.
        how: ``"cloned"`` or ``"reloaded"`` (``""`` when it failed).
        kept: the layers still under another policy, as ``"name (Class, still float32)"``.
        failed: why no rebuild worked, each way's reason (``""`` when one did).
    """

    model: Any
    how: str = ""
    kept: tuple[str, ...] = ()
    failed: str = ""


def rebuild_under(model: Any, policy: str) -> Rebuilt:
    """``model`` rebuilt with its layers under ``policy``, cloned or else reloaded.

    Args:
        model: a Keras model (never changed).
        policy: a dtype policy name.

    Returns:
        The ``Rebuilt``: the copy and how it was made, the layers it could not put under the
        policy, or why no copy could be made.

    >>> import keras
    >>> inputs = keras.Input((2, 3))
    >>> h = keras.layers.Dense(3, name="d")(inputs)
    >>> model = keras.Model(inputs, (h + inputs)[:, 0])
    >>> done = rebuild_under(model, "mixed_float16")
    >>> done.how, done.kept, done.model.get_layer("d").dtype_policy.name
    ('cloned', (), 'mixed_float16')
    """
    reasons = []
    if declared_inputs(model) is not None:
        try:
            clone = _cloned(model, policy)
            return Rebuilt(clone, "cloned", kept_policies(clone, policy))
        except Exception as error:
            reasons.append(f"clone_model: {_said(error)}")
    else:
        reasons.append(
            "clone_model: it is subclassed (clone_model takes Sequential and Functional)"
        )
    try:
        again = _reloaded(model, policy)
        return Rebuilt(again, "reloaded", kept_policies(again, policy))
    except Exception as error:
        reasons.append(f"from its config: {_said(error)}")
    return Rebuilt(None, failed="; ".join(reasons))


def _said(error: Exception) -> str:
    return f"{type(error).__name__}: {as_sentence(str(error))}"[:400]


def _cloned(model: Any, policy: str) -> Any:
    """Keras's ``clone_model``, every layer under ``policy``, the model's weights set (a
    mismatch raises: the clone is not the model)."""
    import keras

    def under_policy(operation: Any) -> Any:
        config = operation.get_config()
        if isinstance(operation, keras.layers.Layer):
            config = {**config, "dtype": policy}
        return type(operation).from_config(config)

    options = {}
    if "recursive" in inspect.signature(keras.models.clone_model).parameters:
        options["recursive"] = True  # a nested Sequential or Functional model too
    with global_policy(policy):  # the model itself built, and compiled, under it
        return clone_with_weights(model, under_policy, **options)


@contextlib.contextmanager
def global_policy(policy: str) -> Iterator[None]:
    """``policy`` as Keras's global dtype policy inside the block, the one before put back."""
    import keras

    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)


def _reloaded(model: Any, policy: str) -> Any:
    """``model`` made again from its config as loading does, under ``policy`` (the global
    policy while it is made, and its config's own ``dtype``), built and given the weights."""

    config = model.get_config()
    if "dtype" in config:
        config = {**config, "dtype": policy}
    with global_policy(policy):
        again = type(model).from_config(config)
        build = model.get_build_config() if hasattr(model, "get_build_config") else None
        if not again.built and build:
            again.build_from_config(build)
    again.set_weights(model.get_weights())
    return again


def kept_policies(model: Any, policy: str) -> tuple[str, ...]:
    """Every layer of ``model`` (nested ones too, not its input layers) not under ``policy``.

    Args:
        model: a Keras model.
        policy: the policy asked for.

    Returns:
        ``"name (Class, still <policy>)"`` for each.
    """
    import keras

    found = []
    with contextlib.suppress(Exception):
        for layer in model._flatten_layers(include_self=False, recursive=True):
            own = getattr(layer, "dtype_policy", None)
            if isinstance(layer, keras.layers.InputLayer) or own is None:
                continue
            if own.name != policy:
                found.append(f"{layer.name} ({type(layer).__name__}, still {own.name})")
    return tuple(found)


def rebuilt_notes(what: str, own: str, policy: str, done: Rebuilt) -> list[str]:
    """What an audit under ``policy`` says of its rebuild: that it was not applied and why
    (the model audited as built), that the model was made again from its config, and which
    layers kept another policy.

    Args:
        what: the model in words (``"Functional 'bert'"``).
        own: the model's own policy.
        policy: the policy asked for.
        done: the rebuild (:func:`rebuild_under`).

    Returns:
        The notes, in that order; none for a clean clone.

    >>> note = rebuilt_notes("Functional 'm'", "float32", "bfloat16", Rebuilt(None, failed="no"))
    >>> note[0].split("; ")[-1]
    'audited as built, under its own policy float32, nothing changed'

    """
    if done.model is None:
        return [
            f"policy={policy!r} was not applied: {what} could not be rebuilt under it "
            f"({done.failed}); audited as built, under its own policy {own}, nothing changed"
        ]
    notes = []
    if done.how == "reloaded":
        notes.append(
            f"under policy={policy!r}: {what} was made again from its config with that policy "
            "(as loading it does), the weights copied in: clone_model could not copy it"
        )
    if done.kept:
        shown = ", ".join(done.kept[:8]) + (
            f", ... ({len(done.kept)} in all)" if len(done.kept) > 8 else ""
        )
        notes.append(
            f"under policy={policy!r}, these layers were not changed and keep another policy, "
            f"as Keras builds them (their config takes no dtype, or they fix their own): {shown}"
        )
    return notes
