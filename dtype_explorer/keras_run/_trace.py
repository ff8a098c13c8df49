"""The op trace of an eager Keras call: every op it ran, with its dtypes and the line that ran it.

Mechanism: **module-attribute wrapping, for the duration of the call only.** Every public
function of ``keras.src.ops`` (numpy, core, math, nn, linalg, image), ``keras.src.random`` and
the active backend's modules (``keras.src.backend.<backend>.{core, numpy, nn, ...}``) is found
by identity, and every module-global name bound to one of them in a loaded ``keras`` module (or
a user module: ``from keras.ops import multiply`` made at import time) is replaced by a thin
wrapper while :func:`op_trace` is open, and put back when it closes, also when the call raises.
Classes (``Layer.__call__`` included, which the audit patches) and layer instances (which
``_call_trace`` wraps) are never touched, so the three compose in any order.

Why this and not the alternatives: it sees the op *as the calling code wrote it*
(``ops.cast`` in ``batch_normalization.py``, ``backend.cast`` in ``dtype_policy.py``) on all
four backends alike, it observes concrete values (so inf/NaN can be traced to the op that made
them), and it costs one Python call per op. ``sys.setprofile`` sees the same calls at a cost
for every Python call (2x on MultiHeadAttention); jaxprs, torch dispatch modes and TF graphs
see the backend's primitives, not Keras's ops, and only on their own backend.

A wrapper records only on the thread that opened the trace, only concrete (non-symbolic)
calls, and only the *outermost* op: an op whose caller is Keras's op or backend dispatch is
nested and collapses into the step that called it (it is kept one level down, as a child). An
op called by layer or user code is a step of its own even while another op runs (an RNN's step
function runs inside ``backend.rnn``). Ops called by dtype-explorer's own code (the probe's
recorders, the audit) are not recorded.

>>> import keras
>>> layer = keras.layers.Dense(2)
>>> with op_trace() as trace:
...     _ = layer(keras.ops.ones((1, 3)))
>>> [s.op for s in trace.steps() if s.phase == "call"][-2:]
['ops.matmul', 'ops.add']
"""

from __future__ import annotations

import functools
import importlib
import inspect
import linecache
import operator
import os
import sys
import sysconfig
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.keras_run._placement import tensor_device
from dtype_explorer.records import SourceLine, TraceStep, TraceTensor

#: The ``keras.ops`` modules (and ``keras.random``) and how a user names their functions.
OPS_MODULES = {
    "keras.src.ops.numpy": "ops",
    "keras.src.ops.core": "ops",
    "keras.src.ops.math": "ops",
    "keras.src.ops.nn": "ops.nn",
    "keras.src.ops.linalg": "ops.linalg",
    "keras.src.ops.image": "ops.image",
    "keras.src.random.random": "random",
}
BACKEND_SUBMODULES = ("core", "numpy", "nn", "math", "linalg", "image", "random", "rnn")
#: Functions that take or return no tensors (metadata, scopes, decorators): not wrapped.
SKIP_NAMES = frozenset(
    {
        "shape", "dtype", "is_tensor", "convert_to_numpy", "name_scope", "device_scope",
        "compute_output_spec", "random_seed_dtype", "custom_gradient", "is_int_dtype",
        "is_float_dtype", "standardize_dtype", "cudnn_ok", "jax_draw_seed",
        "torch_seed_generator", "tf_draw_seed", "draw_seed", "make_default_seed", "get_device",
        "to_torch_dtype", "is_flash_attention_enabled", "device", "in_stateless_scope",
        "backend", "get_autocast_scope", "is_nnx_enabled",
    }
)  # fmt: skip
#: Private helpers layer code imports by name and calls.
PRIVATE_ALLOW = frozenset({"_saturate_cast"})
#: Ops that convert a dtype on purpose (when given a target dtype).
CAST_OPS = frozenset({"cast", "convert_to_tensor", "_saturate_cast", "astype"})
#: Parameters whose Python-scalar arguments take part in promotion (``ops.multiply(x, 2.0)``);
#: other scalars (``axis=1``, ``epsilon=1e-3``) do not.
DATA_PARAMS = frozenset(
    {
        "x", "x1", "x2", "y", "a", "b", "inputs", "value", "values", "tensor", "lhs", "rhs",
        "condition", "x_min", "x_max", "min", "max", "xs", "arrays", "input", "elements",
        "tensors", "other",
    }
)  # fmt: skip
#: A call running more ops than this keeps the first ones only (``Trace.dropped`` counts the
#: rest): an augmentation pipeline can run thousands, and every probe's JSON carries its trace.
MAX_STEPS = 300

