"""Audit a Keras model: run one real forward pass, record every layer's dtypes, find hazards.

Each layer's ``call`` is wrapped for the length of the pass (an instance attribute, removed
afterwards), and ``Layer.__call__`` records what each layer was *given* before Keras converted
it, so the audit sees every autocast, every variable as stored and as read, and every output.
A layer that raises on a dtype is re-run with the fix (integers cast to its compute dtype,
16-bit floats to float32) so that the pass can go on and the fix is known to work. The rules
that turn this record into findings live in :mod:`dtype_explorer.analyses._audit_rules`.

>>> report = check_model(model)                       # doctest: +SKIP
>>> [f.kind for f in report.findings]                 # doctest: +SKIP
['float16-output']
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.analyses import _audit_rules
from dtype_explorer.engine import (
    op_trace,
    preserved_keras_state,
    validate_policy,
    variable_dtypes,
    wrapped_entry_points,
)
from dtype_explorer.errors import InvalidSpecError, as_sentence, received
from dtype_explorer.records import AuditReport, ErrorInfo, LayerCall, TensorInfo, VariableDtypes
from dtype_explorer.runtime import pool

#: How Keras says that an input does not fit a layer's input spec.
_INCOMPATIBLE = "is incompatible with the layer"
#: Size given to dimensions a model leaves open (other than the batch, which is 2).
OPEN_DIM = 8
BATCH = 2


# --------------------------------------------------------------------------- entry point


def check_model(
    model: Any,
    sample: Any = None,
    *,
    policy: Any = None,
    backends: str | list[str] | None = None,
    timeout: float | None = None,
) -> AuditReport:
    """Run ``model`` once on ``sample`` and report where dtypes change and which changes hurt.

    Never changes the model's weights or policy, nor Keras's floatx or global policy.

    Args:
        model: a Keras model or layer.
        sample: an array, list or dict matching ``model.inputs`` (default: built from them,
            batch of 2).
        policy: audit a clone of the model with every layer under this dtype policy
            (Sequential and Functional models).
        backends: ``"all"`` or a list of backends on which to re-run the layers that take
            integer or odd-dtype inputs, to find divergences.
        timeout: seconds a worker may take for each of those re-runs.

    Returns:
        An ``AuditReport``: the dtype flow layer by layer (``.to_frame()``) and the findings,
        each with a fix (``.findings``).

    >>> import keras, numpy as np
    >>> import dtype_explorer as dx
    >>> inputs = keras.Input((3,), dtype="float64")
    >>> model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    >>> report = dx.check_model(model)
    >>> [f.kind for f in report.findings]
    ['silent-downcast']
    """
    import keras

    if not isinstance(model, keras.layers.Layer):
        raise InvalidSpecError(
            f"check_model needs a Keras model or layer (keras.Model, keras.layers.Layer); "
            f"got {type(model).__module__}.{type(model).__qualname__}"
        )
    started = time.perf_counter()
    timeout = pool.time_limit(timeout)
    policy = None if policy is None else _policy_name(policy)
    requested = _requested_backends(backends)
    notes = [] if model.built else [f"{_describe(model)} was not built; the audit built it."]
    with preserved_keras_state():
        target = _cloned(model, policy) if policy is not None else model
        inputs = _declared_inputs(target)
        sample = _sample_for(target, inputs, sample)
        tracer = _Tracer(target)
        outputs = tracer.run(sample, inputs)
        calls = tracer.finish(outputs)
        findings = _audit_rules.find(calls, model=target, policy=policy or target.dtype_policy.name)
        findings += _audit_rules.wrong_numbers(
            [(call, event.layer, event.values) for call, event in zip(calls, tracer.calls)]
        )
        if requested:
            layers = {path: layer for layer, path, _ in tracer.layers.values()}
            findings += _audit_rules.divergences(calls, layers, requested, timeout=timeout)
    timings = {"forward_ms": tracer.forward_ms, "total_ms": _ms(started)}
    return AuditReport(
        model=model.name,
        model_class=type(model).__name__,
        backend=keras.backend.backend(),
        policy=model.dtype_policy.name,
        policy_override=policy,
        sample=tuple(_info(x) for x in keras.tree.flatten(sample)),
        layers=tuple(calls),
        findings=tuple(_audit_rules.ordered(findings)),
        backends=tuple(requested),
        notes=tuple(notes),
        timings=timings,
    )


# --------------------------------------------------------------------------- tracing

#: Held while an audit has ``Layer.__call__`` patched.
_PATCHING = threading.RLock()


class _Event:
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

    def record(self, final: bool) -> LayerCall:
        layer = self.layer
        entry = tuple(_dtype(t) for t in _functional_inputs(layer))
        return LayerCall(
            path=self.path,
            layer_class=type(layer).__name__,
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
            autocast=tuple(_autocast_events(self.given, self.received, entry)),
            error=self.error,
            retried=self.retried,
            softmax=_is_softmax(layer),
            final_output=final,
            trace=self.trace,
        )


class _Tracer:
    """Records every call of every layer inside ``model`` on this thread."""

    def __init__(self, model: Any):
        self.model = model
        self.forward_ms = 0.0
        self.layers = _layer_paths(model)
        self.calls: list[_Event] = []
        self._pending: dict[int, list[tuple[TensorInfo, ...]]] = {}
        self._thread = threading.get_ident()
        self.failed_at: _Event | None = None
        self._counts: dict[int, int] = {}
        self._active: set[int] = set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Patch ``Layer.__call__`` (to see what each layer is *given*) and wrap every layer's
        entry points; one audit at a time, so patches never nest out of order."""
        with _PATCHING:
            yield from self._install()

    def _install(self) -> Iterator[None]:
        from keras.src.layers.layer import Layer

        original_dunder = Layer.__dict__["__call__"]
        tracer = self

        def traced_dunder(layer: Any, *args: Any, **kwargs: Any) -> Any:
            key = id(layer)
            if key not in tracer.layers or not tracer._recording():
                return original_dunder(layer, *args, **kwargs)
            tracer._pending.setdefault(key, []).append(_infos((args, _tensor_kwargs(kwargs))))
            first_event = len(tracer.calls)
            # the ops of this call (its conversion and autocast included): a sublayer's call
            # opens its own trace inside, so each call keeps only the ops it ran itself
            with op_trace() as trace:
                try:
                    return original_dunder(layer, *args, **kwargs)
                finally:
                    tracer._pending[key].pop()
                    tracer._attach(layer, first_event, trace)

        Layer.__call__ = traced_dunder
        try:
            with contextlib.ExitStack() as stack:
                for layer, path, depth in self.layers.values():
                    wrap = functools.partial(self._wrap, layer, path, depth)
                    stack.enter_context(wrapped_entry_points(layer, wrap))
                yield
        finally:
            Layer.__call__ = original_dunder

    def _attach(self, layer: Any, first_event: int, trace: Any) -> None:
        """Give the call of ``layer`` that started at ``first_event`` its op trace."""
        for event in self.calls[first_event:]:
            if event.layer is layer:
                event.trace = trace.steps()
                return

    def run(self, sample: Any, inputs: Any) -> Any:
        """One forward pass in inference mode; ``None`` if it stopped in a layer (recorded there).
        A sample the model cannot take at all raises ``InvalidSpecError``."""
        started = time.perf_counter()
        with self.installed():
            try:
                if _takes_training(self.model):
                    return self.model(sample, training=False)
                return self.model(sample)
            except Exception as error:
                if self.calls and _INCOMPATIBLE not in str(error):
                    return None
                failed = self.failed_at.error if self.failed_at else None
                kind, message = (
                    (failed.type, failed.message) if failed else (type(error).__name__, str(error))
                )
                raise InvalidSpecError(
                    f"the sample does not fit {_describe(self.model)}: "
                    f"{kind}: {as_sentence(message)}"
                    + (f" The model takes {_expected(inputs)}." if inputs is not None else "")
                    + f" The sample is {_sample_text(sample)}."
                ) from None
            finally:
                self.forward_ms = _ms(started)

    def _recording(self) -> bool:
        """On the auditing thread, outside the symbolic traces Keras runs to build layers."""
        from keras.src.backend.common.symbolic_scope import in_symbolic_scope

        return threading.get_ident() == self._thread and not in_symbolic_scope()

    def _wrap(self, layer: Any, path: str, depth: int, _name: str, original: Any) -> Any:
        leaf = not any(child is not layer for child in layer._flatten_layers(include_self=False))

        def traced_call(*args: Any, **kwargs: Any) -> Any:
            key = id(layer)
            if key in self._active or not self._recording():
                return original(*args, **kwargs)
            index = self._counts.get(key, 0)
            self._counts[key] = index + 1
            event = _Event(layer, path, depth, index, leaf)
            self.calls.append(event)
            pending = self._pending.get(key)
            event.given = pending[-1] if pending else None
            event.received = _infos((args, _tensor_kwargs(kwargs)))
            event.variables = _variables(layer)
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
            event.outputs = _infos(outputs)
            if leaf and event.error is None and _audit_rules.worth_value_check(event.received):
                event.values = _as_numpy((args, kwargs, outputs))
            event.keep = keras_flatten(outputs)
            event.output_ids = {id(t) for t in event.keep}
            return outputs

        return traced_call

    def _retry(
        self, event: _Event, original: Any, args: tuple, kwargs: dict, error: Exception
    ) -> Any:
        """Re-run a call that raised with the dtype fix the rules would propose; re-raise if
        there is none or it does not help."""
        fix = _retry_cast(event.layer, event.received)
        if fix is None:
            self.failed_at = event
            raise error
        source, target = fix
        try:
            outputs = original(*_cast(args, source, target), **_cast(kwargs, source, target))
        except Exception:
            self.failed_at = event
            raise error from None
        event.retried = f"re-run with {source} inputs cast to {target}: it works"
        return outputs

    def finish(self, outputs: Any) -> list[LayerCall]:
        """The records, each model output credited to the deepest (then latest) call making it."""
        final: set[int] = set()
        for tensor in keras_flatten(outputs):
            makers = [i for i, e in enumerate(self.calls) if id(tensor) in e.output_ids]
            if makers:
                final.add(max(makers, key=lambda i: (self.calls[i].depth, i)))
        records = [event.record(i in final) for i, event in enumerate(self.calls)]
        for event in self.calls:
            event.keep = []
        return records


