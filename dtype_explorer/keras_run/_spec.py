"""A question, validated: every part of a probe checked and turned into a ``ProbeSpec``.

Nothing is evaluated: targets, dtypes and policies are checked against the catalog and Keras,
kwargs must be JSON values. A bad part raises ``InvalidSpecError`` naming what is wrong, what
is valid and the closest match.

>>> make_spec("Dense", "uint8", backend="numpy", kwargs={"units": 4}).input_dtypes
('uint8',)
>>> make_spec("Dens", backend="numpy")
Traceback (most recent call last):
...
dtype_explorer.errors.InvalidSpecError: unknown target 'Dens'; did you mean 'Dense'? ...
"""

from __future__ import annotations

import functools
import json
import math
import operator
from collections.abc import Sequence
from typing import Any

from dtype_explorer import backends as backend_names
from dtype_explorer import dtypes, keras_facts
from dtype_explorer.errors import InvalidSpecError, received, unknown
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._environment import check_precision
from dtype_explorer.keras_run._instance_kind import (
    instance_kind,
    keras2_layer_class,
    keras2_objective_kind,
    own_policy,
)
from dtype_explorer.keras_run._mode_rules import check_mode
from dtype_explorer.keras_run._values import GivenValues, user_values
from dtype_explorer.records import (
    TF_KERAS_BACKEND,
    ProbeSpec,
    check_engine_backend,
    pinned_engine,
)
from dtype_explorer.shapes import parse_shapes

#: Policies offered in pickers; any name Keras accepts works too.
COMMON_POLICIES: tuple[str, ...] = (
    "float32",
    "mixed_float16",
    "mixed_bfloat16",
    "float16",
    "bfloat16",
    "float64",
    "int8_from_float32",
)

#: Samples are probes, not workloads: the largest input a probe builds.
MAX_SAMPLE_ELEMENTS = 1 << 22
#: The most inputs of a target that takes a list of tensors (``Concatenate``, ``ops.stack``).
MAX_LIST_INPUTS = 16
#: How deeply kwargs may nest, and how many values (keys, items, leaves) they may hold in all.
MAX_KWARGS_DEPTH = 32
MAX_KWARGS_VALUES = 10_000
#: The most characters their strings (keys included) may hold in all: they are stored whole in
#: every result and cache row.
MAX_KWARGS_CHARS = 100_000

DtypeArg = str | Sequence[str]
#: A shape: ints, one sequence of them per input, or text in the one shape syntax
#: (``shapes.parse_shapes``: ``"2x8x3"``, ``"(2, 8, 3)"``, ``"[[2, 4], [2, 4]]"``).
ShapeArg = Sequence[int] | Sequence[Sequence[int]] | str | None