_CALLER, _DISPATCH, _TRANSPARENT, _OWN = 0, 1, 2, 3
_HERE = os.path.abspath(__file__)
_PACKAGE = os.path.dirname(os.path.dirname(_HERE)) + os.sep
_LOCK = threading.RLock()
_TLS = threading.local()
_STATE: dict[str, Any] = {"installed": 0, "groups": None, "nmods": -1, "wrappers": {}}
_FILE_CLASS: dict[str, int] = {}
_FRAME_INFO: dict[tuple, SourceLine] = {}
_PARAMS: dict[Any, list[str]] = {}
_DTYPE_NAMES: dict[Any, str] = {}
_RESULT_TYPES: dict[tuple, str | None] = {}
_TYPE_KIND: dict[type, str | None] = {}
_CACHE: dict[str, Any] = {}
_TENSORS: dict[tuple, TraceTensor] = {}
_CHANGES: dict[tuple, dict[str, Any]] = {}


# ------------------------------------------------------------------------------ public


class Trace:
    """The steps recorded by one :func:`op_trace` (read them with :meth:`steps`)."""

    def __init__(self, *, children: bool, numerics: bool, own: bool):
        self.children = children
        self.numerics = numerics
        self.own = own
        self.raw: list[_Step] = []
        self.level = 0
        self.top: _Step | None = None
        self.busy = False
        self.first_nonfinite: _Step | None = None
        self.dropped = 0
        self._values: dict[int, tuple[Any, tuple | None]] = {}

    def steps(self) -> tuple[TraceStep, ...]:
        """The recorded steps as records, in the order the ops started."""
        return tuple(_record(s, i) for i, s in enumerate(self.raw))

    def __len__(self) -> int:
        return len(self.raw)


@contextmanager
def op_trace(*, children: bool = True, numerics: bool = True, own: bool = False) -> Iterator[Trace]:
    """Record the ops of eager Keras calls made on this thread inside the ``with`` block.

    Args:
        children: also keep the ops each step ran itself, one level down.
        numerics: look at the values (inf/NaN made from finite inputs, float16 overflow).
        own: record ops called by dtype-explorer's own code too (an op probe's op).

    Returns:
        A context manager yielding a :class:`Trace`; the wrappers are removed when it closes,
        also when the block raises.

    >>> import keras
    >>> with op_trace() as trace:
    ...     _ = keras.ops.add(keras.ops.ones((2,), dtype="int8"), 1.5)
    >>> [(s.op, s.note) for s in trace.steps()]  # doctest: +NORMALIZE_WHITESPACE
    [('ops.ones', 'created int8'),
     ('ops.add', 'promoted: result_type(int8, python_float) = float32')]
    """
    trace = Trace(children=children, numerics=numerics, own=own)
    previous = getattr(_TLS, "trace", None)
    _install()
    _TLS.trace = trace
    try:
        yield trace
    finally:
        _TLS.trace = previous
        _uninstall()
        trace._values.clear()


@contextmanager
def untraced() -> Iterator[None]:
    """Nothing run inside is recorded by the op trace open on this thread: dtype-explorer's
    own work inside a traced call (giving a layer's weights the same values everywhere)."""
    trace = getattr(_TLS, "trace", None)
    if trace is None or trace.busy:
        yield
        return
    trace.busy = True
    try:
        yield
    finally:
        trace.busy = False


