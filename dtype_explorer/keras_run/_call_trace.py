"""Seeing what a layer's ``call()`` is handed: wrappers on its entry points, and the dtypes its
variables read there.

``Layer.__call__`` converts and autocasts the inputs, opens the layer's autocast scope and runs
an *entry point*: ``call``, or ``quantized_call`` on a quantized layer. A wrapper set on the
layer instance (never on its class) sees exactly what that entry point receives; inside it a
variable reads with the dtype ``call`` computes with. Both the probe and the model audit
observe Keras this way.

>>> import keras
>>> layer = keras.layers.Dense(2, dtype="mixed_float16")
>>> seen = []
>>> def spy(name, original):
...     def recorded(x):
...         seen.append((x.dtype, variable_dtypes(layer.kernel).read))
...         return original(x)
...     return recorded
>>> with wrapped_entry_points(layer, spy):
...     _ = layer(keras.ops.ones((1, 3)))
>>> [(keras.backend.standardize_dtype(d), read) for d, read in seen]
[('float16', 'float16')]
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from dtype_explorer.records import VariableDtypes

#: The methods ``Operation.__call__`` runs: ``call``, or ``quantized_call`` on quantized layers.
ENTRY_POINTS = ("call", "quantized_call")

#: ``wrap(name, original) -> replacement`` for one entry point of one layer.
Wrap = Callable[[str, Callable[..., Any]], Callable[..., Any]]


@contextlib.contextmanager
def wrapped_entry_points(layer: Any, wrap: Wrap) -> Iterator[None]:
    """Replace each entry point ``layer`` has by ``wrap(name, original)`` on the instance, and
    put back what the instance had before (its class is never touched)."""
    own = {name: layer.__dict__.get(name) for name in ENTRY_POINTS if hasattr(layer, name)}
    try:
        for name in own:
            object.__setattr__(layer, name, wrap(name, getattr(layer, name)))
        yield
    finally:
        for name, before in own.items():
            layer.__dict__.pop(name, None)
            if before is not None:
                object.__setattr__(layer, name, before)


def variable_dtypes(variable: Any) -> VariableDtypes:
    """The dtype ``variable`` is stored in and the one it reads as *here*: called inside an
    entry point, the read dtype is the one ``call`` computes with (float16 under
    ``mixed_float16`` for an autocast variable)."""
    import keras

    try:
        read: str | None = keras.backend.standardize_dtype(variable.value.dtype)
    except Exception:  # an unbuilt or symbolic variable has no value to read
        read = None
    return VariableDtypes(
        stored=keras.backend.standardize_dtype(variable._dtype),
        read=read,
        autocast=bool(getattr(variable, "_autocast", True)),
    )