def make_spec(
    target: Any,
    input_dtype: DtypeArg | None = None,
    policy: Any = None,
    backend: str | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    shape: ShapeArg = None,
    values: Any = "default",
    floatx: str | None = None,
    seed: int = 0,
    mode: str = "call",
    engine: str | None = None,
    call_kwargs: dict[str, Any] | None = None,
    precision: str | None = None,
    quantize: str | None = None,
) -> ProbeSpec:
    """Validate every part of a probe and return its ``ProbeSpec``.

    Args:
        target: a layer name, ``"ops.<name>"``, or a ``keras.layers.Layer`` class or instance.
        input_dtype: a dtype name, or one per input (per leaf with structured ``values``);
            ``None``: ``"float32"``, or each user value's own dtype.
        policy: a dtype policy name or ``keras.DTypePolicy``.
        backend: a backend name; ``None``: the one this process's Keras runs on.
        kwargs: the constructor's (a layer) or the call's (an op) keyword arguments, JSON.
        shape: one shape, or one per input (not with user values: they have theirs): ints,
            or text in the one shape syntax, ``"2x8x3"``, ``"(2, 8, 3)"`` or JSON.
        values: a value preset name (``dtypes.PRESETS``), or the user's own values, one per
            input: arrays, nested lists, Python numbers, or dicts and tuples of them
            (``engine._values``); an op's may carry every array of its call, its fixed ones
            (``ops.take``'s indices) too.
        floatx: ``keras.config.floatx()`` during the probe.
        seed: the seed of the sample (and of random layers under ``"training"``).
        mode: how the target runs (``"call"``, ``"training"``, ``"model"``, ``"predict"``,
            ``"fit"``, ``"dataset"``); one that cannot apply raises, listing those that do.
        call_kwargs: keyword arguments of a layer's call (``{"training": True}``), JSON
            values; a list becomes a NumPy array (``{"mask": [[True, False]]}``).
        engine: which Keras answers (``records.engine_spec``: ``None``, ``"keras==3.X.Y"``,
            ``"keras-nightly==3.X.Y.devYYYYMMDDHH"``, ``"tf_keras"``; Keras 2 on the
            tensorflow backend only); ``"nightly"`` is pinned first (``dx.engines.pin``).
        precision: the float32 matmul precision during the probe (``"highest"``, ``"tf32"``,
            ``"default"``: ``records.PRECISIONS``); ``None`` leaves the backend's settings.
        quantize: a layer quantized before the call as ``Model.quantize`` does it (``"int8"``,
            ``"int4"``, ``"int4/<block size>"``, ``"float8"``); the mode is checked against
            the answering release's modes in its worker.

    Returns:
        The ``ProbeSpec``.

    Raises:
        InvalidSpecError: (a ``ValueError``) naming what is wrong, what is valid and the
            closest match. Nothing is evaluated: kwargs must be JSON values, values data.

    >>> spec = make_spec("ops.power", ["int32", "int32"], backend="numpy",
    ...                  values=[[2, 3], [-1, -2]])
    >>> spec.input_dtypes, spec.shapes, [v.value().tolist() for v in spec.user_values]
    (('int32', 'int32'), ((2,), (2,)), [[2, 3], [-1, -2]])
    """
    # 1. Where it runs: the engine (a Keras release) and the backend.
    engine = pinned_engine(engine)
    backend = _backend(backend, engine)
    check_engine_backend(engine, backend)
    # 2. What runs: the target, and its inputs (a preset's samples, or the user's values).
    target_name = _target_name(target)
    shape = parse_shapes(shape) if isinstance(shape, str) else shape
    given, input_dtypes = _given(values, input_dtype, shape)
    _check_floatx_and_seed(floatx, seed)
    shapes = _checked_shapes(target_name, given, input_dtypes, shape, mode)
    # 3. How it runs: the mode, then the spec (the policy, kwargs and call kwargs checked).
    mode = check_mode(mode, target_name, None if isinstance(target, str) else target, backend)
    own = _instance_policy(target, kwargs)
    filled = (
        *(("input_dtypes",) if input_dtype is None and given is None else ()),
        *(("policy",) if policy is None and floatx is None and own is None else ()),
    )
    return ProbeSpec(
        target=target_name,
        input_dtypes=input_dtypes,
        policy=validate_policy(policy if policy is not None else own or floatx or "float32"),
        backend=backend,
        kwargs=_json_kwargs(kwargs if kwargs is not None else {}),
        shapes=shapes,
        values=values if given is None else "default",
        floatx=floatx,
        seed=seed,
        mode=mode,
        engine=engine,
        user_values=given.leaves if given is not None else None,
        structure=given.structure if given is not None else None,
        call_kwargs=check_call_kwargs(call_kwargs, target_name, mode),
        precision=check_precision(precision),
        filled=filled,
        quantize=_check_quantize(quantize, target_name, engine),
    )


def _check_quantize(quantize: Any, target_name: str, engine: str | None) -> str | None:
    """``quantize`` as a mode's name, for a layer (an op, loss or metric has no weights); on
    the installed Keras (``engine`` ``None``), one of its modes, as ``check_model`` checks it
    (an engine's release is asked in its worker)."""
    if quantize is None:
        return None
    if not isinstance(quantize, str):
        raise InvalidSpecError(
            "quantize: a probe takes a mode's name (int8, int4, int4/<block size>, float8); a "
            "keras.quantizers config (gptq, awq) is a model's: dx.check_model(model, sample, "
            f"quantize=config). Received: {received(quantize)}"
        )
    if target_name.startswith(("ops.", "losses.", "metrics.")):
        raise InvalidSpecError(
            f"quantize: {target_name} has no weights to quantize; quantize is a layer's "
            f"(Dense, EinsumDense, Embedding). Received: quantize={quantize!r}"
        )
    refused = keras_facts.unknown_quantization_mode(quantize) if engine is None else None
    if refused is not None:
        raise InvalidSpecError(refused)
    return quantize


