"""What the op trace (``_trace``) records of one op, and its records: the ``Step`` a wrapper
fills (inputs, outputs; ``_values`` looks at their values), the dtypes and kinds read from
Keras, and the ``TraceStep``/``TraceTensor`` records built from a step. Everything read from
Keras once is cached with ``functools.lru_cache`` (a loop repeats the same ops, types and
dtypes).

The records are built without validation (:func:`built`), which relies on how pydantic stores
a model instance; ``tests/keras_run/test_trace.py`` pins that, so a pydantic upgrade that
changes it fails loudly.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._compat import in_symbolic_scope
from dtype_explorer.keras_run.trace._placement import tensor_device
from dtype_explorer.records import TraceStep, TraceTensor

#: Ops that convert a dtype on purpose (when given a target dtype).
CAST_OPS = frozenset({"cast", "convert_to_tensor", "_saturate_cast", "astype"})
#: Comparisons (ops and Python operators): their output is a bool whatever ``result_type`` says.
COMPARISONS = frozenset(
    {"lt", "le", "gt", "ge", "eq", "ne", "less", "less_equal", "greater", "greater_equal",
     "equal", "not_equal"}
)  # fmt: skip
#: Parameters whose Python-scalar arguments take part in promotion (``ops.multiply(x, 2.0)``);
#: other scalars (``axis=1``, ``epsilon=1e-3``) do not.
DATA_PARAMS = frozenset(
    {
        "x", "x1", "x2", "y", "a", "b", "inputs", "value", "values", "tensor", "lhs", "rhs",
        "condition", "x_min", "x_max", "min", "max", "xs", "arrays", "input", "elements",
        "tensors", "other",
    }
)  # fmt: skip
#: How many distinct tensor records and dtype changes are kept (a loop repeats the same).
RECORDS_CACHED = 20000


# ----------------------------------------------------------------------------- values


def dtype_name(dtype: Any) -> str:
    """Keras's name of ``dtype`` (``dtypes.keras_name``: remembered per dtype), or its text
    where Keras names none (asked again each time: a string or object array, a jax key, seldom
    met in a pass)."""
    try:
        return dtypes.keras_name(dtype)
    except Exception:
        return str(dtype)


@functools.cache
def result_type(args: tuple) -> str | None:
    """Keras's ``result_type`` of these dtypes (``python_int`` as a weak ``int``), or
    ``None`` where it raises."""
    from keras.src.backend.common.dtypes import result_type

    weak = {"python_int": int, "python_float": float, "python_bool": bool}
    try:
        return result_type(*(weak.get(a, a) for a in args))
    except Exception:
        return None


@functools.cache
def classes() -> tuple[type, type]:
    """Keras's variable class and ``KerasTensor``."""
    from keras.src.backend.common import variables
    from keras.src.backend.common.keras_tensor import KerasTensor

    # KerasVariable before Keras 3.7 (an engine's release)
    Variable = getattr(variables, "Variable", None) or variables.KerasVariable
    return Variable, KerasTensor


@functools.cache
def type_kind(t: type) -> str | None:
    """``scalar`` (exact Python number), ``variable``, ``tensor``, ``abstract`` (a tracer or a
    graph tensor), or ``None`` for anything else; cached per type."""
    variable, keras_tensor = classes()
    if t in (bool, int, float):
        return "scalar"
    if issubclass(t, variable):
        return "variable"
    if t.__name__ == "OpenVINOKerasTensor":  # its dtype and shape are set per instance
        return "tensor"
    if (
        issubclass(t, keras_tensor)
        or not (hasattr(t, "dtype") and hasattr(t, "shape"))
        or isinstance(getattr(t, "shape", None), types.BuiltinFunctionType)
    ):
        return None
    module = t.__module__ or ""
    abstract = "Tracer" in t.__name__ or "tracer" in module
    if module.startswith("tensorflow") and not hasattr(t, "numpy"):
        abstract = True
    return "abstract" if abstract else "tensor"


def shape_of(value: Any) -> tuple:
    shape = value.shape
    if type(shape) is tuple:  # NumPy, JAX: already ints
        return shape
    try:
        return tuple(None if d is None else int(d) for d in shape)
    except Exception:
        return ()


