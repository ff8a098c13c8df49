"""The op trace of an eager Keras call: every op it ran, with its dtypes and the line that ran it.

Mechanism: **module-attribute wrapping, for the duration of the call only** (a worker keeps
the wrappers in place between traces, :func:`keep_installed`: off, each is a passthrough).
Every public function of ``keras.src.ops`` (numpy, core, math, nn, linalg, image),
``keras.src.random`` and the active backend's modules (``keras.src.backend.<backend>.{core,
numpy, nn, ...}``) is found by identity, and every module-global name bound to one of them in a
loaded ``keras`` module (or a user module: ``from keras.ops import multiply`` made at import
time) is replaced by a thin wrapper while :func:`op_trace` is open, and put back when it
closes, also when the call raises.
Classes (``Layer.__call__`` included, which the audit patches) and layer instances (which
``_call_trace`` wraps) are never touched, so the three compose in any order.

Why this and not the alternatives: it sees the op *as the calling code wrote it*
(``ops.cast`` in ``batch_normalization.py``, ``backend.cast`` in ``dtype_policy.py``) on all
five backends alike, it observes concrete values (so inf/NaN can be traced to the op that made
them), and it costs one Python call per op. ``sys.setprofile`` sees the same calls at a cost
for every Python call (2x on MultiHeadAttention); jaxprs, torch dispatch modes and TF graphs
see the backend's primitives, not Keras's ops, and only on their own backend.

A wrapper records only on the thread that opened the trace, only concrete (non-symbolic)
calls, and only the *outermost* op: an op whose caller is Keras's op or backend dispatch is
nested and collapses into the step that called it (it is kept one level down, as a child). An
op called by layer or user code is a step of its own even while another op runs (an RNN's step
function runs inside ``backend.rnn``). Ops called by dtype-explorer's own code (the probe's
recorders, the audit) are not recorded.

The user's Python operators (``x * self.scale``, ``a + b``, ``x[0]``) are steps too, named as
the ``operator`` module names them (``operator.mul``), recorded through each framework's own
hook (``_operators``: a ``TorchFunctionMode`` on the tracing thread on torch, the
operators of ``tf.Tensor``, of jax's ``ArrayImpl`` and of Keras's ``Variable`` replaced on the
class while a trace is open). Only an operator called by user or layer code is recorded; what
the ops it runs do is one level down. On numpy they are not traced (``_operators.limit``).

This module puts the wrappers in place and keeps the process state (``_Tracing``, one
object); ``_bindings`` finds the bindings they replace, ``_frames`` where an op was called
from, ``_records`` an op's inputs and outputs (and builds the records), ``_values`` a step's
values (inf/NaN, what its casts and variable reads lost); ``_operators`` hooks the operators;
``_compiled`` steps aside while ``torch.compile`` traces.

>>> import keras
>>> layer = keras.layers.Dense(2)
>>> with op_trace() as trace:
...     _ = layer(keras.ops.ones((1, 3)))
>>> [s.op for s in trace.steps() if s.phase == "call"][-2:]
['ops.matmul', 'ops.add']
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dtype_explorer.keras_run.trace import _bindings as bindings
from dtype_explorer.keras_run.trace import _compiled as compiled
from dtype_explorer.keras_run.trace import _frames as frames
from dtype_explorer.keras_run.trace import _operators as operators
from dtype_explorer.keras_run.trace import _records as records
from dtype_explorer.keras_run.trace import _values as values
from dtype_explorer.keras_run.trace._bindings import (
    BACKEND_SUBMODULES,
    OPS_MODULES,
    PRIVATE_ALLOW,
    SKIP_NAMES,
    WRAPPER_MARK,
)
from dtype_explorer.keras_run.trace._records import CAST_OPS, DATA_PARAMS, Step
from dtype_explorer.keras_run.trace._state import MAX_STEPS, Trace, Tracing

__all__ = [
    "BACKEND_SUBMODULES",
    "CAST_OPS",
    "DATA_PARAMS",
    "MAX_STEPS",
    "OPS_MODULES",
    "PRIVATE_ALLOW",
    "SKIP_NAMES",
    "Trace",
    "op_trace",
    "operator_limit",
    "traced_callable",
    "untraced",
    "unwrapped",
    "wrapped_bindings",
    "wrapped_like",
]

_TRACING = Tracing()


# ------------------------------------------------------------------------------ public


@contextmanager
def op_trace(
    *,
    children: bool = True,
    numerics: bool = True,
    own: bool = False,
    user: bool = False,
    limit: int = 0,
    lazy: bool = False,
) -> Iterator[Trace]:
    """Record the ops of eager Keras calls made on this thread inside the ``with`` block.

    Args:
        children: also keep the ops each step ran itself, one level down.
        numerics: look at the values (inf/NaN made from finite inputs, float16 overflow).
        own: record ops called by dtype-explorer's own code too (an op probe's op).
        user: name on each step the user's own line that caused it (``TraceStep.user``: the
            innermost frame of the user's code on the stack, ``dx.trace``'s).
        limit: the most steps kept (0: :data:`MAX_STEPS`).
        lazy: on jax, read the steps' values when the trace closes (``_values.later``):
            reading them as each step ends waits for it, where jax would go on dispatching.

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
    trace = Trace(children=children, numerics=numerics, own=own, user=user, limit=limit)
    previous = _TRACING.trace
    install()
    mode = None
    backend = _backend()
    trace.lazy = lazy and backend == "jax"
    elsewhere = _TRACING.elsewhere
    frames = compiled.frames_compiled()
    try:
        if previous is None and backend == "torch":  # torch's modes are per thread
            mode = operators.torch_mode(call_operator)
            mode.__enter__()
            trace.quiet = operators.torch_quiet()
        _TRACING.trace = trace
        yield trace
    finally:
        values.settle(trace)
        trace.elsewhere = _TRACING.elsewhere - elsewhere
        trace.compiled = compiled.frames_compiled() - frames
        _TRACING.trace = previous
        if mode is not None:
            mode.__exit__(None, None, None)
        uninstall()
        trace._values.clear()
        trace._reads.clear()