def _instance_policy(target: Any, kwargs: Any) -> str | None:
    """An instance's own dtype policy (it is probed under it unless ``policy=`` asks for
    another); ``None`` for a name or a class. An instance takes no ``kwargs``: it is probed as
    it is."""
    if isinstance(target, str) or keras2_layer_class(target):
        return None
    keras2_objective = keras2_objective_kind(target)
    keras2 = keras2_layer_class(type(target)) is not None and not isinstance(target, type)
    if keras2_objective is not None and kwargs:
        raise InvalidSpecError(
            f"kwargs: a {type(target).__name__} instance is probed as it is (its config); "
            f"kwargs are a class's constructor arguments. Received: kwargs={received(kwargs)}"
        )
    if keras2_objective is not None:  # Keras 2's losses take no dtype; a metric has its own
        return None if keras2_objective == "loss" else _keras2_metric_policy(target)
    if not keras2 and instance_kind(target) is None:
        return None
    if kwargs:
        raise InvalidSpecError(
            f"kwargs: a {type(target).__name__} instance is probed as it is (its config, "
            "weights and state); kwargs are a class's constructor arguments. Give the class "
            f"with kwargs, or leave kwargs out. Received: kwargs={received(kwargs)}"
        )
    return target.dtype_policy.name if keras2 else own_policy(target)


def _keras2_metric_policy(metric: Any) -> str | None:
    """A Keras 2 metric instance's dtype as a policy name (``None``: the default)."""
    dtype = getattr(metric, "dtype", None)
    name = getattr(dtype, "name", dtype)
    return None if name in (None, "float32") else str(name)


def _backend(backend: Any, engine: str | None) -> str:
    """The backend asked for: Keras 2's (tensorflow) for ``tf_keras``, else this process's
    when none is given."""
    if backend is None and engine is not None and engine.startswith("tf_keras"):
        backend = TF_KERAS_BACKEND
    if backend is None:
        import keras

        return keras.backend.backend()
    if not isinstance(backend, str) or backend not in backend_names.BACKENDS:
        raise unknown("backend", backend, backend_names.BACKENDS)
    return backend


def _check_floatx_and_seed(floatx: Any, seed: Any) -> None:
    if floatx is not None and (not isinstance(floatx, str) or floatx not in dtypes.FLOATX):
        raise unknown("floatx", floatx, dtypes.FLOATX)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise InvalidSpecError(
            f"seed must be an int in [0, 2**32); received: {received(seed)} ({type(seed).__name__})"
        )


def _checked_shapes(
    target_name: str,
    given: GivenValues | None,
    input_dtypes: tuple[str, ...],
    shape: ShapeArg,
    mode: str,
) -> tuple[tuple[int, ...], ...] | None:
    """The inputs' shapes (the user's values' own), checked against what the target takes."""
    if given is None:
        shapes = _shapes(shape)
        _check_inputs(target_name, input_dtypes, shapes)
        return shapes
    _check_values(target_name, given, mode)
    return given.shapes


def _given(
    values: Any, input_dtype: DtypeArg | None, shape: ShapeArg
) -> tuple[GivenValues | None, tuple[str, ...]]:
    """The user's own values (``None`` for a preset's samples) and the inputs' dtypes."""
    if isinstance(values, str):
        if values not in dtypes.PRESETS:
            raise unknown("value preset (values)", values, dtypes.PRESETS)
        return None, _input_dtypes("float32" if input_dtype is None else input_dtype)
    if shape is not None:
        raise InvalidSpecError(
            "shape: give shape or your own values, not both (values have their own shapes)"
        )
    given = user_values(values, input_dtype)
    return given, given.dtypes


