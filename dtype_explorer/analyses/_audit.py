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
import importlib
import inspect
import json
import math
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.analyses import _audit_rules
from dtype_explorer.errors import (
    InvalidSpecError,
    as_sentence,
    first_line,
    keras_message,
    received,
    unknown,
)
from dtype_explorer.keras_run import (
    call_arguments,
    check_call_kwargs,
    compiled_by,
    global_seed_kept,
    op_trace,
    preserved_keras_state,
    train_one_step,
    validate_policy,
    variable_dtypes,
    wrapped_entry_points,
)
from dtype_explorer.records import (
    AUDIT_MODES,
    MODES,
    AuditReport,
    ErrorInfo,
    FitReport,
    LayerCall,
    LayerDifference,
    PredictReport,
    TensorInfo,
    VariableDtypes,
    engine_spec,
)
from dtype_explorer.runtime import engines, pool
from dtype_explorer.timing import ms

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
    call_kwargs: dict[str, Any] | None = None,
    mode: str = "call",
    labels: Any = None,
    engine: str | None = None,
) -> AuditReport:
    """Run ``model`` once on ``sample`` and report where dtypes change and which changes hurt.

    Never changes the model's weights, optimizer, compile state or policy, nor Keras's floatx
    or global policy.

    ``mode`` audits the model the way it will be used: ``"call"`` its eager call
    (``Model.__call__``, inference); ``"training"`` the eager call with ``training=True`` (the
    model's variables, moving statistics and seed states put back bitwise); ``"predict"`` the
    real ``model.predict`` (compiled on jax and tensorflow, eager on torch), its layers as the
    compiled function saw them (dtypes; values only at the outputs), beside the eager call;
    ``"fit"`` one real ``model.fit`` step on a copy (the model's own loss and optimizer if it is
    compiled, else SGD on a loss fitting the output), with gradient dtypes, inf/NaN gradients
    and loss scaling.

    Args:
        model: a Keras model or layer.
        sample: an array, list or dict matching ``model.inputs`` (default: built from them,
            batch of 2).
        policy: audit a clone of the model with every layer under this dtype policy
            (Sequential and Functional models).
        backends: ``"all"`` or a list of backends on which to re-run the layers that take
            integer or odd-dtype inputs, to find divergences.
        timeout: seconds a worker may take for each of those re-runs.
        call_kwargs: keyword arguments of the model's call, as JSON values (a list becomes
            a NumPy array): ``{"training": True}`` audits the training pass (dropout, batch
            statistics) instead of inference (``training=False``).
        mode: ``"call"`` (default), ``"training"``, ``"predict"`` or ``"fit"``.
        labels: the targets of the ``"fit"`` step (default: zeros fitting the output and the
            loss: class indices for a sparse loss).
        engine: audit with another Keras (``dx.probe``'s ``engine``: ``"keras==3.X.Y"``,
            created first when missing): the model is rebuilt from its config (with its
            weights) in that release's worker, on this process's backend. A model whose
            config that release cannot rebuild raises. The Keras 2 engine is refused: the
            audit traces Keras 3 layers.

    Returns:
        An ``AuditReport``: the dtype flow layer by layer (``.to_frame()``) and the findings,
        each with a fix (``.findings``).

    >>> import keras, numpy as np
    >>> import dtype_explorer as dx
    >>> inputs = keras.Input((3,), dtype="float64")
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs))
    >>> report = dx.check_model(model)
    >>> [f.kind for f in report.findings]
    ['silent-downcast']
    >>> fit = dx.check_model(model, mode="fit").fit  # one real step on a copy
    >>> fit.loss, [(g.name, g.dtype) for g in fit.gradients]
    ('mean_squared_error', [('dense/kernel', 'float32'), ('dense/bias', 'float32')])
    """
    import keras

    if not isinstance(model, keras.layers.Layer):
        raise InvalidSpecError(
            f"check_model needs a Keras model or layer (keras.Model, keras.layers.Layer); "
            f"got {type(model).__module__}.{type(model).__qualname__}"
        )
    started = time.perf_counter()
    mode = _audit_mode(mode, model)
    if labels is not None and mode != "fit":
        raise InvalidSpecError(
            f"labels are the targets of a training step: pass them with mode='fit'; got "
            f"mode={mode!r}"
        )
    timeout = pool.time_limit(timeout)
    arguments = call_arguments(check_call_kwargs(call_kwargs, "check_model"))
    if "training" in arguments and mode != "call":
        raise InvalidSpecError(
            f"call_kwargs: mode={mode!r} sets training itself; pass training in call_kwargs "
            f"only with mode='call'. Received: call_kwargs={call_kwargs!r}"
        )
    policy = None if policy is None else _policy_name(policy)
    requested = _requested_backends(backends)
    engine = engine_spec(engine)
    if engine is not None:
        options = {"call_kwargs": call_kwargs, "mode": mode, "labels": labels}
        return _check_on_engine(model, sample, policy, requested, timeout, engine, options)
    notes = [] if model.built else [f"{_describe(model)} was not built; the audit built it."]
    timings: dict[str, float] = {}
    ran: dict[str, Any] = {"execution": _EXECUTION.get(mode, "")}
    with preserved_keras_state():
        target = _cloned(model, policy) if policy is not None else model
        inputs = _declared_inputs(target)
        sample = _sample_for(target, inputs, sample)
        # under policy=, the copy is built as the model would be under that policy
        own = policy or target.dtype_policy.name
        audited = _training_copy(target, sample, own) if mode == "fit" else target
        tracer = _Tracer(audited)
        trains = mode == "training" or bool(arguments.get("training"))
        with _variables_kept(audited) if trains else contextlib.nullcontext():
            outputs = tracer.run(sample, inputs, arguments, training=mode in ("training", "fit"))
        calls = tracer.finish(outputs)
        timings["forward_ms"] = tracer.forward_ms
        if mode == "fit":
            _compile_copy(audited, model, outputs)  # the user's compile config
        findings = _audit_rules.find(
            calls, model=audited, policy=policy or target.dtype_policy.name
        )
        findings += _audit_rules.wrong_numbers(
            [(call, event.layer, event.values) for call, event in zip(calls, tracer.calls)]
        )
        if requested:
            layers = {path: layer for layer, path, _ in tracer.layers.values()}
            findings += _audit_rules.divergences(calls, layers, requested, timeout=timeout)
        if mode == "predict" and outputs is not None:
            t0 = time.perf_counter()
            ran["predict"], predicted = _predict(target, sample, calls, outputs)
            timings["predict_ms"] = ms(t0)
            findings += [  # a layer that raised only here is the mode-divergence below
                f
                for f in _audit_rules.find(
                    predicted, model=target, policy=policy or target.dtype_policy.name
                )
                if f.kind != "call-error"
            ]
            findings += _audit_rules.mode_divergences(ran["predict"])
            ran.update(compiled=ran["predict"].compiled, execution=ran["predict"].execution)
            calls = predicted
        if mode == "fit" and outputs is not None:
            t0 = time.perf_counter()
            ran["fit"], failed = _fit(audited, sample, outputs, labels)
            timings["fit_ms"] = ms(t0)
            compiled, how = compiled_by(audited)
            ran.update(compiled=compiled, execution=f"model.fit: one training step, {how}")
            if failed is not None:
                findings.append(failed)
            else:
                findings += _audit_rules.gradient_findings(ran["fit"], audited)
            notes.append(
                "The training step ran on a copy of the model (weights copied, "
                + (
                    "compiled from the model's compile config, with a fresh optimizer"
                    if _is_compiled(model)
                    else "compiled with SGD and a loss fitting its output: the model is not "
                    "compiled"
                )
                + "); the model itself was not trained."
            )
    timings["total_ms"] = ms(started)
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
        mode=mode,
        **ran,
        keras=keras.__version__,
    )