#: What the op trace leaves out of the values on a backend, said in the probe's trace note.
VALUE_LIMITS = {
    "openvino": (
        "values are not read per op (no inf/NaN per op, no values lost at a cast): a Keras "
        "OpenVINO tensor is a graph node, and each read compiles the graph up to it"
    ),
}


def param_names(fn: Any) -> tuple[str, ...]:
    """The names of ``fn``'s positional parameters (none where it has no signature).

    Read once per function, through what ``fn`` wraps (``functools.wraps``; the signature is
    the wrapped one's) and, for a bound method, its function less ``self``: a cache keyed by
    a wrapper made for one probe (the random draws' recorder) or by a new layer's bound
    method would miss on every probe and keep what each one holds alive.
    """
    function = getattr(fn, "__func__", None)
    if function is not None and getattr(fn, "__self__", None) is not None:
        return _param_names(_unwrapped(function))[1:]
    return _param_names(_unwrapped(fn))


def _unwrapped(fn: Any) -> Any:
    try:
        return inspect.unwrap(fn, stop=lambda f: hasattr(f, "__signature__"))
    except ValueError:  # a cycle of __wrapped__
        return fn


@functools.cache
def _param_names(fn: Any) -> tuple[str, ...]:
    try:
        return tuple(
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        )
    except (TypeError, ValueError):
        return ()


def symbolic(args: tuple, kwargs: dict) -> bool:
    """Whether a call is symbolic: inside Keras's symbolic scope, or given a KerasTensor."""
    if in_symbolic_scope():
        return True
    _, keras_tensor = classes()
    for a in (*args, *kwargs.values()):
        if isinstance(a, keras_tensor):
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(b, keras_tensor) for b in a):
            return True
    return False


# ---------------------------------------------------------------------------- recording


class Step:
    __slots__ = (
        "abstract",
        "cast_to",
        "children",
        "device",
        "error",
        "first_nonfinite",
        "float16_overflow",
        "inputs",
        "inside",
        "losses",
        "max_abs",
        "nonfinite",
        "objects",
        "op",
        "outputs",
        "phase",
        "reads_before",
        "rerun",
        "source",
        "user",
        "via",
        "weak",
        "wrong",
    )  # fmt: skip

    def __init__(self, op: str):
        self.op = op
        self.inputs: list[dict] = []
        self.outputs: list[dict] = []
        self.objects: list[tuple[str, Any]] = []
        self.cast_to: str | None = None
        self.source = self.via = self.user = None
        self.phase = "call"
        self.inside: str | None = None
        self.children: list[Step] = []
        self.error: str | None = None
        self.abstract = False
        self.nonfinite = self.first_nonfinite = self.float16_overflow = False
        self.max_abs: float | None = None
        self.losses: list[Any] = []
        self.weak = False
        #: ``(fn, args, kwargs)`` to run the op again on wider inputs (``dx.trace``), and the
        #: first wrong number that found (``records.ValueFinding``).
        self.rerun: tuple | None = None
        self.wrong: Any = None
        self.device: str | None = None
        #: How many variable reads of the trace had overflowed when the step began: one more
        #: at its end means a read inside it made the inf (``look_at_values``'s ``inner``).
        self.reads_before = 0


def describe(value: Any, name: str, step: Step, side: str) -> dict | None:
    t = type(value)
    kind = type_kind(t)
    if kind is None:
        return None
    if kind == "scalar":
        return {"name": name, "dtype": f"python_{t.__name__}", "kind": "scalar"}
    if kind == "variable":
        stored = dtype_name(value._dtype)
        read = dtype_name(value.dtype)
        entry = {"name": name, "dtype": read, "shape": shape_of(value), "kind": "variable"}
        if read != stored:
            entry["stored"] = stored
            entry["at"] = len(step.objects)  # the value itself: scalars are not kept there
    else:
        entry = {"name": name, "dtype": dtype_name(value.dtype), "shape": shape_of(value)}
        if kind == "abstract":
            step.abstract = True
    step.objects.append((side, value))
    return entry