def _check_values(target_name: str, given: GivenValues, mode: str) -> None:
    """As many values as the target takes inputs; structures only where a call takes them."""
    entry = _entry(target_name)
    if getattr(entry, "skip", None):
        raise InvalidSpecError(f"target: {entry.name} cannot be probed standalone: {entry.skip}")
    if target_name.startswith(("losses.", "metrics.")):
        if given.structure is not None or given.inputs != entry.arity:
            raise InvalidSpecError(
                f"values: {entry.name} takes {_inputs(entry.arity)} (y_true, y_pred), one array "
                f"or nested list each; received {given.inputs} values"
                + (" nested in dicts or tuples" if given.structure is not None else "")
            )
        return
    op = target_name.startswith("ops.")
    if op:
        if given.structure is not None:
            raise InvalidSpecError(
                f"values: {entry.name} takes one array or Python number per probed input, "
                "not dicts or tuples"
            )
        if getattr(entry, "probe", "inputs") != "inputs":
            raise InvalidSpecError(
                f"values: {entry.name} takes no probed input (its dtype goes to dtype=)"
            )
    else:
        python = [d for d in given.dtypes if d in dtypes.PYTHON_SCALARS]
        if python:
            raise InvalidSpecError(
                f"values: a layer's inputs are arrays, and {python[0]} is a Python number; "
                "give an array (np.array(2)) or input_dtype to make one"
            )
        if given.structure is not None and mode not in ("call", "training", "dataset"):
            raise InvalidSpecError(
                f"values: dicts and tuples of inputs run in modes 'call', 'training' and "
                f"'dataset'; received mode={mode!r}"
            )
    many = entry.input_style == "list" or target_name.startswith("custom:")
    most = MAX_LIST_INPUTS if many else entry.arity
    if op and not many and given.inputs == entry.tensor_count:
        return  # every array input of the call, the fixed ones (ops.take's indices) too
    if given.inputs > most or (op and not many and given.inputs != most):
        raise InvalidSpecError(
            f"values: {entry.name} takes {_inputs(most)} but {given.inputs} values were "
            f"given; give one value per input{_op_values_hint(entry) if op else ''}"
            + (" (one input of several rows is np.array(...) or [[...]])" if most == 1 else "")
        )


def _op_values_hint(entry: Any) -> str:
    """What else an op's ``values`` may carry: all its arrays, its fixed ones included."""
    extra = [leaf["param"] for leaf in catalog.op_calls.fixed(entry.inputs)]
    if not extra:
        return ""
    order = ", ".join(leaf["param"] for leaf in catalog.op_calls.tensors(entry.inputs))
    return f", or all {entry.tensor_count} of its arrays in call order ({order})"


def check_call_kwargs(call_kwargs: Any, target_name: str, mode: str = "call") -> dict[str, Any]:
    """A layer's (or a model's) call keyword arguments, checked as kwargs are: JSON values,
    bounded; names that are identifiers; not for ops (their ``kwargs`` are the call's); a
    loss's call and a metric's ``update_state`` take them (``sample_weight``); no
    ``training`` where the mode sets it.

    Args:
        call_kwargs: ``None`` or a dict of JSON values.
        target_name: the target's name (``"Dropout"``, ``"custom:Mine"``, ``"check_model"``).
        mode: the probe's mode.

    Returns:
        The keyword arguments as JSON (a copy).

    Raises:
        InvalidSpecError: naming what is wrong and what was received.

    >>> check_call_kwargs({"training": True}, "Dropout")
    {'training': True}
    >>> check_call_kwargs({"training": True}, "Dropout", "training")
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: call_kwargs: mode='training' sets training=True ...
    """
    if call_kwargs is None or call_kwargs == {}:
        return {}
    checked = _json_kwargs(call_kwargs, "call_kwargs")
    if target_name.startswith("ops."):
        raise InvalidSpecError(
            f"call_kwargs: {target_name} is called with kwargs= (its call's arguments); "
            "call_kwargs are a layer call's, a loss's or a metric's (sample_weight=...)"
        )
    for name in checked:
        if not name.isidentifier():
            raise InvalidSpecError(
                f"call_kwargs: keys are argument names; received: {received(name)}"
            )
    if "training" in checked and mode in ("training", "fit"):
        raise InvalidSpecError(
            f"call_kwargs: mode={mode!r} sets training=True itself; leave 'training' out"
        )
    return checked


def _input_dtypes(input_dtype: Any) -> tuple[str, ...]:
    """One dtype-like, or a list or tuple of them (one per input), as dtype names."""
    if isinstance(input_dtype, list | tuple):
        if not input_dtype:
            raise InvalidSpecError(
                "input_dtype must be a dtype name or one per input; received: an empty "
                f"{type(input_dtype).__name__}"
            )
        if len(input_dtype) > MAX_LIST_INPUTS:
            raise InvalidSpecError(
                f"input_dtype: {len(input_dtype)} dtypes given; no target takes more than "
                f"{MAX_LIST_INPUTS} inputs"
            )
        return tuple(dtypes.standardize(d, "input_dtype") for d in input_dtype)
    return (dtypes.standardize(input_dtype, "input_dtype"),)