# --------------------------------------------------------------------------- helpers


def _as_numpy(structure: Any) -> Any:
    """Every tensor of ``structure`` as a NumPy array (other leaves kept); ``None`` when they
    hold more than :data:`MAX_CHECKED` values in all (the value check is skipped)."""
    import keras

    if sum(int(np.prod(t.shape)) for t in keras_flatten(structure)) > MAX_CHECKED:
        return None
    return keras.tree.map_structure(
        lambda x: np.asarray(keras.ops.convert_to_numpy(x)) if hasattr(x, "shape") else x,
        structure,
    )


#: The most values (inputs and outputs together) a layer call keeps for its value check.
MAX_CHECKED = 1_000_000


def keras_flatten(structure: Any) -> list[Any]:
    """The tensors in a nested structure (anything with a dtype and a shape)."""
    import keras

    return [t for t in keras.tree.flatten(structure) if hasattr(t, "dtype") and hasattr(t, "shape")]


def _tensor_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k != "mask" and not k.endswith("_mask")}


def _dtype(tensor: Any) -> str:
    return dtypes.describe(tensor)


def _info(tensor: Any) -> TensorInfo:
    shape = tuple(None if d is None else int(d) for d in tensor.shape)
    return TensorInfo(dtype=_dtype(tensor), shape=shape, finite=_finite(tensor))