def wrapped_bindings() -> dict[tuple[str, str], int]:
    """``{(module, name): id(value)}`` of every binding a trace replaces while it is open."""
    if _STATE["groups"] is None:
        with op_trace():
            pass
    names = {id(vars(m)): n for n, m in list(sys.modules.items()) if m is not None}
    out = {}
    for d, _getter, _origs, _wraps, wmap, _omap in _STATE["groups"]:
        for key in wmap:
            out[(names.get(id(d), "?"), key)] = id(d.get(key))
    return out


# --------------------------------------------------------------------------- installing


def _collect_targets() -> dict[int, tuple[Any, str]]:
    """``id(function) -> (function, the name a user reads)`` for every wrapped function."""
    import keras.src.ops
    import keras.src.random  # noqa: F401
    from keras.src.backend import backend as active

    modules = dict(OPS_MODULES)
    for sub in BACKEND_SUBMODULES:
        modules[f"keras.src.backend.{active()}.{sub}"] = f"backend.{sub}"
    targets = {}
    for name, shown in modules.items():
        module = sys.modules.get(name)
        if module is None:
            if name not in OPS_MODULES:
                continue
            module = importlib.import_module(name)
        for attr, fn in vars(module).items():
            if not isinstance(fn, types.FunctionType) or fn.__module__ != name:
                continue
            if (attr.startswith("_") and attr not in PRIVATE_ALLOW) or attr in SKIP_NAMES:
                continue
            targets[id(fn)] = (fn, f"{shown}.{attr}")
    return targets


def _user_module(module: Any) -> bool:
    """User code (not the standard library, not site-packages, not dtype-explorer)."""
    prefixes = _CACHE.get("sys_prefixes")
    if prefixes is None:
        paths = sysconfig.get_paths()
        keys = ("stdlib", "platstdlib", "purelib", "platlib")
        prefixes = tuple(os.path.abspath(paths[k]) + os.sep for k in keys if paths.get(k))
        _CACHE["sys_prefixes"] = prefixes
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return False
    path = os.path.abspath(file)
    return not path.startswith(prefixes) and not path.startswith(_PACKAGE)