def read_inputs(fn: Any, args: tuple, kwargs: dict, step: Step) -> None:
    names = param_names(fn)
    items = [(names[i] if i < len(names) else f"arg{i}", a) for i, a in enumerate(args)]
    items.extend(kwargs.items())
    for name, value in items:
        if name == "dtype":
            step.cast_to = None if value is None else dtype_name(value)
            continue
        many = isinstance(value, (list, tuple)) and value and not isinstance(value[0], (int, float))
        values = value if many else (value,)
        for j, v in enumerate(values):
            entry = describe(v, f"{name}[{j}]" if many else name, step, "in")
            if entry is None:
                continue
            if entry.get("kind") == "scalar" and name not in DATA_PARAMS:
                continue
            step.inputs.append(entry)


def read_outputs(out: Any, step: Step) -> None:
    values = out if isinstance(out, (list, tuple)) else (out,)
    flat: list[Any] = []
    for v in values:
        flat.extend(v) if isinstance(v, (list, tuple)) else flat.append(v)
    for j, v in enumerate(flat[:16]):
        entry = describe(v, f"out{j}" if len(flat) > 1 else "out", step, "out")
        if entry is not None and entry.get("kind") != "scalar":
            step.outputs.append(entry)
            if step.device is None and not step.abstract:  # where the step ran
                step.device = tensor_device(v)


def error_text(error: BaseException) -> str:
    try:
        lines = str(error).strip().splitlines()
    except Exception:
        lines = []
    return f"{type(error).__name__}: {lines[0][:300] if lines else ''}"


# --------------------------------------------------------------------------- to records


def record(step: Step, index: int) -> TraceStep:
    """The record of one step. Built without validation (:func:`built`): every value was made
    here from Keras's own answers, and validating them costs a third of the trace."""
    fields = {"conversions": (), "result_type_args": (), "result_type": None, **_change(step)}
    return built(
        TraceStep,
        index=index,
        op=step.op,
        phase=step.phase,
        inputs=tuple(_tensor(e) for e in step.inputs),
        outputs=tuple(_tensor(e) for e in step.outputs),
        cast_to=step.cast_to,
        nonfinite=step.nonfinite,
        first_nonfinite=step.first_nonfinite,
        float16_overflow=step.float16_overflow,
        abstract=step.abstract,
        max_abs=step.max_abs,
        error=step.error,
        source=step.source,
        via=step.via,
        user=step.user,
        inside=step.inside,
        children=tuple(record(c, i) for i, c in enumerate(step.children)),
        device=step.device,
        kernel=None,
        losses=tuple(step.losses),
        wrong=step.wrong,
        **fields,
    )


def _tensor(entry: dict) -> TraceTensor:
    """One tensor's record; records are immutable, so equal ones are shared."""
    return _tensor_record(
        entry.get("name", ""),
        entry["dtype"],
        entry.get("shape", ()),
        entry.get("kind", "tensor"),
        entry.get("stored"),
    )


@functools.lru_cache(maxsize=RECORDS_CACHED)
def _tensor_record(
    name: str, dtype: str, shape: tuple, kind: str, stored: str | None
) -> TraceTensor:
    return built(TraceTensor, name=name, dtype=dtype, shape=shape, kind=kind, stored=stored)


def built(cls: type, **fields: Any) -> Any:
    """``cls(**fields)`` without validation, every field given: what ``model_construct`` does
    without its per-field default handling (a third of its cost)."""
    record = cls.__new__(cls)
    object.__setattr__(record, "__dict__", fields)
    object.__setattr__(record, "__pydantic_fields_set__", set(fields))
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record


@functools.lru_cache(maxsize=1)
def no_conversion_ops() -> tuple[frozenset[str], frozenset[str]]:
    """The ops (by their last name: ``isfinite`` for ``ops.isfinite``, ``backend.numpy.isfinite``)
    whose output dtype converts none of their inputs, from the ops catalog (Keras's own
    ``compute_output_spec``, ``tools/build_ops_catalog.py``): the predicates, whose output is
    bool for every input dtype (rule ``bool``), with the comparison operators; and the control
    flow, which returns what the functions it was given returned (category ``control_flow``).

    Returns:
        ``(predicates, control_flow)``.

    >>> predicates, control_flow = no_conversion_ops()
    >>> "isfinite" in predicates and "lt" in predicates, "cond" in control_flow
    (True, True)
    """
    entries = catalog.ops(include_skipped=True)
    predicates = {e.name.rsplit(".", 1)[-1] for e in entries if e.rule == "bool"}
    control = {e.name.rsplit(".", 1)[-1] for e in entries if e.category == "control_flow"}
    return frozenset(predicates | COMPARISONS), frozenset(control)