def _entry(target_name: str) -> catalog.Entry:
    if target_name.startswith("custom:"):
        return catalog.custom_entry(target_name)
    return catalog.entry(target_name)


def _check_inputs(
    target_name: str, input_dtypes: tuple[str, ...], shapes: tuple[tuple[int, ...], ...] | None
) -> None:
    """As many shapes as the target takes inputs, and one input dtype or one per input."""
    entry = _entry(target_name)
    if getattr(entry, "skip", None):
        raise InvalidSpecError(f"target: {entry.name} cannot be probed standalone: {entry.skip}")
    custom = target_name.startswith("custom:")  # a user's call may take several inputs
    most = MAX_LIST_INPUTS if entry.input_style == "list" or custom else entry.arity
    if shapes is not None and len(shapes) > most:
        raise InvalidSpecError(
            f"shape: {entry.name} takes {_inputs(most)} but {len(shapes)} shapes were given; "
            f"give one shape per input (batch first), e.g. {[list(s) for s in entry.shapes]}"
        )
    inputs = len(shapes) if shapes is not None else entry.arity
    if custom and shapes is None:
        inputs = len(input_dtypes)
    if len(input_dtypes) not in (1, inputs):
        raise InvalidSpecError(
            f"input_dtype: {entry.name} gets {_inputs(inputs)} but {len(input_dtypes)} input "
            f"dtypes were given; give one dtype for all inputs or one per input"
        )


def _inputs(count: int) -> str:
    return f"at most {count} inputs" if count == MAX_LIST_INPUTS else f"{count} input(s)"


def validate_policy(policy: Any) -> str:
    """The name of a policy Keras accepts (a ``DTypePolicy`` or a string)."""
    name = getattr(policy, "name", policy)
    if not isinstance(name, str):
        raise InvalidSpecError(
            f"policy must be a name or a keras.DTypePolicy; received: {received(policy)} "
            f"({type(policy).__name__})"
        )
    if len(name) > 100:
        raise unknown("dtype policy", name, COMMON_POLICIES)
    return _checked_policy(name)


@functools.cache
def _checked_policy(name: str) -> str:
    """``name`` if ``keras.dtype_policies.get`` accepts it, as the snapshot of the installed
    Keras says (``keras_facts``: Keras is imported only for a name the snapshot cannot decide)."""
    if not keras_facts.policy_accepted(name):
        raise unknown("dtype policy", name, (*COMMON_POLICIES, *dtypes.keras_dtypes()))
    return name


def _objective_name(target: Any, kind: str) -> str:
    """A Keras (3 or 2) loss or metric instance's catalog name; a custom class is refused."""
    group = {"loss": "losses", "metric": "metrics"}[kind]
    name = f"{group}.{type(target).__name__}"
    if not type(target).__module__.startswith(("keras", "tf_keras")) or name not in catalog.names():
        known = [n for n in catalog.names() if n.startswith(f"{group}.")]
        raise InvalidSpecError(
            f"target: a {kind} instance is probed as it is when its class is Keras's own "
            f"({', '.join(known[:6])}, ...); a custom {kind} class cannot be probed yet. "
            f"Received: {received(target)} ({type(target).__name__})"
        )
    return name


def _target_name(target: Any) -> str:
    """The spec's name of ``target``: a catalog name; ``"custom:<QualName>"`` for a user's
    layer class or any layer or model instance; a Keras loss or metric instance by its
    catalog name (``"metrics.MeanIoU"``: it travels beside the spec, as it is)."""
    if isinstance(target, str):
        return catalog.entry(target).name
    if keras2_layer_class(target) is not None:  # a tf.keras class: the Keras 2 engine's
        return f"custom:{target.__qualname__}"
    keras2_kind = keras2_objective_kind(target)  # before layers: a tf.keras Metric is a Layer
    if keras2_kind is not None:  # a tf.keras loss or metric instance: by its catalog name
        return _objective_name(target, keras2_kind)
    if keras2_layer_class(type(target)) is not None:  # a tf.keras instance: probed as given
        return f"custom:{type(target).__qualname__}"
    import keras

    kind = instance_kind(target)
    if kind in ("metric", "loss"):
        return _objective_name(target, kind)
    cls = target if isinstance(target, type) else type(target)
    if not (isinstance(cls, type) and issubclass(cls, keras.layers.Layer)):
        raise InvalidSpecError(
            "target must be a layer name, 'ops.<name>', a keras.layers.Layer subclass, "
            "or a layer, model, loss or metric instance; "
            f"received: {received(target)} ({type(target).__name__})"
        )
    return f"custom:{cls.__qualname__}"