def _discover() -> list[tuple[dict, str, Any, Any]]:
    targets = _collect_targets()
    patches = []
    for name, module in list(sys.modules.items()):
        if module is None:
            continue
        keras_or_main = name == "keras" or name.startswith("keras.") or name == "__main__"
        if not keras_or_main and (
            name.startswith(("dtype_explorer", "_pytest", "pytest")) or not _user_module(module)
        ):
            continue
        d = getattr(module, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for key, value in list(d.items()):
            hit = targets.get(id(value))
            if hit is None or hit[0] is not value:
                continue
            fn, shown = hit
            if name == "keras.src.backend":  # layer code writes backend.cast, backend.rnn
                shown = f"backend.{key}"
            wrapper = _STATE["wrappers"].get((shown, id(fn)))
            if wrapper is None:
                wrapper = _STATE["wrappers"][(shown, id(fn))] = _make_wrapper(fn, shown)
            patches.append((d, key, fn, wrapper))
    return patches


def _group(patches: list) -> list[tuple]:
    """Per module dict, so that installing and removing are one ``dict.update`` each."""
    by: dict[int, tuple[dict, list]] = {}
    for d, key, original, wrapper in patches:
        by.setdefault(id(d), (d, []))[1].append((key, original, wrapper))
    groups = []
    for d, items in by.values():
        keys = tuple(k for k, _, _ in items)
        origs = tuple(o for _, o, _ in items)
        wraps = tuple(w for _, _, w in items)
        getter = operator.itemgetter(*keys)
        if len(keys) == 1:
            getter = (lambda g: lambda m: (g(m),))(getter)
        groups.append((d, getter, origs, wraps, dict(zip(keys, wraps)), dict(zip(keys, origs))))
    return groups


def _holds(d: dict, getter: Callable, values: tuple) -> bool:
    try:
        current = getter(d)
    except KeyError:
        return False
    return all(map(operator.is_, current, values))


def _install() -> None:
    with _LOCK:
        if _STATE["installed"] == 0:
            groups = _STATE["groups"]
            fresh = groups is not None and _STATE["nmods"] == len(sys.modules)
            if not fresh or not all(_holds(g[0], g[1], g[2]) for g in groups):
                groups = _STATE["groups"] = _group(_discover())
                _STATE["nmods"] = len(sys.modules)
            for d, _getter, _origs, _wraps, wmap, _omap in groups:
                d.update(wmap)
            _STATE["modules_at_install"] = len(sys.modules)
        _STATE["installed"] += 1


def _uninstall() -> None:
    with _LOCK:
        _STATE["installed"] -= 1
        if _STATE["installed"] > 0:
            return
        for d, getter, _origs, wraps, wmap, omap in _STATE["groups"]:
            if _holds(d, getter, wraps):
                d.update(omap)
                continue
            for key, original in omap.items():  # someone re-bound one: leave theirs
                if d.get(key) is wmap[key]:
                    d[key] = original
        if len(sys.modules) != _STATE["modules_at_install"]:
            _unbind_from_new_modules()


def _unbind_from_new_modules() -> None:
    """A module imported while the trace was open may have bound a wrapper by name
    (``from keras.src.ops.numpy import add``): give it the original function back."""
    wrappers = {id(w): w for w in _STATE["wrappers"].values()}
    known = _STATE.setdefault("scanned", set())
    for name, module in list(sys.modules.items()):
        if name in known or module is None:
            continue
        known.add(name)
        d = getattr(module, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for key, value in list(d.items()):
            w = wrappers.get(id(value))
            if w is not None and w is value:
                d[key] = value.__wrapped__


# ------------------------------------------------------------------------------ frames


def _keras_src() -> str:
    path = _CACHE.get("keras_src")
    if path is None:
        import keras.src

        path = _CACHE["keras_src"] = os.path.dirname(os.path.abspath(keras.src.__file__)) + os.sep
    return path


_TRANSPARENT_PACKAGES = frozenset(
    {"jax", "jaxlib", "tensorflow", "torch", "numpy", "optree", "ml_dtypes", "tree", "absl"}
)


def _classify(filename: str) -> int:
    found = _FILE_CLASS.get(filename)
    if found is not None:
        return found
    kind = _CALLER
    if filename.startswith("<"):
        if filename.startswith(("<frozen", "<__array_function")):
            kind = _TRANSPARENT
    else:
        path = os.path.abspath(filename)
        keras_src = _keras_src()
        paths = sysconfig.get_paths()
        site = os.path.abspath(paths["purelib"]) + os.sep
        stdlib = os.path.abspath(paths["stdlib"]) + os.sep
        if path == _HERE:
            kind = _TRANSPARENT
        elif path.startswith(keras_src):
            rel = path[len(keras_src) :]
            if rel.startswith(("ops" + os.sep, "backend" + os.sep, "random" + os.sep)):
                kind = _DISPATCH
            elif rel.startswith("tree" + os.sep) or rel == os.path.join(
                "utils", "traceback_utils.py"
            ):
                kind = _TRANSPARENT
        elif path.startswith(_PACKAGE):
            kind = _OWN
        elif path.startswith(site):
            if path[len(site) :].split(os.sep, 1)[0] in _TRANSPARENT_PACKAGES:
                kind = _TRANSPARENT
        elif path.startswith(stdlib):
            kind = _TRANSPARENT
    _FILE_CLASS[filename] = kind
    return kind


def _source(frame: Any) -> SourceLine:
    code = frame.f_code
    key = (code, frame.f_lineno)
    found = _FRAME_INFO.get(key)
    if found is None:
        found = _FRAME_INFO[key] = _source_slow(code, frame.f_lineno)
    return found


def _source_slow(code: Any, line: int) -> SourceLine:
    file = code.co_filename
    url = None
    path = os.path.abspath(file)
    keras_src = _keras_src()
    if path.startswith(keras_src):
        import keras

        rel = path[len(keras_src) :].replace(os.sep, "/")
        url = (
            f"https://github.com/keras-team/keras/blob/v{keras.__version__}/keras/src/{rel}#L{line}"
        )
    return SourceLine(
        file=file,
        line=line,
        function=code.co_name,
        text=linecache.getline(file, line).strip(),
        url=url,
    )


def _locate(step: _Step, frame: Any) -> None:
    """The caller (first frame outside the dispatch), the layer or user frame it came through
    (``via``), and whether the layer was building."""
    keras_src = _keras_src()
    layers = keras_src + "layers" + os.sep
    caller = via = None
    first = frame
    build = False
    n = 0
    while frame is not None and n < 80:
        n += 1
        filename = frame.f_code.co_filename
        kind = _FILE_CLASS.get(filename)
        if kind is None:
            kind = _classify(filename)
        if kind == _OWN and caller is None:  # an op dtype-explorer called: its own line
            caller = first
            break
        if kind == _CALLER:
            user = not filename.startswith(keras_src) or filename.startswith(layers)
            if caller is None:
                caller = frame
                if user:
                    via = frame
            elif via is None and user:
                via = frame
            name = frame.f_code.co_name
            if name == "_maybe_build" and filename.startswith(layers):
                build = True
            elif name == "__call__" and filename.endswith(os.sep + "layer.py") and via:
                break
        frame = frame.f_back
    step.source = _source(caller) if caller is not None else None
    step.via = _source(via) if via is not None and via is not caller else None
    step.phase = "build" if build else "call"


# ----------------------------------------------------------------------------- values


def _dtype_name(dtype: Any) -> str:
    try:
        return _DTYPE_NAMES[dtype]
    except (KeyError, TypeError):
        pass
    from keras.src.backend.common.variables import standardize_dtype

    try:
        name = standardize_dtype(dtype)
    except Exception:
        name = str(dtype)
    with suppress(TypeError):
        _DTYPE_NAMES[dtype] = name
    return name


def _result_type(args: tuple) -> str | None:
    found = _RESULT_TYPES.get(args, "?")
    if found == "?":
        from keras.src.backend.common.dtypes import result_type

        weak = {"python_int": int, "python_float": float, "python_bool": bool}
        try:
            found = result_type(*(weak.get(a, a) for a in args))
        except Exception:
            found = None
        _RESULT_TYPES[args] = found
    return found


def _classes() -> tuple[type, type]:
    found = _CACHE.get("classes")
    if found is None:
        from keras.src.backend.common import variables
        from keras.src.backend.common.keras_tensor import KerasTensor

        # KerasVariable before Keras 3.7 (an engine's release)
        Variable = getattr(variables, "Variable", None) or variables.KerasVariable
        found = _CACHE["classes"] = (Variable, KerasTensor)
    return found


def _type_kind(t: type) -> str | None:
    """``scalar`` (exact Python number), ``variable``, ``tensor``, ``abstract`` (a tracer or a
    graph tensor), or ``None`` for anything else; cached per type."""
    found = _TYPE_KIND.get(t, "?")
    if found != "?":
        return found
    variable, keras_tensor = _classes()
    kind: str | None
    if t in (bool, int, float):
        kind = "scalar"
    elif issubclass(t, variable):
        kind = "variable"
    elif (
        issubclass(t, keras_tensor)
        or not (hasattr(t, "dtype") and hasattr(t, "shape"))
        or isinstance(getattr(t, "shape", None), types.BuiltinFunctionType)
    ):
        kind = None
    else:
        module = t.__module__ or ""
        abstract = "Tracer" in t.__name__ or "tracer" in module
        if module.startswith("tensorflow") and not hasattr(t, "numpy"):
            abstract = True
        kind = "abstract" if abstract else "tensor"
    _TYPE_KIND[t] = kind
    return kind


def _shape(value: Any) -> tuple:
    shape = value.shape
    if type(shape) is tuple:  # NumPy, JAX: already ints
        return shape
    try:
        return tuple(None if d is None else int(d) for d in shape)
    except Exception:
        return ()


def _to_numpy(value: Any) -> np.ndarray | None:
    """Concrete values as NumPy (16-bit and 8-bit floats widened), or ``None`` if abstract."""
    try:
        variable, _ = _classes()
        if isinstance(value, variable):
            value = value._value
        module = type(value).__module__
        if module.startswith("torch"):
            t = value.detach()
            if t.device.type == "meta":
                return None
            if t.dtype.is_floating_point and t.dtype.itemsize <= 2:
                t = t.float()
            return t.cpu().numpy()
        if module.startswith("tensorflow"):
            return value.numpy()
        return np.asarray(value)
    except Exception:
        return None


def _finite_flags(value: Any) -> tuple | None:
    """``(has_nan, has_inf, max |finite|)`` of a float tensor; ``None`` when abstract."""
    a = _to_numpy(value)
    if a is None:
        return None
    kind = a.dtype.kind
    if not (kind in "fc" or "float" in a.dtype.name) or a.size == 0:
        return (False, False, None)
    if kind not in "fc":
        a = a.astype(np.float32)
    if np.isfinite(a).all():
        return (False, False, float(np.abs(a).max()))
    finite = a[np.isfinite(a)]
    return (
        bool(np.isnan(a).any()),
        bool(np.isinf(a).any()),
        float(np.abs(finite).max()) if finite.size else None,
    )


def _param_names(fn: Any) -> list[str]:
    found = _PARAMS.get(fn)
    if found is None:
        try:
            found = [
                p.name
                for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):
            found = []
        _PARAMS[fn] = found
    return found


def _symbolic(args: tuple, kwargs: dict) -> bool:
    scope = _CACHE.get("in_symbolic_scope")
    if scope is None:
        try:
            from keras.src.backend.common.symbolic_scope import in_symbolic_scope
        except ImportError:  # Keras before 3.5 (an engine's release): KerasTensors tell

            def in_symbolic_scope() -> bool:
                return False

        scope = _CACHE["in_symbolic_scope"] = in_symbolic_scope
    if scope():
        return True
    _, keras_tensor = _classes()
    for a in (*args, *kwargs.values()):
        if isinstance(a, keras_tensor):
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(b, keras_tensor) for b in a):
            return True
    return False


# ---------------------------------------------------------------------------- recording


class _Step:
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
        "max_abs",
        "nonfinite",
        "objects",
        "op",
        "outputs",
        "phase",
        "source",
        "via",
        "weak",
    )  # fmt: skip

    def __init__(self, op: str):
        self.op = op
        self.inputs: list[dict] = []
        self.outputs: list[dict] = []
        self.objects: list[tuple[str, Any]] = []
        self.cast_to: str | None = None
        self.source = self.via = None
        self.phase = "call"
        self.inside: str | None = None
        self.children: list[_Step] = []
        self.error: str | None = None
        self.abstract = False
        self.nonfinite = self.first_nonfinite = self.float16_overflow = False
        self.max_abs: float | None = None
        self.weak = False
        self.device: str | None = None