# --------------------------------------------------------------------------- modes

_EXECUTION = {
    "call": "",
    "training": "the eager call with training=True",
}


def _audit_mode(mode: Any, model: Any) -> str:
    """``mode`` if an audit of ``model`` can run that way, else ``InvalidSpecError`` saying why
    and listing the modes that apply."""
    import keras

    is_model = isinstance(model, keras.Model)
    usable = [
        m
        for m in AUDIT_MODES
        if is_model or m not in ("predict", "fit")
        if keras.backend.backend() != "numpy" or m != "fit"
    ]
    if not isinstance(mode, str) or mode not in MODES:
        raise unknown("mode", mode, AUDIT_MODES)
    if mode in usable:
        return mode
    if mode == "model":
        why = "an audit's 'call' already runs the model through Model.__call__"
    elif mode == "dataset":
        why = (
            "it maps one layer over tf.data; probe a layer that way with "
            "dx.probe(layer, mode='dataset')"
        )
    elif mode in ("predict", "fit") and not is_model:
        why = (
            f"{_describe(model)} is a layer, not a keras.Model: it has no {mode}(); "
            "wrap it in a keras.Model to audit it that way"
        )
    else:
        why = "the numpy backend cannot train (model.fit is not implemented there)"
    raise InvalidSpecError(
        f"mode {mode!r} cannot audit {_describe(model)}: {why}; modes that apply: "
        f"{', '.join(usable)}"
    )