def dtype_conversions(source: str, target: str) -> list[str]:
    out = []
    if dtypes.narrows(source, target):
        out.append("downcast")
    if (dtypes.is_integer(source) or source in ("bool", "python_bool")) and dtypes.is_float(target):
        out.append("int->float")
    if dtypes.is_float(source) and dtypes.is_integer(target):
        out.append("float->int")
    if dtypes.is_integer(source) and dtypes.is_integer(target):
        wide, narrow = dtypes.bits(source), dtypes.bits(target)
        if wide and narrow and narrow < wide:
            out.append("int-narrowing")
    return out


def _change(step: Step) -> dict[str, Any]:
    """What the step did to the dtype (cached: a loop repeats the same ops)."""
    return _change_of(
        step.op,
        tuple((e["dtype"], e.get("kind")) for e in step.inputs),
        tuple(o["dtype"] for o in step.outputs),
        step.cast_to,
        step.error is not None,
    )


@functools.lru_cache(maxsize=RECORDS_CACHED)
def _change_of(
    op: str,
    inputs: tuple[tuple[str, str | None], ...],
    outs: tuple[str, ...],
    cast_to: str | None,
    raised: bool,
) -> dict[str, Any]:
    """What the step did to the dtype, from the dtypes it saw and Keras's ``result_type``."""
    tensors = [dtype for dtype, kind in inputs if kind != "scalar"]
    args = tuple(dtype for dtype, _ in inputs)
    name = op.rsplit(".", 1)[-1]
    if not outs:
        return {"change": "none", "note": "raised" if raised else "no tensor output"}
    out = outs[0]
    if name in CAST_OPS and (cast_to or name == "_saturate_cast"):
        source = tensors[0] if tensors else (args[0] if args else "?")
        if source == out:
            return {"change": "noop-cast", "note": f"explicit cast (no-op, {out})"}
        return {
            "change": "cast",
            "conversions": tuple(dtype_conversions(source, out)),
            "note": f"explicit cast {source} -> {out}",
        }
    if not tensors:
        return {"change": "created", "note": f"created {out}"}
    predicates, control_flow = no_conversion_ops()
    bools = all(o == "bool" for o in outs)
    if name in predicates and bools and tensors != ["bool"] * len(tensors):  # by definition
        how = "compared" if name in COMPARISONS else f"predicate {name}:"
        return {"change": "predicate", "note": f"{how} {'/'.join(dict.fromkeys(args))} -> bool"}
    if name in control_flow:  # what its functions returned, not a conversion of its inputs
        said = "/".join(outs)
        return {"change": "control-flow", "note": f"control flow: returns its functions' {said}"}
    expected = result_type(args)
    fields: dict[str, Any] = {}
    if all(o == tensors[0] for o in outs) and all(t == tensors[0] for t in tensors):
        fields.update(change="kept", note=f"kept {out}")
    elif expected is not None and all(o == expected for o in outs) and len(set(args)) > 1:
        cell = ", ".join(args)
        fields.update(
            change="promoted",
            result_type_args=args,
            result_type=expected,
            note=f"promoted: result_type({cell}) = {expected}",
        )
    else:
        said = f" (result_type says {expected})" if expected and expected not in outs else ""
        fields.update(
            change="changed",
            result_type_args=args if expected else (),
            result_type=expected,
            note=f"{'/'.join(dict.fromkeys(tensors))} -> {'/'.join(outs)}{said}",
        )
    floats = [t for t in tensors if dtypes.is_float(t)]
    conversions: list[str] = []
    for o in dict.fromkeys(outs):
        if floats:
            widest = max(floats, key=lambda t: dtypes.bits(t) or 0)
            if dtypes.narrows(widest, o):
                conversions.append("downcast")
            if dtypes.is_integer(o):
                conversions.append("float->int")
        elif all(dtypes.is_integer(t) or t == "bool" for t in tensors) and dtypes.is_float(o):
            conversions.append("int->float")
    fields["conversions"] = tuple(dict.fromkeys(conversions))
    return fields