def _describe(value: Any, name: str, step: _Step, side: str) -> dict | None:
    t = type(value)
    kind = _TYPE_KIND.get(t, "?")
    if kind == "?":
        kind = _type_kind(t)
    if kind is None:
        return None
    if kind == "scalar":
        return {"name": name, "dtype": f"python_{t.__name__}", "kind": "scalar"}
    if kind == "variable":
        stored = _dtype_name(value._dtype)
        read = _dtype_name(value.dtype)
        entry = {"name": name, "dtype": read, "shape": _shape(value), "kind": "variable"}
        if read != stored:
            entry["stored"] = stored
    else:
        entry = {"name": name, "dtype": _dtype_name(value.dtype), "shape": _shape(value)}
        if kind == "abstract":
            step.abstract = True
    step.objects.append((side, value))
    return entry


def _inputs(fn: Any, args: tuple, kwargs: dict, step: _Step) -> None:
    names = _param_names(fn)
    items = [(names[i] if i < len(names) else f"arg{i}", a) for i, a in enumerate(args)]
    items.extend(kwargs.items())
    for name, value in items:
        if name == "dtype":
            step.cast_to = None if value is None else _dtype_name(value)
            continue
        many = isinstance(value, (list, tuple)) and value and not isinstance(value[0], (int, float))
        values = value if many else (value,)
        for j, v in enumerate(values):
            entry = _describe(v, f"{name}[{j}]" if many else name, step, "in")
            if entry is None:
                continue
            if entry.get("kind") == "scalar" and name not in DATA_PARAMS:
                continue
            step.inputs.append(entry)