def operator_limit(backend: str) -> str:
    """What the op trace leaves out on ``backend``, for the probe's trace note: of the user's
    Python operators (numpy), of the values (openvino); "" where it records them all.

    >>> operator_limit("numpy").startswith("operators on NumPy arrays")
    True
    """
    said = (operators.limit(backend), records.VALUE_LIMITS.get(backend, ""))
    return "; ".join(s for s in said if s)


@contextmanager
def untraced() -> Iterator[None]:
    """Nothing run inside is recorded by the op trace open on this thread: dtype-explorer's
    own work inside a traced call (giving a layer's weights the same values everywhere)."""
    trace = _TRACING.trace
    if trace is None or trace.busy:
        yield
        return
    trace.busy = True
    try:
        yield
    finally:
        trace.busy = False


def traced_callable(fn: Any, shown: str) -> Callable[..., Any]:
    """``fn`` wrapped as the op trace wraps an op, named ``shown`` in the trace: a step of its
    own where user or layer code calls it while a trace is open, ``fn`` itself otherwise
    (``dx.trace`` makes a layer's ``__call__`` a step this way).

    >>> import keras
    >>> add = traced_callable(keras.ops.add, "my.add")
    >>> with op_trace() as trace:
    ...     _ = add(1.0, 2.0)
    >>> trace.steps()[0].op
    'my.add'
    """
    return _make_wrapper(fn, shown)


def unwrapped(fn: Any) -> Any:
    """The function the op trace's wrapper ``fn`` wraps (``fn`` itself where it is none):
    what dtype-explorer's own patches of Keras's functions wrap, so that a worker whose
    wrappers stay in place (:func:`keep_installed`) patches the same function as one whose
    wrappers come and go.

    >>> import keras
    >>> unwrapped(keras.ops.add) is keras.ops.add
    True
    """
    return fn.__wrapped__ if getattr(fn, WRAPPER_MARK, None) is not None else fn


def wrapped_like(binding: Any, fn: Any) -> Any:
    """``fn``, to be bound where ``binding`` is bound now: wrapped as the op trace wraps
    ``binding`` (the same name in the trace) where ``binding`` is the trace's wrapper, so that
    a patch made while the wrappers are in place is traced as it is when the trace opens after
    it (its wrapper is then found in the patched module); else ``fn`` itself.

    >>> import keras
    >>> wrapped_like(keras.ops.add, len) is len
    True
    """
    shown = getattr(binding, WRAPPER_MARK, None)
    return fn if shown is None else _make_wrapper(fn, shown)


def wrapped_bindings() -> dict[tuple[str, str], int]:
    """``{(module, name): id(value)}`` of every binding a trace replaces while it is open."""
    if _TRACING.groups is None:
        with op_trace():
            pass
    names = {id(vars(m)): n for n, m in list(sys.modules.items()) if m is not None}
    out = {}
    for group in _TRACING.groups or ():
        for key in group.wrapped:
            out[(names.get(id(group.namespace), "?"), key)] = id(group.namespace.get(key))
    return out


# --------------------------------------------------------------------------- installing


def _backend() -> str:
    from keras.src.backend import backend

    return backend()


def install() -> None:
    """One more user of the wrappers (a trace, ``_in_place.in_place``): put in place at the
    first."""
    state = _TRACING
    with state.lock:
        if state.installed == 0 and not (state.bound and _still_bound(state)):
            _bind(state)
        state.installed += 1


