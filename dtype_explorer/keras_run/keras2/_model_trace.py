"""A Keras 2 (``tf_keras``) model's real forward pass, every layer call recorded as
:mod:`._model_trace` records Keras 3's: the same :class:`~dtype_explorer.records.LayerCall`
records, so that the same rules give the same findings.

Keras 2's ``Layer.__call__`` (``tf_keras.src.engine.base_layer``) is patched for the length of
the pass (to see what each layer is *given*, before it converts and autocasts), and each
layer's ``call`` is wrapped on the instance (what ``call`` *received*: Keras 2 casts floating
inputs to the compute dtype in ``_maybe_cast_inputs``; the variables as stored and, inside
``enable_auto_cast_variables``, as read). A functional model's entry casts to its
``tf.keras.Input`` dtypes (``Functional._conform_to_reference_input``) are the ``entry``
casts. A call that raised on a dtype is re-run with the fix (``tf.cast``) so that the pass goes
on and the fix is known to work. Used in the Keras 2 kernel, where ``tf_keras`` is imported.

Keras 2 has no ``keras.ops`` op trace and no value check against a wider reference run
(:data:`KERAS2_LACKS`).

>>> import tf_keras, numpy as np                                  # doctest: +SKIP
>>> inputs = tf_keras.Input((3,), dtype="float64")                # doctest: +SKIP
>>> model = tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="dense")(inputs))  # doctest: +SKIP
>>> tracer = Keras2Tracer(model)                                  # doctest: +SKIP
>>> calls = tracer.finish(tracer.run(np.ones((2, 3)), keras2_inputs(model)))  # doctest: +SKIP
>>> [(c.path, [t.dtype for t in c.received]) for c in calls]      # doctest: +SKIP
[('model', ['float64']), ('model/dense', ['float32'])]
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from collections.abc import Iterator
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.keras_run.keras2._values import is_variable
from dtype_explorer.keras_run.model import (
    LayerEvent,
    ModelTracer,
    autocast_events,
    tensor_infos,
    tensor_kwargs,
)
from dtype_explorer.records import LayerCall, VariableDtypes

#: What the Keras 2 audit cannot have that the Keras 3 one has (said once, in the notes).
KERAS2_LACKS = (
    "Keras 2 (tf_keras) audit: the layer calls are traced as in Keras 3; Keras 2 has no "
    "keras.ops op trace (no op-level step in the findings), no keras.backend.result_type "
    "(no rules-disagree finding) and no value check against a wider reference run"
)


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One ``tf.keras.Input`` of a Keras 2 model as the sample checks read it."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str


def is_keras2(model: Any) -> bool:
    """Whether ``model`` is a Keras 2 (``tf_keras``) layer or model; never imports tf_keras."""
    tf_keras = sys.modules.get("tf_keras")
    return tf_keras is not None and isinstance(model, tf_keras.layers.Layer)


@contextlib.contextmanager
def keras2_state_kept() -> Iterator[None]:
    """Keras 2's global policy and floatx put back as they were (the user's global state). The
    policy is put back as *stored*: one never set stays unset, following ``set_floatx``."""
    import tf_keras
    from tf_keras.src.mixed_precision import policy as policies

    policy = policies._global_policy
    floatx = tf_keras.backend.floatx()
    try:
        yield
    finally:
        policies._global_policy = policy
        tf_keras.backend.set_floatx(floatx)


def keras2_inputs(model: Any) -> Any:
    """A Keras 2 functional model's inputs (:class:`InputSpec`, in its input structure), or
    ``None`` for a subclassed model or a layer."""
    import tensorflow as tf
    from tf_keras.src.engine.functional import Functional

    nested = getattr(model, "_nested_inputs", None) if isinstance(model, Functional) else None
    if nested is None:  # a subclassed model, a layer, a Sequential not built yet
        return None
    return tf.nest.map_structure(
        lambda t: InputSpec(name=t.name.split(":")[0], shape=tuple(t.shape), dtype=t.dtype.name),
        nested,
    )


class Keras2Event(LayerEvent):
    """A Keras 2 call being recorded: its record's entry casts are the functional model's
    ``tf.keras.Input`` dtypes, and a layer of ``tf_keras`` itself is built in."""

    def record(self, final: bool) -> LayerCall:
        call = super().record(final)
        entry = _entry_dtypes(self.layer)
        return call.model_copy(
            update={
                "entry": entry,
                "builtin": type(self.layer).__module__.split(".")[0] == "tf_keras",
                "autocast": tuple(autocast_events(self.given, self.received, entry)),
            }
        )


class Keras2Tracer(ModelTracer):
    """Records every call of every layer inside a Keras 2 ``model`` on this thread."""

    event_class = Keras2Event
    value_check = False

    def _layer_class(self) -> type:
        from tf_keras.src.engine.base_layer import Layer

        return Layer

    def _given(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        return _given((args, kwargs), self.values)

    def _given_raw(self, args: tuple, kwargs: dict[str, Any]) -> None:
        return None  # Keras 2's steps are not measured (step_losses)

    def step_losses(self, layer: Any, key: int, args: tuple, kwargs: dict) -> tuple:
        return ()

    def _traced_call(self, original: Any, layer: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        return original(layer, *args, **kwargs)

    #: Inside ``model.predict``'s ``tf.function`` (:meth:`run_predict`): its trace recorded.
    predicting = False

    def run_predict(self, sample: Any) -> tuple[Any, Any]:
        """Keras 2's real ``model.predict`` on ``sample`` as one batch: its outputs, and the
        root call's outputs as its ``tf.function`` traced them. The predict function is made
        afresh (one made before was traced without the recorders) and put back after."""
        import tensorflow as tf

        batch = int(tf.nest.flatten(sample)[0].shape[0])
        before = self.model.predict_function
        self.model.predict_function, self.predicting = None, True
        try:
            with self.installed():
                outputs = self.model.predict(sample, batch_size=batch, verbose=0)
        finally:
            self.model.predict_function, self.predicting = before, False
        return outputs, self.root_outputs

    def _recording(self, args: tuple = (), kwargs: dict | None = None) -> bool:
        """On the auditing thread, eagerly (not while Keras 2 builds a functional graph), or in
        ``model.predict``'s first trace; ``args``/``kwargs`` (Keras 3's symbolic check) are
        not needed: a graph being built is not eager."""
        import tensorflow as tf

        return (
            not self.done
            and threading.get_ident() == self._thread
            and (tf.executing_eagerly() or self.predicting)
        )

    def layer_variables(self, layer: Any) -> dict[str, VariableDtypes]:
        """Keras 2's own variables of ``layer``: stored in ``true_dtype`` (an
        ``AutoCastVariable``), read in ``dtype`` inside ``call``'s autocast scope. What a
        layer tracks as a weight but is no variable (``StringLookup``'s ``VocabWeightHandler``,
        which saves its vocabulary) is left out."""
        found: dict[str, VariableDtypes] = {}
        for variable in [*layer._trainable_weights, *layer._non_trainable_weights]:
            if not is_variable(variable):  # a lookup layer's VocabWeightHandler: no variable
                continue
            name = variable.name.split(":")[0].split("/")[-1]
            name = name if name not in found else variable.name.split(":")[0]
            stored = getattr(variable, "true_dtype", variable.dtype)
            found[name] = VariableDtypes(
                stored=stored.name,
                read=variable.dtype.name,
                autocast=hasattr(variable, "true_dtype"),
            )
        return found

    def cast(self, structure: Any, source: str, target: str) -> Any:
        """``structure`` with its ``source`` tensors (``"integer"`` or ``"16-bit float"``)
        cast to ``target`` with ``tf.cast``."""
        import tensorflow as tf

        def cast(x: Any) -> Any:
            if not (hasattr(x, "dtype") and hasattr(x, "shape")):
                return x
            name = dtypes.describe(x)
            hit = dtypes.is_integer(name) if source == "integer" else name in dtypes.HALF
            return tf.cast(x, target) if hit else x

        return tf.nest.map_structure(cast, structure)


def _given(structure: Any, values: bool) -> tuple:
    """The tensors given to ``Layer.__call__`` (masks left out), as the records show them."""
    args, kwargs = structure
    return tensor_infos((args, tensor_kwargs(kwargs)), values)


def _entry_dtypes(layer: Any) -> tuple[str, ...]:
    """The ``tf.keras.Input`` dtypes of a Keras 2 functional ``layer`` (none for others)."""
    from tf_keras.src.engine.functional import Functional

    inputs = getattr(layer, "inputs", None) if isinstance(layer, Functional) else None
    return tuple(t.dtype.name for t in inputs or ())


@contextlib.contextmanager
def keras2_variables_kept(model: Any) -> Iterator[None]:
    """Every variable of a tf.keras ``model`` (weights, moving statistics) put back bitwise: an
    eager ``training=True`` call updates some of them, and the user's model is never changed."""
    saved = [(v, v.numpy().copy()) for v in model.variables]
    try:
        yield
    finally:
        for variable, value in saved:
            variable.assign(value)