def _outputs(out: Any, step: _Step) -> None:
    values = out if isinstance(out, (list, tuple)) else (out,)
    flat: list[Any] = []
    for v in values:
        flat.extend(v) if isinstance(v, (list, tuple)) else flat.append(v)
    for j, v in enumerate(flat[:16]):
        entry = _describe(v, f"out{j}" if len(flat) > 1 else "out", step, "out")
        if entry is not None and entry.get("kind") != "scalar":
            step.outputs.append(entry)
            if step.device is None and not step.abstract:  # where the step ran
                step.device = tensor_device(v)


def _flags(trace: Trace, value: Any) -> tuple | None:
    key = id(value)
    hit = trace._values.get(key)
    if hit is not None and hit[0] is value:
        return hit[1]
    flags = _finite_flags(value)
    trace._values[key] = (value, flags)  # kept alive: its id is not reused meanwhile
    return flags


def _numerics(trace: Trace, step: _Step) -> None:
    in_bad = False
    out_nan = out_inf = False
    max_abs = None
    for side, value in step.objects:
        flags = _flags(trace, value)
        if flags is None:
            step.abstract = True
            continue
        if side == "in":
            in_bad |= flags[0] or flags[1]
        else:
            out_nan |= flags[0]
            out_inf |= flags[1]
            if flags[2] is not None:
                max_abs = flags[2] if max_abs is None else max(max_abs, flags[2])
    step.objects = []
    if step.abstract:
        return
    step.max_abs = max_abs
    float16_out = any(o["dtype"] == "float16" for o in step.outputs)
    step.nonfinite = (out_nan or out_inf) and not in_bad
    step.float16_overflow = out_inf and not in_bad and float16_out


