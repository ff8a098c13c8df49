"""A clone that carries its model's weights (:func:`clone_with_weights`: what every copy this
package makes of a model is), its own weights started at zero instead of drawn: they are all
set from the model's right after ``clone_model``, so Keras's initializers' draws would be
thrown away. :func:`weights_started_at_zero` wraps the clone function for the length of the
clone.

>>> import keras, numpy as np
>>> inputs = keras.Input((3,))
>>> model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
>>> with weights_started_at_zero(lambda la: type(la).from_config(la.get_config())) as clone:
...     copy = keras.models.clone_model(model, clone_function=clone)
>>> [float(np.abs(w).sum()) for w in copy.get_weights()]  # before the model's are set
[0.0, 0.0]
"""

from __future__ import annotations

import collections
import contextlib
import tempfile
from collections.abc import Iterator
from typing import Any


def clone_with_weights(model: Any, clone_function: Any, **options: Any) -> Any:
    """``keras.models.clone_model(model, clone_function=...)``, its weights started at zero
    (:func:`weights_started_at_zero`) and then set to the model's.

    Args:
        model: a Sequential or Functional model (never changed).
        clone_function: rebuilds each layer (Keras's own argument).
        **options: more of ``clone_model``'s arguments (``recursive``, ``input_tensors``).

    Returns:
        The clone, carrying the model's current weights; Keras's error where it cannot be
        made or the weights do not line up.
    """
    import keras

    with weights_started_at_zero(clone_function) as zero_started:
        clone = keras.models.clone_model(model, clone_function=zero_started, **options)
        clone.set_weights(model.get_weights())
    assets_copied(model, clone)
    return clone


def assets_copied(model: Any, clone: Any) -> None:
    """What each layer of ``model`` keeps as assets, which neither its config nor its weights
    carry (an adapted ``StringLookup``'s or ``TextVectorization``'s vocabulary: a clone's
    lookup tables are empty, and its call raises "Table not initialized"), written by that
    layer and read by the clone's layer of the same name, as Keras's save and load carry them
    (``save_assets``/``load_assets``).

    Args:
        model: the model cloned (never changed).
        clone: its clone, whose layers of the same names are given the assets.
    """
    layers = model._flatten_layers(include_self=False, recursive=True)
    if not any(callable(getattr(layer, "save_assets", None)) for layer in layers):
        return  # most models: nothing to read, no name counted
    own, theirs = (
        _by_name(layers),
        _by_name(clone._flatten_layers(include_self=False, recursive=True)),
    )
    for name, layer in own.items():
        twin = theirs.get(name)
        if twin is None or type(twin) is not type(layer) or not hasattr(layer, "save_assets"):
            continue
        with tempfile.TemporaryDirectory() as folder:
            layer.save_assets(folder)
            twin.load_assets(folder)


def _by_name(layers: list[Any]) -> dict[str, Any]:
    """``layers`` by name; a name held twice is left out."""
    held = collections.Counter(layer.name for layer in layers)
    return {layer.name: layer for layer in layers if held[layer.name] == 1}


@contextlib.contextmanager
def weights_started_at_zero(clone_function: Any) -> Iterator[Any]:
    """``clone_function`` made to start each layer it makes with zeros for the weights that
    layer adds (``add_weight``'s initializer), inside the block: a clone's weights are all set
    from the model's right after, and Keras's draws would be thrown away (a third of a
    ResNet50's copy on tensorflow, ``benchmarks/README.md``). Only the layers
    ``clone_function`` returns anew are changed, each on itself (no class of Keras's), and
    each gets its own ``add_weight`` back when the block ends; a sublayer a layer makes
    itself, and a weight added in Keras 2's positional form, start as Keras starts them.

    Args:
        clone_function: rebuilds each layer (``clone_model``'s argument).

    Returns:
        A context manager giving the wrapped clone function.
    """
    started: list[Any] = []

    def clone(layer: Any) -> Any:
        made = clone_function(layer)
        own = getattr(type(made), "add_weight", None)
        if made is not layer and own is not None and "add_weight" not in vars(made):
            made.add_weight = _zero_started(made, own)
            started.append(made)
        return made

    try:
        yield clone
    finally:
        for layer in started:
            vars(layer).pop("add_weight", None)


def _zero_started(layer: Any, add_weight: Any) -> Any:
    def zero_started(*args: Any, **kwargs: Any) -> Any:
        if not args:  # Keras 3's keyword form
            kwargs["initializer"] = "zeros"
        return add_weight(layer, *args, **kwargs)

    return zero_started
