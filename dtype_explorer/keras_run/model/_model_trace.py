"""A model's real forward pass, every layer call recorded: what each layer was *given* (before
Keras converted it), what its ``call`` received (every autocast), its variables as stored and
as read, its outputs and the ops it ran.

Each layer's ``call`` is wrapped for the length of the pass (an instance attribute, removed
afterwards), and ``Layer.__call__`` is patched (put back afterwards) to see what each layer is
given. A layer that raises on a dtype is re-run with the fix (integers cast to its compute
dtype, 16-bit floats to float32) so that the pass can go on and the fix is known to work.
Used by ``check_model``; the rules that read the records live in the analyses.

>>> import keras, numpy as np
>>> inputs = keras.Input((3,), dtype="float64")
>>> model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs), name="m")
>>> from dtype_explorer.keras_run import declared_inputs
>>> tracer = ModelTracer(model)
>>> calls = tracer.finish(tracer.run(np.ones((2, 3)), declared_inputs(model)))
>>> [(c.path, [t.dtype for t in c.received]) for c in calls]
[('m', ['float64']), ('m/dense', ['float32'])]
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError, as_sentence
from dtype_explorer.keras_run._arrays import abstract, numpy_values
from dtype_explorer.keras_run._compat import any_symbolic_tensors, in_symbolic_scope
from dtype_explorer.keras_run._exactness import call_losses, read_losses
from dtype_explorer.keras_run._keras_state import global_seed_kept
from dtype_explorer.keras_run._numerics import worth_value_check
from dtype_explorer.keras_run.model._graph import GraphRecorder
from dtype_explorer.keras_run.model._layer_calls import autocast_events, tensor_kwargs
from dtype_explorer.keras_run.model._samples import (
    as_dataset,
    describe_model,
    expected_inputs,
    functional_inputs,
    keras_flatten,
    sample_text,
    tensor_infos,
)
from dtype_explorer.keras_run.trace import op_trace, variable_dtypes, wrapped_entry_points
from dtype_explorer.records import (
    CastLoss,
    ErrorInfo,
    LayerCall,
    ModelGraph,
    TensorInfo,
    VariableDtypes,
)
from dtype_explorer.timing import ms

#: How Keras says that an input does not fit a layer's input spec.
_INCOMPATIBLE = "is incompatible with the layer"
#: The most values (inputs and outputs together) a layer call keeps for its value check.
MAX_CHECKED = 1_000_000

#: Held while an audit has ``Layer.__call__`` patched.
_PATCHING = threading.RLock()


class LayerEvent:
    """A call being recorded (mutable while the forward pass runs)."""

    def __init__(self, layer: Any, path: str, depth: int, index: int, leaf: bool):
        self.layer, self.path, self.depth, self.index, self.leaf = layer, path, depth, index, leaf
        self.given: tuple[TensorInfo, ...] | None = None
        self.received: tuple[TensorInfo, ...] = ()
        self.outputs: tuple[TensorInfo, ...] = ()
        self.output_ids: set[int] = set()
        self.keep: list[Any] = []  # holds outputs so that their ids stay unique until the end
        self.variables: dict[str, VariableDtypes] = {}
        self.error: ErrorInfo | None = None
        self.retried: str | None = None
        self.trace: tuple = ()
        #: The call's arguments and outputs as NumPy, kept for the value check of a call that
        #: did arithmetic on integers (``_audit_rules.wrong_numbers``).
        self.values: tuple[Any, Any, Any] | None = None
        #: What this call's own dtype-changing steps lost: its autocast and ``keras.Input``
        #: conversion (``keras_run.call_losses``), then its variable reads (``read_losses``).
        self.losses: tuple[CastLoss, ...] = ()

    def record(self, final: bool) -> LayerCall:
        layer = self.layer
        entry = tuple(dtypes.describe(t) for t in functional_inputs(layer))
        return LayerCall(
            path=self.path,
            layer_class=type(layer).__name__,
            constructor=spelled_class(type(layer)),
            depth=self.depth,
            call_index=self.index,
            policy=layer.dtype_policy.name,
            compute_dtype=layer.compute_dtype,
            variable_dtype=layer.variable_dtype,
            builtin=_builtin(layer),
            leaf=self.leaf,
            given=self.given,
            received=self.received,
            entry=entry,
            outputs=self.outputs,
            variables=self.variables,
            autocast=tuple(autocast_events(self.given, self.received, entry)),
            losses=self.losses,
            error=self.error,
            retried=self.retried,
            softmax=is_softmax(layer),
            final_output=final,
            trace=self.trace,
        )


class ModelTracer:
    """Records every call of every layer inside ``model`` on this thread. Another Keras's
    tracer (``_keras2_model_trace``) overrides ``_layer_class``, ``_given``, ``_traced_call``,
    ``_recording`` and the hooks below."""

    #: The record of one call under way.
    event_class = LayerEvent
    #: Whether a leaf call's values are kept for the value check (``_audit_rules.wrong_numbers``).
    value_check = True

    def __init__(
        self, model: Any, *, values: bool = True, keep_leaves: bool = False, graph: bool = False
    ):
        self.model = model
        #: Whether values can be read (an eager pass); inside a compiled function only dtypes.
        self.values = values
        #: Whether :meth:`finish` keeps the leaf calls' outputs for :meth:`leaf_outputs`
        #: (where a leaf computes in a 16-bit float: the per-layer reference then runs).
        self.keep_leaves = keep_leaves and values
        self._leaves: dict[tuple[str, int], tuple[str, list[Any]]] = {}
        #: Each tensor's ``TensorInfo`` once per pass (``tensor_infos``'s cache).
        self._infos: dict[int, tuple[Any, TensorInfo]] = {}
        self.done = False
        self.root_outputs: Any = None
        self.forward_ms = 0.0
        self.layers = layer_paths(model)
        self.calls: list[LayerEvent] = []
        self._pending: dict[int, list[tuple[TensorInfo, ...]]] = {}
        #: The flat tensors each pending ``__call__`` was handed (for ``call_losses``).
        self._pending_raw: dict[int, list[list[Any]]] = {}
        self._thread = threading.get_ident()
        self.failed_at: LayerEvent | None = None
        self._counts: dict[int, int] = {}
        self._active: set[int] = set()
        #: ``graph=True``: the pass as a graph (``records.ModelGraph``), made by :meth:`finish`;
        #: ``graph_error``: why it could not be made (the tool's failure, never the model's).
        self.graph: ModelGraph | None = None
        self.graph_error = ""
        self._recorder = None
        if graph:
            try:
                self._recorder = GraphRecorder(model, self.layers, self._recording)
            except Exception as error:  # the tool's own failure: said, the pass goes on
                self.graph_error = f"{type(error).__name__}: {as_sentence(str(error))}"

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Patch ``Layer.__call__`` (to see what each layer is *given*) and wrap every layer's
        entry points; one audit at a time, so patches never nest out of order."""
        with _PATCHING:
            yield from self._install()

    def _install(self) -> Iterator[None]:
        """``Layer.__call__`` of :meth:`_layer_class` patched for the layers traced (what each
        is given, :meth:`_given`; its call, :meth:`_traced_call`) and every layer's entry points
        wrapped, both put back afterwards; Keras 2's tracer shares it."""
        layer_class = self._layer_class()
        original_dunder = layer_class.__dict__["__call__"]
        tracer = self

        def traced_dunder(layer: Any, *args: Any, **kwargs: Any) -> Any:
            key = id(layer)
            if key not in tracer.layers or not tracer._recording(args, kwargs):
                return original_dunder(layer, *args, **kwargs)
            tracer._pending.setdefault(key, []).append(tracer._given(args, kwargs))
            tracer._pending_raw.setdefault(key, []).append(tracer._given_raw(args, kwargs))
            if tracer._recorder is not None:
                tracer._recorder.handed(key, args, kwargs)
            try:
                return tracer._traced_call(original_dunder, layer, args, kwargs)
            finally:
                tracer._pending[key].pop()
                tracer._pending_raw[key].pop()
                if tracer._recorder is not None:
                    tracer._recorder.unhanded(key)

        layer_class.__call__ = traced_dunder
        recorder = self._recorder
        try:
            with self.entry_points_wrapped(), recorder.installed() if recorder else _nothing():
                yield
        finally:
            layer_class.__call__ = original_dunder

    def _layer_class(self) -> type:
        """The ``Layer`` class whose ``__call__`` is patched."""
        from keras.src.layers.layer import Layer

        return Layer

    def _given(self, args: tuple, kwargs: dict[str, Any]) -> tuple[TensorInfo, ...]:
        """What a layer call is given, before Keras converts or casts it."""
        return tensor_infos((args, tensor_kwargs(kwargs)), self.values, self._infos)

    def _given_raw(self, args: tuple, kwargs: dict[str, Any]) -> list[Any] | None:
        """The flat tensors a layer call is handed, kept for :meth:`step_losses`."""
        return keras_flatten((args, tensor_kwargs(kwargs))) if self.values else None

    def _traced_call(self, original: Any, layer: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        """The layer's own ``__call__`` inside the ops trace it keeps."""
        first_event = len(self.calls)
        # the ops of this call (its conversion and autocast included): a sublayer's call
        # opens its own trace inside, so each call keeps only the ops it ran itself
        with op_trace(numerics=self.values) as trace:
            try:
                return original(layer, *args, **kwargs)
            finally:
                self._attach(layer, first_event, trace)

    @contextlib.contextmanager
    def entry_points_wrapped(self) -> Iterator[None]:
        """Every layer's entry points wrapped on the instance (put back afterwards)."""
        with contextlib.ExitStack() as stack:
            for layer, path, depth in self.layers.values():
                wrap = functools.partial(self._wrap, layer, path, depth)
                stack.enter_context(wrapped_entry_points(layer, wrap))
            yield

    def _attach(self, layer: Any, first_event: int, trace: Any) -> None:
        """Give the call of ``layer`` that started at ``first_event`` its op trace."""
        for event in self.calls[first_event:]:
            if event.layer is layer:
                event.trace = trace.steps()
                event.losses += tuple(read_losses(event.trace))
                return

    def run(
        self,
        sample: Any,
        inputs: Any,
        call_kwargs: dict[str, Any] | None = None,
        training: bool = False,
    ) -> Any:
        """One forward pass, in inference mode unless ``training`` (or ``call_kwargs`` say
        ``training=True``); ``None`` if it stopped in a layer (recorded there). A sample the
        model cannot take at all raises ``InvalidSpecError``."""
        started = time.perf_counter()
        kwargs = dict(call_kwargs or {})
        if training:
            kwargs["training"] = True
        elif _takes_training(self.model):
            kwargs.setdefault("training", False)
        with self.installed():
            try:
                if kwargs.get("training"):
                    with global_seed_kept():
                        return self.model(sample, **kwargs)
                return self.model(sample, **kwargs)
            except Exception as error:
                if self.calls and _INCOMPATIBLE not in str(error):
                    return None
                failed = self.failed_at.error if self.failed_at else None
                kind, message = (
                    (failed.type, failed.message) if failed else (type(error).__name__, str(error))
                )
                raise InvalidSpecError(
                    f"the sample does not fit {describe_model(self.model)}: "
                    f"{kind}: {as_sentence(message)}"
                    + (f" The model takes {expected_inputs(inputs)}." if inputs is not None else "")
                    + f" The sample is {sample_text(sample)}."
                ) from None
            finally:
                self.forward_ms = ms(started)

    def run_predict(self, sample: Any, dataset: bool = False) -> tuple[Any, Any]:
        """The real ``model.predict`` on ``sample`` as one batch (``dataset``: on a
        ``tf.data.Dataset`` of it, :func:`as_dataset`, as users feed one): its outputs, and
        the root call's outputs as the compiled function traced them. The model's predict
        function is made afresh (one made before was traced without the recorders) and put
        back after, so nothing compiled here stays on the model; nor what Keras resolved its
        ``jit_compile="auto"`` to, where it was never resolved. Keras's traceback filtering is
        off while it runs (put back after), so that an error keeps the frames that say where
        in Keras it was raised (its data adapters: ``refused_by``)."""
        import keras

        batch = int(keras.tree.flatten(sample)[0].shape[0])
        had = "predict_function" in self.model.__dict__
        before = getattr(self.model, "predict_function", None)
        jit = self.model.__dict__.get("_jit_compile")
        self.model.predict_function = None
        held = [(v, v._value) for v in self.model.variables]  # the arrays, not copies
        state = getattr(self.model, "_jax_state", None)
        filtering = keras.config.is_traceback_filtering_enabled()
        keras.config.disable_traceback_filtering()
        try:
            with self.installed():
                if dataset:
                    outputs = self.model.predict(as_dataset(sample, batch), verbose=0)
                else:
                    outputs = self.model.predict(sample, batch_size=batch, verbose=0)
        finally:
            if filtering:
                keras.config.enable_traceback_filtering()
            self.model.predict_function = before
            if not had:
                self.model.__dict__.pop("predict_function", None)
            if jit is None and "_jit_compile" in self.model.__dict__:
                self.model._jit_compile = None
            values_put_back(self.model, held, state)
        return outputs, self.root_outputs

    def _recording(self, args: tuple = (), kwargs: dict | None = None) -> bool:
        """On the auditing thread, outside the symbolic traces Keras runs to build layers (in
        its symbolic scope, or on ``KerasTensor`` inputs: an unbuilt ``Sequential``'s first
        call builds its graph so, inside the audited call); in a compiled function, its first
        trace only."""
        return (
            not self.done
            and threading.get_ident() == self._thread
            and not in_symbolic_scope()
            and not any_symbolic_tensors(args, kwargs)
        )

    def _wrap(self, layer: Any, path: str, depth: int, _name: str, original: Any) -> Any:
        leaf = not any(child is not layer for child in layer._flatten_layers(include_self=False))

        def traced_call(*args: Any, **kwargs: Any) -> Any:
            key = id(layer)
            if key in self._active or not self._recording(args, kwargs):
                return original(*args, **kwargs)
            index = self._counts.get(key, 0)
            self._counts[key] = index + 1
            event = self.event_class(layer, path, depth, index, leaf)
            self.calls.append(event)
            pending = self._pending.get(key)
            event.given = pending[-1] if pending else None
            event.received = tensor_infos((args, tensor_kwargs(kwargs)), self.values, self._infos)
            visit = self._recorder and self._recorder.enter(key, path, index, args, kwargs)
            event.variables = self.layer_variables(layer)
            if self.values:
                event.losses = self.step_losses(layer, key, args, kwargs)
            self._active.add(key)
            try:
                outputs = original(*args, **kwargs)
            except Exception as error:
                if self.failed_at is not None:  # raised by a sublayer, already recorded there
                    raise
                event.error = ErrorInfo(type=type(error).__name__, message=str(error))
                outputs = self._retry(event, original, args, kwargs, error)
            finally:
                self._active.discard(key)
            event.outputs = tensor_infos(outputs, self.values, self._infos)
            if visit:
                self._recorder.leave(visit, outputs)
            checked = self.values and self.value_check and leaf and event.error is None
            if checked and worth_value_check(event.received):
                event.values = _as_numpy((args, kwargs, outputs))
            event.keep = keras_flatten(outputs)
            event.output_ids = {id(t) for t in event.keep}
            if depth == 0 and not self.values:  # the compiled function's first trace is done
                self.root_outputs, self.done = outputs, True
            return outputs

        return traced_call

    def _retry(
        self, event: LayerEvent, original: Any, args: tuple, kwargs: dict, error: Exception
    ) -> Any:
        """Re-run a call that raised with the dtype fix the rules would propose; re-raise if
        there is none or it does not help."""
        fix = self.retry_cast(event.layer, event.received) if self.values else None
        if fix is None:
            self.failed_at = event
            raise error
        source, target = fix
        try:
            outputs = original(
                *self.cast(args, source, target), **self.cast(kwargs, source, target)
            )
        except Exception:
            self.failed_at = event
            raise error from None
        event.retried = f"re-run with {source} inputs cast to {target}: it works"
        return outputs

    def step_losses(self, layer: Any, key: int, args: tuple, kwargs: dict) -> tuple:
        """What the call's autocast and its model's ``keras.Input`` conversion lost
        (``keras_run.call_losses``); Keras 2's tracer records none."""
        raw = self._pending_raw.get(key)
        received = keras_flatten((args, tensor_kwargs(kwargs)))
        entry = tuple(dtypes.describe(t) for t in functional_inputs(layer))
        return tuple(call_losses(raw[-1] if raw else None, received, entry))

    def layer_variables(self, layer: Any) -> dict[str, VariableDtypes]:
        """The layer's own variables, by name, as stored and as read in its ``call``."""
        return _variables(layer)

    def retry_cast(self, layer: Any, received: tuple[TensorInfo, ...]) -> tuple[str, str] | None:
        """The cast the audit tries when a call raised (:func:`_retry_cast`)."""
        return _retry_cast(layer, received)

    def cast(self, structure: Any, source: str, target: str) -> Any:
        """``structure`` with its ``source`` tensors cast to ``target`` (:func:`_cast`)."""
        return _cast(structure, source, target)

    def finish(self, outputs: Any) -> list[LayerCall]:
        """The records, each model output credited to the deepest (then latest) call making it."""
        final: set[int] = set()
        for tensor in keras_flatten(outputs):
            makers = [i for i, e in enumerate(self.calls) if id(tensor) in e.output_ids]
            if makers:
                final.add(max(makers, key=lambda i: (self.calls[i].depth, i)))
        records = [event.record(i in final) for i, event in enumerate(self.calls)]
        if self._recorder is not None:
            try:
                self.graph = self._recorder.graph()
            except Exception as error:  # the tool's own failure: said, the audit goes on
                self.graph_error = f"{type(error).__name__}: {as_sentence(str(error))}"
            self._recorder = None  # lets go of the outputs it held
        root = f"{self.model.name}/"
        leaves = [e for e in self.calls if e.leaf and e.depth > 0]
        half = any(getattr(e.layer, "compute_dtype", None) in dtypes.HALF for e in leaves)
        if self.keep_leaves and half and not any(e.error is not None for e in self.calls):
            self._leaves = {
                (e.path.removeprefix(root), e.index): (type(e.layer).__name__, e.keep)
                for e in leaves
            }
        for event in self.calls:
            event.keep = []
        self._infos = {}
        return records

    def leaf_outputs(self) -> dict[tuple[str, int], tuple[str, list[np.ndarray]]] | None:
        """The float outputs of every leaf call of the pass, as ``keras_run.layer_outputs``
        gives them (by path below the model and call index), read once and let go; ``None``
        where they were not kept (``keep_leaves``) or a call raised (the pass re-ran it with
        a cast: its values are not the model's)."""
        if not self._leaves:
            return None
        kept, self._leaves = self._leaves, {}
        return {
            key: (
                layer_class,
                [numpy_values(t) for t in tensors if dtypes.family(dtypes.describe(t)) == "float"],
            )
            for key, (layer_class, tensors) in kept.items()
            if not any(abstract(t) for t in tensors)  # a call inside a jax scan: no values
        }


# --------------------------------------------------------------------------- helpers


def values_put_back(model: Any, held: list[tuple[Any, Any]], state: Any = None) -> None:
    """Each variable of ``model`` holding a value again after a ``model.predict`` that raised.
    Keras's jax ``predict`` takes every variable's value off it as it starts
    (``_purge_model_variables``: ``_value = None``) and puts the new ones back when it ends
    (``jax_state_sync``); where it raised between (a compiled step jax cannot lower: a float16
    ``dot_general`` on the CPU), the model was left with no values at all, and its next call
    raised. Keras's own state is put back where a step of this ``predict`` ran (it holds a
    ``_jax_state`` other than ``state``, the one before), else each value ``held`` from
    before (``(variable, value)``): no step ran, so nothing was donated."""
    if all(v._value is not None for v, _ in held):
        return
    now = getattr(model, "_jax_state", None)
    if now and now is not state and hasattr(model, "jax_state_sync"):
        model.jax_state_sync()
    for variable, value in held:
        if variable._value is None:
            variable._value = value


_nothing = contextlib.nullcontext


def _as_numpy(structure: Any) -> Any:
    """Every tensor of ``structure`` as a NumPy array (other leaves kept); ``None`` when they
    hold more than :data:`MAX_CHECKED` values in all (the value check is skipped)."""
    import keras

    if sum(int(np.prod(t.shape)) for t in keras_flatten(structure)) > MAX_CHECKED:
        return None
    return keras.tree.map_structure(
        lambda x: numpy_values(x) if hasattr(x, "shape") else x, structure
    )


def _variables(layer: Any) -> dict[str, VariableDtypes]:
    """The layer's own variables (not its sublayers'), by name, as stored and as read here."""
    found: dict[str, VariableDtypes] = {}
    for variable in [*layer._trainable_variables, *layer._non_trainable_variables]:
        name = variable.name if variable.name not in found else variable.path
        found[name] = variable_dtypes(variable)
    return found


def _retry_cast(layer: Any, received: tuple[TensorInfo, ...]) -> tuple[str, str] | None:
    """The cast that the audit tries when a call raised: ``(which inputs, to what dtype)``."""
    import keras

    names = {t.dtype for t in received}
    compute = layer.compute_dtype
    if keras.backend.is_float_dtype(compute) and any(dtypes.is_integer(n) for n in names):
        return "integer", compute
    if names & set(dtypes.HALF):
        return "16-bit float", "float32"
    return None


def _cast(structure: Any, source: str, target: str) -> Any:
    import keras

    def cast(x: Any) -> Any:
        if not (hasattr(x, "dtype") and hasattr(x, "shape")):
            return x
        name = dtypes.describe(x)
        hit = dtypes.is_integer(name) if source == "integer" else name in dtypes.HALF
        return keras.ops.cast(x, target) if hit else x

    return keras.tree.map_structure(cast, structure)


def layer_paths(model: Any) -> dict[int, tuple[Any, str, int]]:
    """Every layer inside ``model`` (itself included) with its path and depth."""
    found: dict[int, tuple[Any, str, int]] = {}

    def walk(layer: Any, path: str, depth: int) -> None:
        if id(layer) in found:
            return
        found[id(layer)] = (layer, path, depth)
        for child in layer._flatten_layers(include_self=False, recursive=False):
            walk(child, f"{path}/{child.name}", depth + 1)

    walk(model, model.name, 0)
    return found


def spelled_class(cls: type) -> str:
    """How user code names ``cls``: by its public path where Keras or keras-hub exports it
    (``keras.layers.Dense``, ``keras_hub.layers.CachedMultiHeadAttention``), else by its bare
    name (the user's own class, or one its library keeps private).

    >>> import keras
    >>> spelled_class(keras.layers.Dense), spelled_class(type("Scale", (), {}))
    ('keras.layers.Dense', 'Scale')
    """
    top = cls.__module__.split(".")[0]
    library = sys.modules.get(top) if top in ("keras", "keras_hub", "tf_keras") else None
    for namespace in ("layers", "models"):
        if getattr(getattr(library, namespace, None), cls.__name__, None) is cls:
            # tf_keras's own: written keras.layers.X here, tf.keras.layers.X by the Keras 2
            # audit's spelling (analyses/audit/_keras2.in_tf_keras)
            return f"{'keras' if top == 'tf_keras' else top}.{namespace}.{cls.__name__}"
    return cls.__name__


def _builtin(layer: Any) -> bool:
    return type(layer).__module__.split(".")[0] == "keras"


def is_softmax(layer: Any) -> bool:
    activation = getattr(layer, "activation", None)
    return type(layer).__name__ == "Softmax" or getattr(activation, "__name__", "") == "softmax"


def _takes_training(model: Any) -> bool:
    # Keras 3 names it _call_has_training_arg, Keras 2 _expects_training_arg
    return bool(
        getattr(model, "_call_has_training_arg", False)
        or getattr(model, "_expects_training_arg", False)
    )
