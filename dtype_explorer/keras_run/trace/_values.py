"""What the op trace reads of a step's values (eager steps only: a traced step is abstract):
the inf/NaN a step made from finite inputs, its float16 overflow, its largest magnitude, and
what its dtype changes lost (``step.losses``, ``records.CastLoss``): a cast's input against
its output, each variable it read in another dtype against the value held (a float32
kernel read as float16 under a mixed policy: weights beyond 65504 become inf), a Python
number an op converted, and the numbers a creation op was asked for against the 16-bit array
it made (``arange(3000, dtype="float16")`` holds 2048 where 2049 was asked). Each variable,
and each of the last tensors (:class:`Seen`), is looked at once, and each variable read
measured once per trace. On jax a step's values may be read a few steps after it ended
(:func:`later`, :func:`settle`), always in the order the steps ended.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from dtype_explorer import dtypes, float_bits
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run._exactness import cast_loss
from dtype_explorer.keras_run.trace._records import (
    CAST_OPS,
    Step,
    classes,
    dtype_conversions,
    dtype_name,
    read_outputs,
)
from dtype_explorer.records import CastLoss


def to_numpy(value: Any) -> np.ndarray | None:
    """Concrete values as NumPy, in their own dtype where NumPy or ``ml_dtypes`` has it
    (torch's bfloat16 read as its bits; its 8-bit floats widened to float32), or ``None`` if
    abstract or not read (``VALUE_LIMITS``: an OpenVINO tensor, whose read compiles its
    graph: each step's read made RandAugment's call take 230 s on openvino)."""
    try:
        variable, _ = classes()
        if isinstance(value, variable):
            value = value._value
        if type(value).__name__ == "OpenVINOKerasTensor":
            return None
        module = type(value).__module__
        if module.startswith("torch"):
            t = value.detach()
            if t.device.type == "meta":
                return None
            return _torch_numpy(t.cpu())
        if module.startswith("tensorflow"):
            if hasattr(value, "read_value"):  # a tf.Variable: its value now, read uncopied
                value = value.value()  # (read_value() adds an identity op: 2 ops a variable)
            if type(value).__name__ == "EagerTensor":
                return numpy_values(value)
            return value.numpy()  # (a sparse or ragged tensor is not made dense here)
        return np.asarray(value)
    except Exception:
        return None


def _torch_numpy(t: Any) -> np.ndarray:
    """A CPU torch tensor as NumPy: float16 as it is, bfloat16 through its bits (NumPy has
    no bfloat16; ``ml_dtypes`` does), 8-bit floats widened to float32."""
    import torch

    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(dtypes.ml_type("bfloat16"))
    if t.dtype.is_floating_point and t.dtype.itemsize < 2:
        return t.float().numpy()
    return t.numpy()


def _finite_flags(value: Any) -> tuple | None:
    """``(has_nan, has_inf, max |finite|)`` of a float tensor; ``None`` when abstract."""
    a = to_numpy(value)
    if a is None:
        return None
    kind = a.dtype.kind
    if not (kind in "fc" or "float" in a.dtype.name) or a.size == 0:
        return (False, False, None)
    if kind != "c":  # where every value is finite (most tensors): no temporary, no widening
        peak = float_bits.finite_peak(a)
        if peak is not None:
            return (False, False, peak)
    elif np.isfinite(a).all():
        return (False, False, float(np.abs(a).max()))
    a = float_bits.widened(a)
    finite = a[np.isfinite(a)]
    return (
        bool(np.isnan(a).any()),
        bool(np.isinf(a).any()),
        float(np.abs(finite).max()) if finite.size else None,
    )


#: How many values a trace remembers having looked at (``_flags``), and how many steps may
#: wait for their values to be read (a lazy trace, :func:`later`). Each is held alive
#: meanwhile: holding every value of a trace makes jax allocate afresh for each op (a loop of
#: 300 ops twice as slow), where the values of a few steps are enough to read each value once
#: as one step's output and the next one's input.
SEEN = 16
WAITING = 8


class Seen:
    """The values a trace has looked at, by ``id``, each held alive (its id is not reused
    meanwhile): every Keras variable (the model holds them anyway), and the last :data:`SEEN`
    tensors."""

    def __init__(self) -> None:
        self.tensors: collections.OrderedDict[int, tuple[Any, tuple | None]] = (
            collections.OrderedDict()
        )
        self.variables: dict[int, tuple[Any, tuple | None]] = {}

    def clear(self) -> None:
        self.tensors.clear()
        self.variables.clear()


def _flags(seen: Seen, value: Any) -> tuple | None:
    """``value``'s finite flags, each value looked at once while ``seen`` remembers it."""
    key = id(value)
    variable = isinstance(value, classes()[0])
    held = seen.variables if variable else seen.tensors
    hit = held.get(key)
    if hit is not None and hit[0] is value:
        return hit[1]
    flags = _finite_flags(value)
    held[key] = (value, flags)
    if not variable and len(held) > SEEN:
        seen.tensors.popitem(last=False)
    return flags


def look_at_values(
    seen: Seen,
    step: Step,
    reads: dict | None = None,
    inner: bool = False,
) -> None:
    """The step's inf/NaN made from finite inputs and float16 overflow, from its values, and
    what its casts and variable reads lost (``step.losses``). ``seen`` and ``reads`` are the
    trace's: each value is looked at, and each variable read measured, once per trace;
    ``inner``: a variable read by an op that ran inside this step overflowed (a layer's
    ``__call__`` step whose matmul read the kernel): that read made the inf, not this step."""
    in_bad = inner
    out_nan = out_inf = False
    max_abs = None
    for side, value in step.objects:
        flags = _flags(seen, value)
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
    objects, step.objects = step.objects, []
    if step.abstract:
        return
    read = _read_losses(step, objects, {} if reads is None else reads)
    in_bad |= any(r.overflowed for r in read)  # the read made the inf, not this op
    cast = _cast_loss(step, objects)
    # after the Python numbers its op converted (``operand_loss``, measured as it ran)
    step.losses = [*step.losses, *([cast] if cast is not None else []), *read]
    for child in step.children:  # the op the step ran read the same variable: said once
        child.losses = [x for x in child.losses if not any(x is r for r in read)]
    step.max_abs = max_abs
    float16_out = any(o["dtype"] == "float16" for o in step.outputs)
    step.nonfinite = (out_nan or out_inf) and not in_bad
    step.float16_overflow = out_inf and not in_bad and float16_out


#: The Python numbers whose conversion inside an op is measured (``bool`` is not one: the
#: wrapper compares types exactly).
NUMBERS = (int, float)


def operand_loss(trace: Any, step: Step | None, args: tuple, out: Any) -> None:
    """What converting a Python number (``args[0]`` of a conversion: ``convert_to_tensor``,
    ``cast``) to the tensor ``out`` lost, kept on ``step`` (the top-level step that ran the
    conversion, or the conversion itself where the user called it; ``None``: a call that is
    no step, an op probe's own, kept in ``trace.unowned``): torch's ``add(x, 1733500000.0)``
    makes the float a float32 tensor first (``floatx``), so a float64 ``x`` gets
    ``1733500032.0`` added. Measured on the values
    (``keras_run.cast_loss``, step ``operand``); an abstract or unread ``out`` says nothing."""
    if not args or type(args[0]) not in NUMBERS or not trace.numerics:
        return
    number = args[0]

    def measure() -> CastLoss | None:
        after = to_numpy(out)
        if after is None or after.shape != ():
            return None
        where = f"a Python {type(number).__name__}"
        return cast_loss(np.asarray(number), after, step="operand", where=where)

    loss = _measured(trace, measure)
    kept = trace.unowned if step is None else step.losses
    if loss is not None and loss not in kept:
        kept.append(loss)


#: The dtype a creation op is asked again in (:func:`creation_loss`): it holds every integer
#: up to 2**24 and float16's and bfloat16's range.
ASKED_IN = "float32"


@functools.cache
def creates(name: str) -> bool:
    """Whether the op ``name`` (``arange``) makes an array from Python numbers in the dtype
    its ``dtype=`` asks: the catalog's creation ops, less ``empty`` (whatever the memory held:
    no value was asked)."""
    found = catalog.find(f"ops.{name}")  # most names are no op of Keras's: no error made
    return name != "empty" and getattr(found, "probe", None) == "dtype_kwarg"


def creation_loss(trace: Any, step: Step, fn: Any, args: tuple, kwargs: dict, out: Any) -> None:
    """What a creation op (:func:`creates`) that made a 16-bit float array lost of the values
    it was asked for, kept on ``step`` (a top-level step only: a call the user's line, or a
    layer's ``call()`` in an audit, made): ``ops.arange(3000, dtype="float16")`` holds 2048
    where 2049 was asked, and every odd number above it is rounded. The op is run again with
    ``dtype=`` float32 (untraced; a ``dtype`` given by position, or an op that will not run
    again, says nothing) and its values measured against the step's (``keras_run.cast_loss``,
    step ``creation``)."""
    if not trace.numerics or step.error is not None or step.losses:
        return  # (a number the op converted already said what it lost: full's on tensorflow)
    if not any(o.get("dtype") in dtypes.HALF for o in step.outputs):
        return

    def measure() -> CastLoss | None:
        asked, made = to_numpy(fn(*args, **{**kwargs, "dtype": ASKED_IN})), to_numpy(out)
        if asked is None or made is None:
            return None
        return cast_loss(asked, made, step="creation", where=step.op)

    loss = _measured(trace, measure)
    if loss is not None and loss not in step.losses:
        step.losses.append(loss)


def _measured(trace: Any, measure: Callable[[], CastLoss | None]) -> CastLoss | None:
    """``measure()`` run as one of the recorder's own reads (the trace busy, its quiet mode
    on: nothing it calls is recorded); ``None`` where it raised (a value the trace cannot
    read, an op that will not run again): the step keeps what it has."""
    trace.busy = True
    try:
        with trace.quiet():
            return measure()
    except Exception:
        return None
    finally:
        trace.busy = False


def loss_kind(name: str) -> str | None:
    """What the trace measures after the op ``name`` ran: ``operand`` (a conversion: the
    Python number it converted), ``creation`` (:func:`creates`: the values asked), or
    ``None``."""
    return "operand" if name in CAST_OPS else "creation" if creates(name) else None


def measure_loss(
    kind: str, trace: Any, step: Step, top: bool, call: tuple[Any, tuple, dict], out: Any
) -> None:
    """:func:`operand_loss` or :func:`creation_loss` (``kind``, :func:`loss_kind`) of the step
    ``step`` that ran ``call`` (``fn, args, kwargs``) and returned ``out``; a conversion below
    a top-level step is kept on that step, a creation is measured on a top-level step only."""
    fn, args, kwargs = call
    if kind == "operand":
        operand_loss(trace, step if top else trace.top, args, out)
    elif top:
        creation_loss(trace, step, fn, args, kwargs, out)


def read_step(trace: Any, step: Step, out: Any, top: bool) -> None:
    """The step's outputs (``_records.read_outputs``), and its values looked at now or, on a
    lazy trace, queued (:func:`later`): a top-level step's, or a child's float16 output (it
    may leave float16's range inside its op)."""
    read_outputs(out, step)
    if top and step.rerun is not None:
        against_reference(trace, step, out)
    if trace.pending and step.op.startswith("Variable."):  # see ``later``
        settle(trace)
    look_now = top or any(o["dtype"] == "float16" for o in step.outputs)
    if trace.numerics and step.phase == "call" and look_now:
        inner = trace.read_overflows > step.reads_before
        if trace.lazy and later(trace._values, step):
            trace.pending.append((step, top, inner))
            if len(trace.pending) > WAITING:
                settle(trace)
            return
        settle(trace)  # the values of the steps before it first, in order
        look(trace, step, top, inner)
    else:
        step.objects = []


def against_reference(trace: Any, step: Step, out: Any) -> None:
    """The step's op run again by ``trace.reference`` (``dx.trace``'s: on its 16-bit float
    inputs widened, ``keras_run.code``), where the step computed in a 16-bit float: the first
    wrong number it finds kept as ``step.wrong``. A step that raised, or a reference that
    cannot run, says nothing."""
    fn_args, step.rerun = step.rerun, None
    halves = any(e.get("dtype") in dtypes.HALF for e in (*step.inputs, *step.outputs))
    if not halves or step.error is not None or step.phase != "call":
        return
    try:
        step.wrong = trace.reference(step.op, *fn_args, out)
    except Exception:  # the op would not run again: no reference, nothing said
        step.wrong = None


def look(trace: Any, step: Step, top: bool, inner: bool) -> None:
    """Look at ``step``'s values now (``look_at_values``), as the trace ``trace`` does for
    each step in the order the steps end: the variable reads that overflowed so far, and the
    first top-level step that made inf/NaN. A value the trace cannot read leaves the step
    its dtypes only."""
    trace.busy = True
    try:
        with trace.quiet():
            look_at_values(trace._values, step, trace._reads, inner)
    except Exception:
        step.objects = []
        step.abstract = True
    finally:
        trace.busy = False
    trace.read_overflows += any(x.step == "variable-read" and x.overflowed for x in step.losses)
    if top and step.nonfinite and trace.first_nonfinite is None and not step.abstract:
        trace.first_nonfinite = step
        step.first_nonfinite = True


def later(seen: Seen, step: Step) -> bool:
    """Whether ``step``'s values can be looked at later, when the trace closes (a lazy trace:
    jax's, whose arrays are immutable and whose dispatch is asynchronous: reading each step's
    output as it ends would wait for it, where jax goes on dispatching the next op).

    Not a step that reads a variable in another dtype (measured in the autocast scope the step
    runs in) or a cast that may lose values (its loss is measured on them): those are looked
    at now, after the steps waiting. The variables the step was given are looked at now
    (their values are ready, and a variable's value may be handed to a jitted function that
    donates it); a step that makes or assigns a variable first reads every step waiting (the
    value it stores may be donated so: the trace's wrapper settles them)."""
    if step.op.startswith("Variable.") or any("at" in entry for entry in step.inputs):
        return False
    if step.op.rsplit(".", 1)[-1] in CAST_OPS and len(step.inputs) == len(step.outputs) == 1:
        source, target = step.inputs[0]["dtype"], step.outputs[0]["dtype"]
        if source != target and dtype_conversions(source, target):
            return False
    variable, _ = classes()
    for _side, value in step.objects:
        if isinstance(value, variable):
            _flags(seen, value)
    return True


def settle(trace: Any) -> None:
    """Look at the values of every step of ``trace`` waiting (:func:`later`), in the order
    they ended."""
    pending = trace.pending
    while pending:
        waiting = list(pending)
        pending.clear()
        for step, top, inner in waiting:
            look(trace, step, top, inner)


def _read_losses(step: Step, objects: list[tuple[str, Any]], reads: dict) -> list:
    """What reading each variable input in another dtype lost (a float32 kernel read as float16
    under a mixed policy: weights beyond 65504 become inf, tiny ones zero): the variable's value
    with no autocast compared with Keras's own read of it (``variable.value``) in the autocast
    scope the step ran in. Each variable's read is measured once per trace (``reads``, by
    variable, value held and dtype read: an RNN reads its kernel at every step). Only eager
    steps get here: a traced step is abstract."""
    found = []
    for entry in step.inputs:
        if "at" not in entry:
            continue
        variable = objects[entry["at"]][1]
        source, target = entry["stored"], entry["dtype"]
        try:
            with _no_autocast():
                before = variable.value
            key = (id(variable), id(before), target)
            hit = reads.get(key)
            if hit is None or hit[0] is not variable or hit[1] is not before:
                loss = _read_loss(variable, before, source, target)
                hit = reads[key] = (variable, before, loss)
        except Exception:  # a variable the trace cannot read: the step keeps its other facts
            continue
        if hit[2] is not None:
            found.append(hit[2])
    return found


def _read_loss(variable: Any, before: Any, source: str, target: str) -> Any:
    """One variable's read in ``target`` measured against its ``source`` value: kept where
    weights overflowed to inf or underflowed to zero (the counts of every cause with it);
    ``None`` where none did, or the values cannot be read."""
    after = variable.value  # Keras's own read: cast by the autocast scope open now
    wide, narrow = to_numpy(before), to_numpy(after)
    if wide is None or narrow is None or dtype_name(after.dtype) != target:
        return None
    if not _overflow_or_underflow(wide, narrow):
        return None  # what is kept below (subnormal, rounding) is not measured for a read
    loss = cast_loss(
        wide, narrow, step="variable-read", where=f"variable {variable.name}",
        source=source, target=target,
    )  # fmt: skip
    # weights that only became subnormal keep their value to the dtype's precision: what any
    # float16 read of an ordinary initialisation does, not a loss to flag at every op
    return loss if loss is not None and (loss.overflowed or loss.underflowed) else None


def _overflow_or_underflow(wide: np.ndarray, narrow: np.ndarray) -> bool:
    """Whether reading ``wide`` as ``narrow`` made finite values inf or non-zero ones zero,
    screened by counts (no full comparison): more inf/NaN, or more zeros, after than before
    (a 16-bit ``narrow`` counted on its bits, ``float_bits.half_counts``; none counted where its
    bits' largest and smallest say every value is finite and none zero, as a kernel's are)."""
    if wide.shape != narrow.shape or not wide.size:
        return False
    magnitude = float_bits.half_magnitude(narrow)
    settled = magnitude is not None and magnitude.min() > 0
    if settled and float_bits.finite_peak(narrow, magnitude) is not None:
        return False  # no zero after, and no inf or NaN: nothing underflowed or overflowed
    counts = None if magnitude is None else float_bits.half_counts(narrow, magnitude)
    if counts is None:
        zeros, not_finite = np.count_nonzero(narrow == 0), np.count_nonzero(~np.isfinite(narrow))
    else:
        zeros, not_finite = counts.zeros, counts.not_finite
    if zeros > np.count_nonzero(wide == 0):
        return True
    return bool(not_finite) and not_finite > np.count_nonzero(~np.isfinite(wide))


@functools.cache
def _autocast_scope() -> type:
    from keras.src.backend.common.variables import AutocastScope

    return AutocastScope


def _no_autocast() -> Any:
    """A scope in which a variable reads as it is held (Keras's ``AutocastScope(None)``)."""
    return _autocast_scope()(None)


def _cast_loss(step: Step, objects: list[tuple[str, Any]]) -> Any:
    """What a cast or conversion step (one tensor in, one out: ``ops.cast``, a
    ``convert_to_tensor`` that narrows NumPy's int64 to int32 on jax ...) lost, measured on its own
    values (``keras_run.cast_loss``), or ``None``: a step that is no cast, a cast that cannot
    lose (int32 -> float64 ...), or values it kept."""
    if step.op.rsplit(".", 1)[-1] not in CAST_OPS:
        return None
    ins = [v for side, v in objects if side == "in"]
    outs = [v for side, v in objects if side == "out"]
    if len(ins) != 1 or len(outs) != 1 or len(step.inputs) != 1 or len(step.outputs) != 1:
        return None
    source, target = step.inputs[0]["dtype"], step.outputs[0]["dtype"]
    if source == target or not dtype_conversions(source, target):
        return None
    before, after = to_numpy(ins[0]), to_numpy(outs[0])
    if before is None or after is None:
        return None
    return cast_loss(
        before, after, step="cast", where=step.inputs[0]["name"], source=source, target=target
    )
