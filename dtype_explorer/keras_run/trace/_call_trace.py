"""Seeing what a layer's ``call()`` is handed: wrappers on its entry points, and the dtypes its
variables read there.

``Layer.__call__`` converts and autocasts the inputs, opens the layer's autocast scope and runs
an *entry point*: ``call``, or ``quantized_call`` on a quantized layer. A wrapper set on the
layer instance (never on its class) sees exactly what that entry point receives; inside it a
variable reads with the dtype ``call`` computes with. Both the probe and the model audit
observe Keras this way; the probe's ``CallRecorder`` keeps what the outermost entry point
received and its variables as read there.

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
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run._arrays import one_value_fill
from dtype_explorer.keras_run._compat import flatten_with_path
from dtype_explorer.keras_run.trace._op_trace import untraced
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
    try:
        with untraced():  # the tool's own read (its cast) is no step of the layer's
            read: str | None = _read_dtype(variable)
    except Exception:  # an unbuilt or symbolic variable has no value to read
        read = None
    return VariableDtypes(
        stored=dtypes.keras_name(variable._dtype),
        read=read,
        autocast=bool(getattr(variable, "_autocast", True)),
    )


def _read_dtype(variable: Any) -> str:
    """The dtype ``variable.value`` has here: Keras's own autocast of the variable
    (``_maybe_autocast``, in this scope) applied to one value of the dtype it holds rather than
    to all of it (a cast of every weight on each audit, issue 44); the whole value read where
    the read is not that plain one (no such method, a stateless scope's value, a read hook,
    not initialized, a dtype NumPy lacks). The dtype held is its value's, not the one Keras
    declares: on jax without ``jax_enable_x64`` a ``float64`` variable holds float32."""
    from keras.src.backend.common.stateless_scope import in_stateless_scope

    autocast = getattr(variable, "_maybe_autocast", None)
    hooked = "on_get_value" in (getattr(variable, "_var_metadata", None) or {})
    if (
        autocast is None
        or hooked
        or in_stateless_scope()
        or getattr(variable, "_value", None) is None
    ):
        return dtypes.keras_name(variable.value.dtype)
    held = dtypes.keras_name(variable._value.dtype)
    key = _autocast_key(variable, held)
    found = _AUTOCAST_READS.get(key) if key is not None else None
    if found is not None:
        return found
    try:
        one = np.zeros((1,), dtype=np.dtype(held))
    except TypeError:
        return dtypes.keras_name(variable.value.dtype)
    read = dtypes.keras_name(autocast(one).dtype)
    if key is not None:
        _AUTOCAST_READS[key] = read
    return read


#: Keras's answer to :func:`_read_dtype`, by what its own autocast reads (``_autocast_key``):
#: reading a weight made a one-value array on the backend and cast it, ~100 us on jax and
#: tensorflow for each variable of each layer call of an audit under a mixed policy.
_AUTOCAST_READS: dict[tuple, str] = {}


def _autocast_key(variable: Any, held: str) -> tuple | None:
    """What Keras's own autocast of a read depends on (``Variable._maybe_autocast``: the
    variable's ``_autocast``; ``AutocastScope.maybe_cast``: the scope's dtype and the dtype
    held; the backend that casts), or ``None`` where something else may decide it, and the
    read is then made each time: a variable or scope whose class or instance overrides
    Keras's method, or a 64-bit float on either side (whether jax casts to float64 follows
    ``jax_enable_x64``, a setting a process may change)."""
    from keras.src.backend import backend
    from keras.src.backend.common import variables

    scope = variables.get_autocast_scope()
    if type(variable)._maybe_autocast is not variables.Variable._maybe_autocast:
        return None
    if "_maybe_autocast" in vars(variable):
        return None
    if scope is not None and (
        type(scope).maybe_cast is not variables.AutocastScope.maybe_cast
        or "maybe_cast" in vars(scope)
    ):
        return None
    into = None if scope is None else scope.dtype
    if "float64" in (held, into):
        return None
    return (backend(), bool(variable._autocast), into, held)


class CallRecorder:
    """What the outermost ``call`` (or ``quantized_call``) of a layer received: its inputs'
    dtypes and, read there inside the layer's autocast scope, every variable's dtypes."""

    def __init__(self, layer: Any, *, list_input: bool = False, seed: int | None = 0):
        self.layer = layer
        self.list_input = list_input
        self.seed = seed
        self.received: list[str] | None = None
        #: Each tensor ``call`` received: where (``("arg", 0, "images")``, ``("kw", "mask")``),
        #: the name of that argument, and its dtype.
        self.received_at: list[tuple[tuple[Any, ...], str, str]] = []
        self.variables: dict[str, VariableDtypes] = {}
        self._depth = 0

    def installed(self) -> contextlib.AbstractContextManager[None]:
        return wrapped_entry_points(self.layer, self._wrap)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0 and self.received is None:
                self._record(args, kwargs, original)
            self._depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._depth -= 1

        return recorded

    def _record(self, args: tuple, kwargs: dict, original: Callable[..., Any]) -> None:
        """Inputs by dtype and where ``call`` got them; variables by their path inside the
        layer (``query/kernel``)."""

        try:
            params = list(inspect.signature(original).parameters)
        except (TypeError, ValueError):
            params = []
        found = [
            (("arg", j, *path), params[j] if j < len(params) else f"arg{j}", leaf)
            for j, arg in enumerate(args)
            for path, leaf in flatten_with_path(arg)
        ] + [
            (("kw", key, *path), "/".join([key, *map(str, path)]), leaf)
            for key, value in kwargs.items()
            for path, leaf in flatten_with_path(value)
        ]
        self.received_at = [
            (where, name, dtypes.describe(t))
            for where, name, t in found
            if hasattr(t, "dtype") and hasattr(t, "shape")
        ]
        self.received = [dtype for _, _, dtype in self.received_at]
        if self.seed is not None:
            with untraced():
                same_weights(self.layer, self.seed)
        self.variables = {
            variable_name(self.layer, v): variable_dtypes(v) for v in self.layer.variables
        }


def same_weights(layer: Any, seed: int) -> None:
    """Give the trainable float weights each backend drew with its own RNG the same values on
    every backend, before ``call()`` computes, so that backends can be compared on numbers:
    uniform in -0.5..0.5 from ``seed`` and the variable's place among the layer's trainable
    variables (not its path, which holds a per-process name counter). Constant weights (zero
    biases, unit scales) and non-trainable state (moving statistics, lookup tables) are kept.
    An OpenVINO fill is known to be constant without reading it (``_arrays.one_value_fill``:
    the read would compile a model); every other weight is read to tell."""
    import keras
    from keras.src.backend.common.variables import AutocastScope

    # Called from inside call(), where the layer's autocast scope reads a mixed policy's float32
    # variables as float16: out of it, the stored values are read and written (on torch an
    # assignment inside the scope does not reach the variable).
    with AutocastScope(None):
        for place, variable in enumerate(layer.trainable_variables):
            dtype = dtypes.describe(variable)
            if dtypes.family(dtype) != "float":
                continue
            if one_value_fill(variable.value):  # kept, known without computing it
                continue
            drawn = np.asarray(keras.ops.convert_to_numpy(variable))
            if drawn.size < 2 or np.all(drawn == drawn.flat[0]):
                continue
            rng = np.random.default_rng([seed, place])
            value = rng.uniform(-0.5, 0.5, drawn.shape).astype(dtypes.numpy_dtype(dtype))
            variable.assign(value)


def variable_name(layer: Any, variable: Any) -> str:
    """A variable's path inside its layer (``query/kernel``); its name before Keras 3.4 (an
    engine's release), which had no ``path``."""
    path = getattr(variable, "path", None)
    if path is None:
        return variable.name
    return path.removeprefix(f"{getattr(layer, 'path', layer.name)}/")