def _json_kwargs(kwargs: dict[str, Any], parameter: str = "kwargs") -> dict[str, Any]:
    if not isinstance(kwargs, dict):
        raise InvalidSpecError(
            f"{parameter} must be a dict of JSON values; received: {received(kwargs)} "
            f"({type(kwargs).__name__})"
        )
    check_json_size(kwargs, parameter)
    try:
        return json.loads(json.dumps(kwargs, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise InvalidSpecError(
            f"{parameter} must be JSON values (numbers, strings, lists, dicts): "
            f"{received(str(error))}"
        ) from None


def check_json_size(value: Any, parameter: str) -> None:
    """Refuse ``value`` if it nests deeper than ``MAX_KWARGS_DEPTH``, holds more than
    ``MAX_KWARGS_VALUES`` values or more than ``MAX_KWARGS_CHARS`` characters of text, before
    anything recursive (``json``, pydantic) touches it.

    >>> check_json_size({"a": [[[[1]]]]}, "kwargs")
    >>> deep = []
    >>> for _ in range(100_000):
    ...     deep = [deep]
    >>> check_json_size(deep, "kwargs")
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: kwargs nest deeper than 32 levels; ...
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    count = chars = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        chars += len(item) if isinstance(item, str) else 0
        if chars > MAX_KWARGS_CHARS:
            raise InvalidSpecError(
                f"{parameter} hold more than {MAX_KWARGS_CHARS} characters of text in all "
                f"(received: {chars} or more); a layer's arguments are a few JSON values"
            )
        if depth > MAX_KWARGS_DEPTH:
            raise InvalidSpecError(
                f"{parameter} nest deeper than {MAX_KWARGS_DEPTH} levels; a layer's arguments "
                "are flat JSON values, lists and small dicts"
            )
        if count > MAX_KWARGS_VALUES:
            raise InvalidSpecError(
                f"{parameter} hold more than {MAX_KWARGS_VALUES} values; a layer's arguments "
                "are a few JSON values"
            )
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            count += len(item)
            chars += sum(len(k) for k in item if isinstance(k, str))
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)


def _shapes(shape: Any) -> tuple[tuple[int, ...], ...] | None:
    """One shape (``(2, 4)``) or one per input (``[(2, 4), (2, 4)]``), as tuples of ints."""
    if shape is None:
        return None
    example = "a shape such as (2, 4), batch first, or one per input such as [(2, 4), (2, 4)]"
    if not isinstance(shape, list | tuple):
        raise InvalidSpecError(
            f"shape must be {example}; received: {received(shape)} ({type(shape).__name__})"
        )
    if len(shape) > MAX_LIST_INPUTS * 8:
        raise InvalidSpecError(
            f"shape: received {len(shape)} items ({received(shape)}); a shape has at most 8 "
            f"dims and no target takes more than {MAX_LIST_INPUTS} inputs"
        )
    nested = bool(shape) and all(isinstance(s, list | tuple) for s in shape)
    shapes = [tuple(s) for s in shape] if nested else [tuple(shape)]
    return tuple(_one_shape(s, example) for s in shapes)


def _one_shape(shape: tuple[Any, ...], example: str) -> tuple[int, ...]:
    dims = []
    for d in shape:
        try:
            if isinstance(d, bool):
                raise TypeError
            dims.append(operator.index(d))
        except TypeError:
            dims = []
            break
    if not dims or len(dims) > 8 or any(d <= 0 for d in dims):
        raise InvalidSpecError(
            f"shape must be {example}: 1 to 8 positive ints; received: {received(shape)}"
        )
    size = math.prod(dims)
    if size > MAX_SAMPLE_ELEMENTS:
        raise InvalidSpecError(
            f"shape {tuple(dims)} holds {size} elements; the limit is {MAX_SAMPLE_ELEMENTS}"
        )
    return tuple(dims)