def _make_wrapper(fn: Any, shown: str) -> Callable[..., Any]:
    getframe = sys._getframe
    classes = _FILE_CLASS

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        trace = getattr(_TLS, "trace", None)
        if trace is None or trace.busy:
            return fn(*args, **kwargs)
        frame = getframe(1)
        while True:
            filename = frame.f_code.co_filename
            kind = classes.get(filename)
            if kind is None:
                kind = _classify(filename)
            if kind != _TRANSPARENT or frame.f_back is None:
                break
            frame = frame.f_back
        top = trace.level == 0 or kind == _CALLER or (kind == _OWN and trace.own)
        if not top and (trace.level != 1 or not trace.children or trace.top is None):
            trace.level += 1
            try:
                return fn(*args, **kwargs)
            finally:
                trace.level -= 1
        full = top and len(trace.raw) >= MAX_STEPS and kind != _OWN
        if full:
            trace.dropped += 1
        if top and (full or (kind == _OWN and not trace.own) or _symbolic(args, kwargs)):
            saved = trace.level
            trace.level = saved + 2  # nothing below is recorded
            try:
                return fn(*args, **kwargs)
            finally:
                trace.level = saved
        trace.busy = True
        try:
            step = _Step(shown)
            _inputs(fn, args, kwargs, step)
            if top:
                step.inside = trace.top.op if trace.top is not None else None
                _locate(step, frame)
            else:
                step.source = _source(frame)
                step.phase = trace.top.phase
        except Exception:  # never let the trace change what the call does
            step = None
        finally:
            trace.busy = False
        if step is None:
            saved = trace.level
            trace.level = saved + 2
            try:
                return fn(*args, **kwargs)
            finally:
                trace.level = saved
        (trace.raw if top else trace.top.children).append(step)
        saved_level, saved_top = trace.level, trace.top
        trace.level = 1 if top else 2
        if top:
            trace.top = step
        try:
            out = fn(*args, **kwargs)
        except BaseException as error:
            step.error = _error_text(error)
            step.objects = []
            raise
        finally:
            trace.level, trace.top = saved_level, saved_top
        trace.busy = True
        try:
            _outputs(out, step)
            # a child's values matter only where it may leave float16's range inside its op
            look = top or any(o["dtype"] == "float16" for o in step.outputs)
            if trace.numerics and step.phase == "call" and look:
                _numerics(trace, step)
                if top and step.nonfinite and trace.first_nonfinite is None and not step.abstract:
                    trace.first_nonfinite = step
                    step.first_nonfinite = True
            else:
                step.objects = []
        except Exception:  # a value the trace cannot read: the step keeps its dtypes only
            step.objects = []
            step.abstract = True
        finally:
            trace.busy = False
        return out

    return traced