def _infos(structure: Any) -> tuple[TensorInfo, ...]:
    return tuple(_info(t) for t in keras_flatten(structure))


def _finite(tensor: Any) -> bool | None:
    """Whether every value is finite; ``None`` for non-float tensors."""
    import keras

    name = _dtype(tensor)
    if not (dtypes.is_float(name) or name.startswith("complex")):
        return None
    array = np.asarray(keras.ops.convert_to_numpy(tensor))
    if array.dtype.itemsize < 4 or array.dtype.kind not in "fc":
        array = array.astype(np.float32)
    return bool(np.isfinite(array).all())


def _variables(layer: Any) -> dict[str, VariableDtypes]:
    """The layer's own variables (not its sublayers'), by name, as stored and as read here."""
    found: dict[str, VariableDtypes] = {}
    for variable in [*layer._trainable_variables, *layer._non_trainable_variables]:
        name = variable.name if variable.name not in found else variable.path
        found[name] = variable_dtypes(variable)
    return found


def _autocast_events(given, received, entry) -> Iterator[str]:
    """The input casts Keras made on the way into ``call`` (variable reads are in ``variables``)."""
    if given is not None and len(given) == len(received):
        for i, (g, r) in enumerate(zip(given, received, strict=True)):
            if g.dtype != r.dtype:
                yield f"input {i}: {g.dtype} → {r.dtype}"
    if entry and len(entry) == len(received):
        for i, (r, e) in enumerate(zip(received, entry, strict=True)):
            if r.dtype != e:
                yield f"input {i}: {r.dtype} → {e} (keras.Input dtype)"