@contextlib.contextmanager
def _variables_kept(model: Any) -> Iterator[None]:
    """Every variable of ``model`` (weights, moving statistics, seed states) put back bitwise:
    an eager ``training=True`` call updates some of them."""
    import keras

    saved = [(v, keras.ops.convert_to_numpy(v.value).copy()) for v in model.variables]
    try:
        yield
    finally:
        for variable, value in saved:
            variable.assign(value)


def _predict(
    model: Any, sample: Any, eager: list[LayerCall], eager_outputs: Any
) -> tuple[PredictReport, list[LayerCall]]:
    """The real ``model.predict`` on ``sample``, every layer call recorded as the compiled
    function traced it, compared with the eager pass ``eager``."""
    import keras

    tracer = _Tracer(model, values=False)
    error = None
    try:
        outputs, symbolic = tracer.run_predict(sample)
    except Exception as exc:  # the eager call ran: that predict does not is the finding
        outputs = symbolic = None
        error = ErrorInfo(type=type(exc).__name__, message=keras_message(str(exc), limit=2000))
    calls = tracer.finish(symbolic)
    compiled, how = _predict_compiled(model)
    by_key = {(c.path, c.call_index): c for c in eager}
    differences = []
    for call in calls:
        before = by_key.get((call.path, call.call_index))
        if before is None or (before.error is not None and not before.retried):
            continue
        for where in ("received", "outputs"):
            was = tuple(t.dtype for t in getattr(before, where))
            now = tuple(t.dtype for t in getattr(call, where))
            if was != now and now:
                differences.append(
                    LayerDifference(
                        path=call.path,
                        layer_class=call.layer_class,
                        call_index=call.call_index,
                        where="received" if where == "received" else "output",
                        eager=was,
                        predict=now,
                    )
                )
    eager_leaves = keras_flatten(eager_outputs)
    leaves = [] if outputs is None else [np.asarray(x) for x in keras.tree.flatten(outputs)]
    report = PredictReport(
        compiled=compiled,
        execution=f"model.predict, {how}",
        outputs=tuple(_info(x) for x in leaves),
        nonfinite=tuple(_nonfinite(x) for x in leaves),
        eager_outputs=tuple(_info(x) for x in eager_leaves),
        eager_nonfinite=tuple(_nonfinite(x) for x in eager_leaves),
        differences=tuple(differences),
        error=error,
        failed_at=None if tracer.failed_at is None else tracer.failed_at.path,
        cause=None if tracer.failed_at is None else tracer.failed_at.error,
    )
    return report, calls


def _predict_compiled(model: Any) -> tuple[bool, str]:
    import keras

    backend = keras.backend.backend()
    if getattr(model, "run_eagerly", False):
        return False, "eager (compiled with run_eagerly=True)"
    if backend in ("jax", "tensorflow"):
        return compiled_by(model)
    return False, f"eager on {backend}"


def _nonfinite(tensor: Any) -> int:
    """How many inf/NaN values a float tensor or array holds (0 for other dtypes)."""
    import keras

    if not dtypes.is_float(_dtype(tensor)):
        return 0
    array = np.asarray(keras.ops.convert_to_numpy(tensor)).astype(np.float32)
    return int(array.size - np.isfinite(array).sum())


def _is_compiled(model: Any) -> bool:
    return bool(getattr(model, "compiled", False)) and getattr(model, "loss", None) is not None