def uninstall() -> None:
    """One user fewer: the originals put back after the last, unless kept resident."""
    state = _TRACING
    with state.lock:
        state.installed -= 1
        if state.installed == 0 and not state.resident:
            _unbind(state)


def resident(on: bool) -> None:
    """Keep the wrappers in place between traces (``on``), or not (``_in_place.keep_installed``
    says when each is right)."""
    state = _TRACING
    with state.lock:
        state.resident = on
        if on and not (state.bound and _still_bound(state)):
            _bind(state)
        elif not on and state.installed == 0 and state.bound:
            _unbind(state)


def _still_bound(state: Tracing) -> bool:
    """Whether the wrappers in place still cover every binding: no module imported since they
    were put in place, and the first binding of each namespace and class still the wrapper
    (a worker's restore of the user's changes, or a user, may have re-bound them)."""
    if len(sys.modules) != state.modules_at_install:
        return False
    for group in state.groups or ():
        key = next(iter(group.wrapped))
        if group.namespace.get(key) is not group.wrapped[key]:
            return False
    return all(vars(p.cls).get(p.dunder) is p.wrapper for p in state.class_patches)


def _bind(state: Tracing) -> None:
    """Put the wrappers in place (found again when modules were imported or a binding
    changed); wrappers already in place are first put back."""
    if state.bound:
        _unbind(state)
    groups = state.groups
    fresh = groups is not None and state.modules_found == len(sys.modules)
    if not fresh or not all(bindings.holds(g.namespace, g.getter, g.originals) for g in groups):
        groups = state.groups = bindings.group(bindings.discover(state.wrappers, _make_wrapper))
        state.modules_found = len(sys.modules)
    for group in groups:
        group.namespace.update(group.wrapped)
    state.modules_at_install = len(sys.modules)
    state.class_patches = operators.patch(_backend(), call_operator)
    state.bound = True


def _unbind(state: Tracing) -> None:
    """Put every original back (where someone re-bound one since, leave theirs)."""
    state.bound = False
    operators.unpatch(state.class_patches)
    state.class_patches = []
    for group in state.groups or ():
        d = group.namespace
        if bindings.holds(d, group.getter, group.wrappers):
            d.update(group.unwrapped)
            continue
        for key, original in group.unwrapped.items():  # someone re-bound one: leave theirs
            if d.get(key) is group.wrapped[key]:
                d[key] = original
    if len(sys.modules) != state.modules_at_install:
        bindings.unbind_from_new_modules(state.wrappers, state.scanned)


# ----------------------------------------------------------------------------- wrapper


def _make_wrapper(fn: Any, shown: str) -> Callable[..., Any]:
    """The wrapper of ``fn`` (named ``shown`` in the trace): a step for each outermost
    concrete call on the thread that opened the trace, a child one level below it."""
    getframe = sys._getframe
    classify = frames.classify
    state = _TRACING
    local = state.local  # off (no trace on this thread): one attribute read, then the op
    measured = values.loss_kind(shown.rsplit(".", 1)[-1])  # what a conversion, a creation lost
    compiling = compiled.compiler_tracing(_backend())

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if compiling is not None and compiling():  # torch.compile tracing: the op alone
            return fn(*args, **kwargs)
        trace = local.trace
        if trace is None or trace.busy:
            if trace is None and state.installed:  # a trace is open on another thread
                state.elsewhere += 1
            return fn(*args, **kwargs)
        # 1. Who called: the first frame that is not the trace's own or a framework's.
        frame = getframe(1)
        while True:
            kind = classify(frame.f_code.co_filename)
            if kind != frames.TRANSPARENT or frame.f_back is None:
                break
            frame = frame.f_back
        top = trace.level == 0 or kind == frames.CALLER or (kind == frames.OWN and trace.own)
        # 2. Below a step (or a child): nested in what runs it, not recorded.
        if not top and (trace.level != 1 or not trace.children or trace.top is None):
            out = _below(trace, trace.level + 1, fn, args, kwargs)
            if measured == "operand":
                values.operand_loss(trace, trace.top, args, out)
            return out
        full = top and len(trace.raw) >= trace.limit and kind != frames.OWN
        if full:
            trace.dropped += 1
        own = kind == frames.OWN and not trace.own
        if top and (full or own or records.symbolic(args, kwargs)):
            return _unrecorded(trace, fn, args, kwargs)  # nothing below recorded
        # 3. The step: its inputs and where it was called from.
        step = _begin(trace, fn, shown, args, kwargs, frame, top)
        if step is None:
            return _unrecorded(trace, fn, args, kwargs)
        # 4. The call itself, with this step as the one that runs what it calls.
        (trace.raw if top else trace.top.children).append(step)
        out = _called(trace, step, top, fn, args, kwargs)
        # 5. Its outputs and, where they matter, their values.
        _finish(trace, step, out, top)
        if measured:
            values.measure_loss(measured, trace, step, top, (fn, args, kwargs), out)
        return out

    setattr(traced, WRAPPER_MARK, shown)
    return traced