def _retry_cast(layer: Any, received: tuple[TensorInfo, ...]) -> tuple[str, str] | None:
    """The cast that the audit tries when a call raised: ``(which inputs, to what dtype)``."""
    import keras

    names = {t.dtype for t in received}
    compute = layer.compute_dtype
    if keras.backend.is_float_dtype(compute) and any(dtypes.is_integer(n) for n in names):
        return "integer", compute
    if names & {"float16", "bfloat16"}:
        return "16-bit float", "float32"
    return None


def _cast(structure: Any, source: str, target: str) -> Any:
    import keras

    def cast(x: Any) -> Any:
        if not (hasattr(x, "dtype") and hasattr(x, "shape")):
            return x
        name = _dtype(x)
        hit = dtypes.is_integer(name) if source == "integer" else name in ("float16", "bfloat16")
        return keras.ops.cast(x, target) if hit else x

    return keras.tree.map_structure(cast, structure)


def _layer_paths(model: Any) -> dict[int, tuple[Any, str, int]]:
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


def _builtin(layer: Any) -> bool:
    return type(layer).__module__.split(".")[0] == "keras"


def _is_softmax(layer: Any) -> bool:
    activation = getattr(layer, "activation", None)
    return type(layer).__name__ == "Softmax" or getattr(activation, "__name__", "") == "softmax"


def _functional_inputs(layer: Any) -> list[Any]:
    from keras.src.models.functional import Functional

    functional = getattr(layer, "_functional", None) or layer
    return list(functional.inputs) if isinstance(functional, Functional) else []


def _declared_inputs(model: Any) -> Any:
    """The model's ``keras.Input`` structure, or ``None`` when it declares none."""
    from keras.src.models.functional import Functional

    functional = getattr(model, "_functional", None) or model
    if isinstance(functional, Functional):
        return functional._inputs_struct
    return None


def _takes_training(model: Any) -> bool:
    return bool(getattr(model, "_call_has_training_arg", False))


def _sample_for(model: Any, inputs: Any, sample: Any) -> Any:
    """The user's sample checked against ``inputs``, or one built from them."""
    import keras

    if sample is None:
        if inputs is None:
            raise InvalidSpecError(
                f"{_describe(model)} declares no inputs (a subclassed model or a layer); "
                "pass a sample: check_model(model, sample=x) or %dtype_check model --sample x"
            )
        return keras.tree.map_structure(_make_sample, inputs)
    if inputs is None:
        return keras.tree.map_structure(_as_array, sample)
    expected = keras.tree.flatten(inputs)
    if isinstance(sample, list | tuple) and len(expected) == 1 and not _is_tensor_list(sample):
        sample = _as_array(sample)
    by_name = isinstance(sample, dict) and not isinstance(inputs, dict)
    if by_name:
        names = {spec.name for spec in expected}
        if set(sample) != names:
            raise InvalidSpecError(
                f"the sample does not fit: {_describe(model)} takes {_expected(inputs)}, not a "
                f"dict; a dict sample needs the input names {sorted(names)} as its keys; "
                f"got keys {received(sorted(map(str, sample)))}"
            )
    elif isinstance(inputs, dict) != isinstance(sample, dict) and len(expected) > 1:
        raise InvalidSpecError(
            f"the sample does not fit: expected {_expected(inputs)}; got {_sample_text(sample)}"
        )
    if isinstance(inputs, dict) and isinstance(sample, dict) and set(inputs) != set(sample):
        raise InvalidSpecError(
            f"the sample does not fit: expected keys {sorted(inputs)}; got {sorted(sample)}"
        )
    if by_name:  # Keras routes a dict to a functional model's inputs by name, not sorted keys
        leaves = [_as_array(sample[spec.name]) for spec in expected]
    else:
        leaves = keras.tree.flatten(keras.tree.map_structure(_as_array, sample))
    if len(leaves) != len(expected):
        raise InvalidSpecError(
            f"the sample does not fit: the model takes {len(expected)} input(s), "
            f"{_expected(inputs)}; got {len(leaves)}: {_sample_text(sample)}"
        )
    for leaf, spec in zip(leaves, expected, strict=True):
        if not _fits(tuple(leaf.shape), tuple(spec.shape)):
            raise InvalidSpecError(
                f"the sample does not fit input '{spec.name}': expected shape "
                f"{_shape_text(spec.shape)} ({spec.dtype}); "
                f"got {tuple(leaf.shape)} ({_dtype(leaf)})"
            )
    return keras.tree.map_structure(_as_array, sample)