def _training_copy(model: Any, sample: Any, policy_name: str) -> Any:
    """A copy of ``model`` to train, built under ``policy_name`` (the model's own policy,
    which decides whether ``compile`` adds loss scaling): the same layers, policies and
    weights; Python's random stream (which Keras draws unseeded layers' seeds from) seeded for
    the copy and put back, so the copy's noise is reproducible and the user's stream
    untouched."""
    import keras

    state, policy = random.getstate(), keras.config.dtype_policy()
    random.seed(0)
    try:
        keras.config.set_dtype_policy(policy_name)  # the model's own: compile reads it
        try:
            if _declared_inputs(model) is not None:
                copy = keras.models.clone_model(model)
            else:
                copy = type(model).from_config(model.get_config())
                copy(sample)
            copy.set_weights(model.get_weights())
        except Exception as error:
            said = " ".join(keras_message(str(error), limit=300).split("Example:")[0].split())
            raise InvalidSpecError(
                f"mode 'fit' trains a copy of {_describe(model)}, and it could not be copied: "
                f"{type(error).__name__}: {said} (a subclassed "
                "model needs get_config()/from_config()); modes that need no copy: call, "
                "training, predict"
            ) from error
    finally:
        random.setstate(state)
        keras.config.set_dtype_policy(policy)
    return copy


def _compile_copy(copy: Any, model: Any, outputs: Any) -> None:
    """Compile the copy as the model is (its compile config; a fresh optimizer of the same
    kind), or, for a model not compiled, with SGD and a loss fitting its output."""
    import keras

    if _is_compiled(model):
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
    return bool(makers) and all(_is_softmax(layer) for layer in makers)


def _fit(copy: Any, sample: Any, outputs: Any, labels: Any) -> tuple[FitReport | None, Any]:
    """One real ``model.fit`` step of the compiled copy on ``sample``: its report, or the
    finding that it raised where the eager ``training=True`` call ran. Labels the user gave
    that the step refuses are an ``InvalidSpecError``."""
    import keras

    loss = getattr(copy, "loss", None)
    name = (
        loss
        if isinstance(loss, str)
        else getattr(loss, "name", None) or getattr(loss, "__name__", type(loss).__name__)
    )
    sparse = "sparse" in str(name).lower()
    given = labels is not None
    if labels is None:
        labels = keras.tree.map_structure(
            lambda t: (
                np.zeros(tuple(t.shape)[:-1], "int32")
                if sparse
                else np.zeros(tuple(t.shape), "float32")
            ),
            outputs,
        )
    try:
        with global_seed_kept():
            report = train_one_step(copy, sample, labels, loss=str(name), prefix=f"{copy.name}/")
        return report, None
    except Exception as error:
        said = f"{type(error).__name__}: {as_sentence(keras_message(str(error), limit=1000))}"
        if given:
            raise InvalidSpecError(
                f"one model.fit step of a copy of {_describe(copy)} failed with the labels "
                f"given ({_sample_text(labels)}): {said}"
            ) from error
        return None, _audit_rules.step_failed(
            copy, said, compiled_by(copy)[1], str(name), _sample_text(labels)
        )


def _check_on_engine(
    model: Any,
    sample: Any,
    policy: str | None,
    requested: list[str],
    timeout: float | None,
    engine: str,
    options: dict[str, Any],
) -> AuditReport:
    """``check_model`` in the engine's worker on this process's backend, on the model rebuilt
    there from its config and weights; ``options`` are check_model's ``call_kwargs``,
    ``mode`` and ``labels``."""
    import keras

    if engine.startswith("tf_keras"):
        raise InvalidSpecError(
            "check_model traces Keras 3 layers: the Keras 2 engine cannot audit a model; "
            f"received: engine={engine!r}"
        )
    if requested:
        raise InvalidSpecError(
            "check_model on an engine audits on this process's backend only; give backends= "
            f"or engine=, not both; received: backends={requested!r}, engine={engine!r}"
        )
    try:
        config = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
    except (TypeError, ValueError) as exc:
        raise InvalidSpecError(
            f"{_describe(model)} cannot be rebuilt from its config for engine {engine!r}: {exc}"
        ) from None
    weights = [keras.ops.convert_to_numpy(w) for w in model.weights]
    if sample is not None:
        sample = keras.tree.map_structure(keras.ops.convert_to_numpy, sample)
    if options.get("labels") is not None:
        options = {
            **options,
            "labels": keras.tree.map_structure(keras.ops.convert_to_numpy, options["labels"]),
        }
    engines.ensure(engine)
    backend = keras.backend.backend()
    future = pool.call(
        backend,
        audit_rebuilt,
        config,
        weights,
        sample,
        policy,
        options,
        timeout=math.inf if timeout is None else timeout + 120,
        engine=engine,
    )
    answer = future.result()
    if isinstance(answer, str):
        raise InvalidSpecError(answer)
    report = AuditReport.from_dict(answer)
    note = f"audited with Keras {report.keras} (engine {engine}), the model rebuilt from its config"
    return report.model_copy(update={"engine": engine, "notes": (*report.notes, note)})