def _called(trace: Any, step: Any, top: bool, fn: Any, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` with ``step`` as the one that runs what it calls (a top-level
    step becomes the trace's ``top``; its callees are recorded one level down); an error is
    kept on the step and raised on."""
    saved_level, saved_top = trace.level, trace.top
    trace.level = 1 if top else 2
    if top:
        trace.top = step
    try:
        return fn(*args, **kwargs)
    except BaseException as error:
        step.error = records.error_text(error)
        step.objects = []
        raise
    finally:
        trace.level, trace.top = saved_level, saved_top


def call_operator(fn: Any, shown: str, form: str, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)``, the Python operator ``shown`` (``operator.mul``), as a step
    when the trace on this thread is open and user or layer code called it (the hooks of
    ``_trace_operators`` call this); what it runs is one level down."""
    trace = _TRACING.trace
    if trace is None or trace.busy:
        return fn(*args, **kwargs)
    # 1. Who called: user or layer code, past the hook's own frames (else not recorded).
    frame = sys._getframe(1)
    plumbing = operators.plumbing_files()
    while frame.f_code.co_filename in plumbing and frame.f_back is not None:
        frame = frame.f_back
    if frames.classify(frame.f_code.co_filename) != frames.CALLER:
        return fn(*args, **kwargs)
    full = len(trace.raw) >= trace.limit
    if full or records.symbolic(args, kwargs):
        trace.dropped += full
        return _unrecorded(trace, fn, args, kwargs)
    # 2. The step: the operands as the user wrote them, and the user's line.
    step = _begin(
        trace, operators.SIGNATURES[form], shown, operators.as_written(form, args), {}, frame, True
    )
    if step is None:
        return _unrecorded(trace, fn, args, kwargs)
    # 3. The call, with this step as the one that runs the ops it calls.
    trace.raw.append(step)
    out = _called(trace, step, True, fn, args, kwargs)
    if out is NotImplemented:  # Python asks the other operand next: that is the step
        trace.raw.remove(step)
        return out
    # 4. Its outputs and values.
    _finish(trace, step, out, True)
    return out


def _below(trace: Trace, level: int, fn: Any, args: tuple, kwargs: dict) -> Any:
    """``fn`` called with the trace's level at ``level`` meanwhile (deeper: not recorded)."""
    saved = trace.level
    trace.level = level
    try:
        return fn(*args, **kwargs)
    finally:
        trace.level = saved


def _unrecorded(trace: Trace, fn: Any, args: tuple, kwargs: dict) -> Any:
    """A top-level call that is no step: nothing below it is recorded, and no step runs it
    (``trace.top`` is none meanwhile: what it converts is no earlier step's)."""
    saved = trace.top
    trace.top = None
    try:
        return _below(trace, trace.level + 2, fn, args, kwargs)
    finally:
        trace.top = saved


def _begin(
    trace: Trace, fn: Any, shown: str, args: tuple, kwargs: dict, frame: Any, top: bool
) -> Step | None:
    """A new step with its inputs and source; ``None`` where the trace cannot read them
    (never let the trace change what the call does)."""
    trace.busy = True
    try:
        with trace.quiet():
            return _new_step(trace, fn, shown, args, kwargs, frame, top)
    except Exception:
        return None
    finally:
        trace.busy = False


def _new_step(
    trace: Trace, fn: Any, shown: str, args: tuple, kwargs: dict, frame: Any, top: bool
) -> Step:
    step = Step(shown)
    step.reads_before = trace.read_overflows
    records.read_inputs(fn, args, kwargs, step)
    if top:
        step.inside = trace.top.op if trace.top is not None else None
        step.source, step.via, step.phase = frames.locate(frame)
        if trace.user:
            step.user = frames.user_source(frame)
        step.rerun = (fn, args, kwargs) if trace.reference is not None else None
    else:
        step.source = frames.source(frame)
        step.phase = trace.top.phase
    return step


def _finish(trace: Trace, step: Step, out: Any, top: bool) -> None:
    """The step's outputs; its values looked at where they can tell something: a step's,
    or a child's that may leave float16's range inside its op."""
    trace.busy = True
    try:
        with trace.quiet():
            values.read_step(trace, step, out, top)
    except Exception:  # a value the trace cannot read: the step keeps its dtypes only
        step.objects = []
        step.abstract = True
    finally:
        trace.busy = False