def _make_sample(spec: Any) -> Any:
    """A sample for one ``keras.Input``; strings as a backend string tensor, the way a model
    takes them (Keras refuses NumPy object arrays)."""
    import keras

    shape = tuple(
        BATCH if i == 0 and d is None else OPEN_DIM if d is None else d
        for i, d in enumerate(spec.shape)
    )
    array = dtypes.sample(spec.dtype, shape)
    if spec.dtype == "string":
        return keras.ops.convert_to_tensor(array.tolist())
    return np.abs(array) if dtypes.is_integer(spec.dtype) else array


def _as_array(value: Any) -> Any:
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return value
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise InvalidSpecError(
            f"the sample must hold arrays or tensors; got {type(value).__name__}"
        ) from error
    if array.dtype.kind not in "biufc":  # objects, text, bytes, dates
        raise InvalidSpecError(
            f"the sample must hold numeric arrays or tensors; got {type(value).__name__} "
            f"{received(value)}"
        )
    return array


def _is_tensor_list(sample: Any) -> bool:
    return all(hasattr(x, "dtype") and hasattr(x, "shape") for x in sample)


def _fits(shape: tuple, expected: tuple) -> bool:
    return len(shape) == len(expected) and all(
        e is None or int(s) == e for s, e in zip(shape, expected, strict=True)
    )


def _cloned(model: Any, policy: str) -> Any:
    """A copy of a Sequential or Functional ``model`` with every layer under ``policy``."""
    import keras

    name = policy
    if _declared_inputs(model) is None:
        raise InvalidSpecError(
            "auditing under another policy clones the model, which works for Sequential and "
            f"Functional models; {_describe(model)} is subclassed. Rebuild it after "
            f"keras.config.set_dtype_policy({name!r}) and check that instead."
        )

    def under_policy(layer: Any) -> Any:
        return type(layer).from_config({**layer.get_config(), "dtype": name})

    try:
        clone = keras.models.clone_model(model, clone_function=under_policy)
        clone.set_weights(model.get_weights())
    except Exception as error:
        raise InvalidSpecError(
            f"could not rebuild {_describe(model)} under policy {name!r}: {type(error).__name__}: "
            f"{as_sentence(str(error))}"
        ) from error
    kept = [
        f"{layer.name} ({type(layer).__name__}, still {layer.dtype_policy.name})"
        for layer in clone.layers  # the layers the clone function rebuilt
        if not isinstance(layer, keras.layers.InputLayer)
        and getattr(layer, "dtype_policy", None) is not None
        and layer.dtype_policy.name != name
    ]
    if kept:  # auditing it would answer for the old policy, not for the one asked about
        shown = ", ".join(kept[:5]) + (f", ... ({len(kept)} in all)" if len(kept) > 5 else "")
        raise InvalidSpecError(
            f"could not rebuild {_describe(model)} under policy {name!r}: rebuilt from its "
            f"config with dtype={name!r}, these layers kept another policy: {shown}. Their "
            "get_config()/from_config() drop the dtype argument (pass **kwargs on to "
            "Layer.__init__), or they fix their own dtype."
        )
    return clone


def _policy_name(policy: Any) -> str:
    return validate_policy(policy)


def _requested_backends(backends: str | list[str] | None) -> list[str]:
    if backends is None:
        return []
    names = backends.split(",") if isinstance(backends, str) and backends != "all" else backends
    return pool.usable(names)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _describe(model: Any) -> str:
    return f"{type(model).__name__} '{model.name}'"


def _expected(inputs: Any) -> str:
    import keras

    if isinstance(inputs, dict):
        return (
            "{"
            + ", ".join(f"{k!r}: {_shape_text(v.shape)} {v.dtype}" for k, v in inputs.items())
            + "}"
        )
    return ", ".join(f"{_shape_text(t.shape)} {t.dtype}" for t in keras.tree.flatten(inputs))


def _sample_text(sample: Any) -> str:
    import keras

    try:
        leaves = keras.tree.flatten(sample)
        return ", ".join(
            f"{tuple(x.shape)} {_dtype(x)}" if hasattr(x, "shape") else type(x).__name__
            for x in leaves
        )
    except Exception:
        return type(sample).__name__


def _shape_text(shape: tuple) -> str:
    return (
        "("
        + ", ".join(
            "batch" if i == 0 and d is None else "?" if d is None else str(d)
            for i, d in enumerate(shape)
        )
        + ")"
    )