def audit_rebuilt(
    config: dict[str, Any],
    weights: list[Any],
    sample: Any,
    policy: str | None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any] | str:
    """In an engine's worker: rebuild the model from its config and weights with this
    release's Keras, and audit it; the report as a dict, or why it could not be rebuilt."""
    import keras

    dropped: list[str] = []
    try:
        model = keras.saving.deserialize_keras_object(_older_config(config, dropped))
        model.set_weights(weights)
    except Exception as exc:
        return (
            f"Keras {keras.__version__} cannot rebuild this model from its config "
            f"({type(exc).__name__}: {first_line(str(exc))})"
        )
    report = check_model(model, sample, policy=policy, **(options or {}))
    if dropped:
        note = (
            f"left out of the config, unknown to Keras {keras.__version__} and None (their "
            f"default): {', '.join(sorted(set(dropped)))}"
        )
        report = report.model_copy(update={"notes": (*report.notes, note)})
    return report.to_dict()


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
        known = _init_parameters(cls)
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


def _init_parameters(cls: type) -> set[str]:
    """Every named parameter of the ``__init__``s along ``cls``'s MRO."""
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

    def __init__(self, model: Any, *, values: bool = True):
        self.model = model
        #: Whether values can be read (an eager pass); inside a compiled function only dtypes.
        self.values = values
        self.done = False
        self.root_outputs: Any = None
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
            tracer._pending.setdefault(key, []).append(
                _infos((args, _tensor_kwargs(kwargs)), tracer.values)
            )
            first_event = len(tracer.calls)
            # the ops of this call (its conversion and autocast included): a sublayer's call
            # opens its own trace inside, so each call keeps only the ops it ran itself
            with op_trace(numerics=tracer.values) as trace:
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
                    f"the sample does not fit {_describe(self.model)}: "
                    f"{kind}: {as_sentence(message)}"
                    + (f" The model takes {_expected(inputs)}." if inputs is not None else "")
                    + f" The sample is {_sample_text(sample)}."
                ) from None
            finally:
                self.forward_ms = ms(started)

    def run_predict(self, sample: Any) -> tuple[Any, Any]:
        """The real ``model.predict`` on ``sample`` as one batch: its outputs, and the root
        call's outputs as the compiled function traced them. The model's predict function is
        made afresh (one made before was traced without the recorders) and put back after,
        so nothing compiled here stays on the model."""
        import keras

        batch = int(keras.tree.flatten(sample)[0].shape[0])
        had = "predict_function" in self.model.__dict__
        before = getattr(self.model, "predict_function", None)
        self.model.predict_function = None
        try:
            with self.installed():
                outputs = self.model.predict(sample, batch_size=batch, verbose=0)
        finally:
            self.model.predict_function = before
            if not had:
                self.model.__dict__.pop("predict_function", None)
        return outputs, self.root_outputs

    def _recording(self) -> bool:
        """On the auditing thread, outside the symbolic traces Keras runs to build layers; in
        a compiled function, its first trace only."""
        from keras.src.backend.common.symbolic_scope import in_symbolic_scope

        return not self.done and threading.get_ident() == self._thread and not in_symbolic_scope()

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
            event.received = _infos((args, _tensor_kwargs(kwargs)), self.values)
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
            event.outputs = _infos(outputs, self.values)
            if (
                self.values
                and leaf
                and event.error is None
                and _audit_rules.worth_value_check(event.received)
            ):
                event.values = _as_numpy((args, kwargs, outputs))
            event.keep = keras_flatten(outputs)
            event.output_ids = {id(t) for t in event.keep}
            if depth == 0 and not self.values:  # the compiled function's first trace is done
                self.root_outputs, self.done = outputs, True
            return outputs

        return traced_call

    def _retry(
        self, event: _Event, original: Any, args: tuple, kwargs: dict, error: Exception
    ) -> Any:
        """Re-run a call that raised with the dtype fix the rules would propose; re-raise if
        there is none or it does not help."""
        fix = _retry_cast(event.layer, event.received) if self.values else None
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


def _info(tensor: Any, values: bool = True) -> TensorInfo:
    shape = tuple(None if d is None else int(d) for d in tensor.shape)
    return TensorInfo(dtype=_dtype(tensor), shape=shape, finite=_finite(tensor) if values else None)


def _infos(structure: Any, values: bool = True) -> tuple[TensorInfo, ...]:
    return tuple(_info(t, values) for t in keras_flatten(structure))


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