def _error_text(error: BaseException) -> str:
    try:
        lines = str(error).strip().splitlines()
    except Exception:
        lines = []
    return f"{type(error).__name__}: {lines[0][:300] if lines else ''}"


# --------------------------------------------------------------------------- to records


def _record(step: _Step, index: int) -> TraceStep:
    """The record of one step. Built without validation (:func:`_built`): every value was made
    here from Keras's own answers, and validating them costs a third of the trace."""
    fields = {"conversions": (), "result_type_args": (), "result_type": None, **_change(step)}
    return _built(
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
        inside=step.inside,
        children=tuple(_record(c, i) for i, c in enumerate(step.children)),
        device=step.device,
        kernel=None,
        **fields,
    )


def _tensor(entry: dict) -> TraceTensor:
    """One tensor's record; records are immutable, so equal ones are shared."""
    key = (
        entry.get("name", ""),
        entry["dtype"],
        entry.get("shape", ()),
        entry.get("kind", "tensor"),
        entry.get("stored"),
    )
    found = _TENSORS.get(key)
    if found is None:
        if len(_TENSORS) > 20000:
            _TENSORS.clear()
        found = _TENSORS[key] = _built(
            TraceTensor, name=key[0], dtype=key[1], shape=key[2], kind=key[3], stored=key[4]
        )
    return found


def _built(cls: type, **fields: Any) -> Any:
    """``cls(**fields)`` without validation, every field given: what ``model_construct`` does
    without its per-field default handling (a third of its cost)."""
    record = cls.__new__(cls)
    object.__setattr__(record, "__dict__", fields)
    object.__setattr__(record, "__pydantic_fields_set__", set(fields))
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record


def _conversions(source: str, target: str) -> list[str]:
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


def _change(step: _Step) -> dict[str, Any]:
    """What the step did to the dtype (cached: a loop repeats the same ops)."""
    key = (
        step.op,
        tuple((e["dtype"], e.get("kind")) for e in step.inputs),
        tuple(o["dtype"] for o in step.outputs),
        step.cast_to,
        step.error is not None,
    )
    found = _CHANGES.get(key)
    if found is None:
        if len(_CHANGES) > 20000:
            _CHANGES.clear()
        found = _CHANGES[key] = _change_of(step)
    return found


def _change_of(step: _Step) -> dict[str, Any]:
    """What the step did to the dtype, from the dtypes it saw and Keras's ``result_type``."""
    outs = [o["dtype"] for o in step.outputs]
    tensors = [e["dtype"] for e in step.inputs if e.get("kind") != "scalar"]
    args = tuple(e["dtype"] for e in step.inputs)
    name = step.op.rsplit(".", 1)[-1]
    if not outs:
        return {"change": "none", "note": "raised" if step.error else "no tensor output"}
    out = outs[0]
    if name in CAST_OPS and (step.cast_to or name == "_saturate_cast"):
        source = tensors[0] if tensors else (args[0] if args else "?")
        if source == out:
            return {"change": "noop-cast", "note": f"explicit cast (no-op, {out})"}
        return {
            "change": "cast",
            "conversions": tuple(_conversions(source, out)),
            "note": f"explicit cast {source} -> {out}",
        }
    if not tensors:
        return {"change": "created", "note": f"created {out}"}
    expected = _result_type(args)
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
