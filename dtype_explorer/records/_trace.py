"""The op trace of one eager call: every op a layer ran, its dtypes, and the line that ran it.

``keras_run/trace/_op_trace.py`` records it by running Keras; these records hold it and the
facts derived from it (which step changed a dtype, which step first made inf/NaN, where two
backends' traces part), computed here once for every view.

>>> step = TraceStep(index=0, op="ops.multiply", inputs=(TraceTensor(dtype="bfloat16",
...     shape=(2, 3)), TraceTensor(dtype="float32", shape=())),
...     outputs=(TraceTensor(dtype="float32", shape=(2, 3)),), change="promoted",
...     result_type_args=("bfloat16", "float32"), result_type="float32")
>>> step.changes_dtype, step.signature()
(True, 'ops.multiply(bfloat16, float32) -> float32')
>>> TraceStep.from_json(step.to_json()) == step
True
>>> TraceStep(index=3, op="ops.exp", nonfinite=True, first_nonfinite=True).flags
(TraceFlag(kind='first-nonfinite', text='first inf/NaN from finite inputs'),)
"""

from __future__ import annotations

import difflib
import re
from typing import Literal

from pydantic import Field, computed_field

from dtype_explorer.records._base import ComputedRecord, Record
from dtype_explorer.records._exactness import CastLoss
from dtype_explorer.records._numerics import ValueFinding

#: What a step did to the dtype: ``kept`` it, ``promoted`` its inputs (``result_type``),
#: ``cast`` explicitly (``noop-cast`` when source and target agree), ``created`` a tensor from
#: no tensor input, ``changed`` it another way (not what ``result_type`` says), or ``none``
#: (no tensor output, or the op raised). Two kinds convert no value and are no dtype change:
#: ``predicate``, an op whose output is bool by definition (a comparison, ``isfinite``,
#: ``logical_and``: Keras states bool for every input dtype), and ``control-flow``, an op that
#: returns what the functions it was given returned (``cond``, ``while_loop``, ``scan``).
Change = Literal[
    "kept",
    "promoted",
    "cast",
    "noop-cast",
    "created",
    "changed",
    "predicate",
    "control-flow",
    "none",
]
#: The kind of a dtype change: float bits lost, int to float, float to int, int bits lost.
Conversion = Literal["downcast", "int->float", "float->int", "int-narrowing"]
Phase = Literal["build", "call"]
#: What a step's flag warns of: the call's first inf/NaN made from finite inputs, a later one,
#: a float16 output that left float16's range, or such an overflow in one of the ops the step
#: ran itself while its own output is finite (hidden by it), or values a cast or a variable
#: read lost (its ``losses``: integers rounded, overflow, wrap ...; worded by
#: :meth:`CastLoss.text`).
FlagKind = Literal[
    "first-nonfinite",
    "nonfinite",
    "float16-overflow",
    "hidden-overflow",
    "lost-values",
    "values-wrong",
]
#: Each flag's words, the same in the text, the cards and the widget's page (``lost-values``
#: adds the step's own counts).
FLAG_TEXT: dict[str, str] = {
    "first-nonfinite": "first inf/NaN from finite inputs",
    "nonfinite": "inf/NaN from finite inputs",
    "float16-overflow": "left float16's range",
    "hidden-overflow": "float16 overflow inside, hidden by this op",
    "lost-values": "lost values",
    "values-wrong": "values wrong against the same op in float32",
}


#: The ops that only gather values by index: inf/NaN out of one made from finite inputs (its
#: table and its indices) is no overflow (``TraceStep.flags``).
LOOKUP_OPS = frozenset({"ops.take", "ops.take_along_axis"})


#: The files IPython compiles a notebook cell's code into (``ipykernel_<pid>/<hash>.py``; older
#: IPython: ``<ipython-input-<n>-<hash>>``).
_NOTEBOOK_CELL = re.compile(r"(^|/)ipykernel_\d+/\d+\.py$|^<ipython-input-\d+-[0-9a-f]+>$")


class SourceLine(Record):
    """Where a step was called from: the first frame outside Keras's op and backend dispatch.

    ``url`` links the line in Keras's public repository at the installed version's tag when
    the file is part of Keras; user code has only its ``file`` and ``line``.
    """

    file: str
    line: int
    function: str = ""
    text: str = ""
    url: str | None = None

    @property
    def short(self) -> str:
        """``keras/src/layers/...py:348`` for Keras, ``notebook cell line 4`` for code a notebook
        cell defined (IPython names its file after the kernel's pid and the cell's hash, which
        change every run), the path as given for anything else.

        >>> SourceLine(file="/tmp/ipykernel_3144/794808103.py", line=4, function="f").short
        'notebook cell line 4'
        """
        marker = "/keras/src/"
        path = self.file.replace("\\", "/")
        if _NOTEBOOK_CELL.search(path):
            return f"notebook cell line {self.line}"
        if marker in path:
            path = "keras/src/" + path.split(marker, 1)[1]
        return f"{path}:{self.line}"


class TraceTensor(Record):
    """One tensor (or weak Python scalar) going into or out of a step.

    ``kind`` is ``tensor``, ``variable`` (a Keras variable; ``stored`` names its storage dtype
    when it reads as another under autocast) or ``scalar`` (a weak Python number).
    """

    name: str = ""
    dtype: str
    shape: tuple[int | None, ...] = ()
    kind: Literal["tensor", "variable", "scalar"] = "tensor"
    stored: str | None = None

    def text(self) -> str:
        if self.kind == "scalar":
            return f"python {self.dtype}"
        shape = "x".join("?" if d is None else str(d) for d in self.shape)
        var = " var" if self.kind == "variable" else ""
        return f"{self.dtype}[{shape}]{var}"


class TraceFlag(Record):
    """One warning on a trace step: its ``kind`` and its words (``text``), computed once on
    the record (``TraceStep.flags``) and laid out by every medium as it is."""

    kind: FlagKind
    text: str


class TraceStep(ComputedRecord):
    """One op of the call, as the calling code wrote it (``ops.cast``, ``backend.nn.conv``).

    ``change`` says what it did to the dtype and ``conversions`` how (bits lost, int to float,
    ...); for a promotion ``result_type_args``/``result_type`` give the ``result_type`` cell.
    ``nonfinite`` marks an output holding inf/NaN made from finite inputs, ``first_nonfinite``
    the first such step of the call, ``float16_overflow`` a float16 output that left
    float16's range (even when a later op hides it). ``children`` are the ops it ran itself,
    one level down. ``flags`` (computed, in the JSON) are the warnings every view shows.
    """

    index: int
    op: str
    phase: Phase = "call"
    inputs: tuple[TraceTensor, ...] = ()
    outputs: tuple[TraceTensor, ...] = ()
    cast_to: str | None = None
    change: Change = "none"
    conversions: tuple[Conversion, ...] = ()
    result_type_args: tuple[str, ...] = ()
    result_type: str | None = None
    note: str = ""
    nonfinite: bool = False
    first_nonfinite: bool = False
    float16_overflow: bool = False
    abstract: bool = False
    max_abs: float | None = None
    error: str | None = None
    source: SourceLine | None = None
    via: SourceLine | None = None
    #: The user's own line that caused the step (``dx.trace``/``%%dtype_trace`` only): the
    #: innermost frame of the user's code on the stack, a cell's line or the user's module's.
    user: SourceLine | None = None
    inside: str | None = None
    children: tuple[TraceStep, ...] = Field(default_factory=tuple)
    #: Where the step ran: the device of its first output (``"cpu"``, ``"cuda:0"``,
    #: ``"gpu:0"``), ``None`` when it has no tensor output or was not read.
    device: str | None = None
    #: The kernel path the backend took, where it tells: torch's int8 matmul
    #: (``"torch._int_mm"`` or ``"float fallback (...)"``), a step inside an XLA-compiled
    #: function (``"XLA (compiled by jax.jit)"``); ``None`` elsewhere.
    kernel: str | None = None
    #: What the step's dtype changes lost, measured on their own values: a cast's
    #: (``ops.cast``, ``convert_to_tensor(..., dtype=)``, an autocast's ``backend.cast``) input
    #: against its output, and each variable it read in another dtype (a float32 kernel read
    #: as float16 under a mixed policy) against the value held: integers that no longer
    #: round-trip, values that overflowed, wrapped ... Empty: it kept them, or its values were
    #: not read (symbolic, numerics off).
    losses: tuple[CastLoss, ...] = ()
    #: The first wrong number of a step computed in a 16-bit float, against its op run again
    #: on its inputs widened to float32 (``dx.trace`` only; ``None``: right, or not run).
    wrong: ValueFinding | None = None

    @property
    def changes_dtype(self) -> bool:
        """The step's output dtype is not its input's: a promotion, a real cast, a change."""
        return self.change in ("promoted", "cast", "changed") or bool(self.conversions)

    @property
    def lossy(self) -> bool:
        """Bits were lost: a float downcast, a float to int, or an int narrowing."""
        return any(c in ("downcast", "float->int", "int-narrowing") for c in self.conversions)

    @property
    def outcome(self) -> str:
        """The output dtype(s) (``float32``), ``raises RuntimeError``, or ``-``."""
        if self.error:
            return f"raises {self.error.split(':', 1)[0]}"
        return ", ".join(o.dtype for o in self.outputs) or "-"

    def signature(self) -> str:
        """``ops.nn.conv(uint8, float32) -> float32``: the op and its dtypes, nothing else."""
        ins = ", ".join(t.dtype for t in self.inputs)
        return f"{self.op}({ins}) -> {self.outcome}"

    def change_text(self) -> str:
        """What happened to the dtype, in words (``promoted: result_type(...) = float32``)."""
        return self.note or self.change

    def hidden_overflow(self) -> bool:
        """A child of this step left float16's range while this step's own output is finite."""
        return not self.nonfinite and any(c.float16_overflow for c in self.children)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def flags(self) -> tuple[TraceFlag, ...]:
        """The step's warnings, in order: its inf/NaN from finite inputs (the call's first, or a
        later one), a float16 overflow of its own, one hidden inside it. Text, cards and the
        widget's page all show these, worded as :data:`FLAG_TEXT` says."""
        kinds: list[FlagKind] = []
        if self.first_nonfinite:
            kinds.append("first-nonfinite")
        elif self.nonfinite:
            kinds.append("nonfinite")
        if self.float16_overflow:
            kinds.append("float16-overflow")
        if self.hidden_overflow():
            kinds.append("hidden-overflow")
        flags = [TraceFlag(kind=k, text=FLAG_TEXT[k] + self._why(k)) for k in kinds]
        if self.wrong is not None:
            text = f"{FLAG_TEXT['values-wrong']}: {self.wrong.text()}"
            flags.append(TraceFlag(kind="values-wrong", text=text))
        for loss in self.losses:
            read = {
                "variable-read": f"{loss.where}: ",
                "operand": f"{loss.where} converted inside the op: ",
                "creation": f"the values {loss.where} was asked for (made again in "
                f"{loss.source}): ",
            }.get(loss.step, "")
            flags.append(TraceFlag(kind="lost-values", text=f"lost values: {read}{loss.text()}"))
        return tuple(flags)

    def _why(self, kind: FlagKind) -> str:
        """What a flag's measurement implies of its cause, where the op alone says it: inf/NaN
        from finite inputs out of a lookup (``ops.take``), which computes nothing that could
        overflow, is an index beyond the axis, filled with NaN (jax's take does)."""
        if kind in ("first-nonfinite", "nonfinite") and self.op in LOOKUP_OPS:
            return ": a lookup computes nothing, so an index beyond the axis (filled with NaN)"
        return ""

    def read_overflow(self) -> CastLoss | None:
        """The first variable the step read in another dtype whose read overflowed (weights
        beyond float16's 65504 became inf): the read made the inf, not the op."""
        return next((x for x in self.losses if x.step == "variable-read" and x.overflowed), None)

    def flag_text(self) -> str:
        """The flags in one line (``first inf/NaN from finite inputs; left float16's range``),
        or ``""``."""
        return "; ".join(f.text for f in self.flags)


class TraceDivergence(ComputedRecord):
    """Where several backends' traces of one call part: the first step that differs.

    ``op`` is the op there; ``steps`` gives, per backend, the index of its step at that point
    (``None`` when that backend ran no such step) and ``outcomes`` what that step gave
    (``float32``, ``raises RuntimeError``, ``absent``).
    """

    op: str
    steps: dict[str, int | None] = Field(default_factory=dict)
    outcomes: dict[str, str] = Field(default_factory=dict)

    def text(self) -> str:
        said = ", ".join(f"{b}: {o}" for b, o in self.outcomes.items())
        return f"traces part at {self.op} ({said})"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def message(self) -> str:
        """Where the traces part, in a sentence (the widget's banner shows it as it is).

        >>> TraceDivergence(op="backend.convert_to_tensor", steps={"jax": 2, "numpy": None},
        ...     outcomes={"jax": "float32", "numpy": "absent"}).message
        "The backends' op traces first differ at backend.convert_to_tensor: on jax it gives \
float32; numpy does not call it at that point (its cast path shows how it converts)."
        """
        said = "; ".join(
            f"{b} does not call it at that point (its cast path shows how it converts)"
            if o == "absent"
            else f"on {b} it {o}"
            if o.startswith("raises")
            else f"on {b} it gives {o}"
            for b, o in self.outcomes.items()
        )
        return f"The backends' op traces first differ at {self.op}: {said}."


def call_steps(trace: tuple[TraceStep, ...]) -> list[TraceStep]:
    """The steps of the call itself (the layer's build left out)."""
    return [s for s in trace if s.phase == "call"]


def first_divergence(traces: dict[str, tuple[TraceStep, ...]]) -> TraceDivergence | None:
    """The first step where the call traces of several backends part, or ``None``.

    Steps are aligned by op name (``difflib``); two aligned steps part when their dtypes or
    outcomes differ. An op one backend ran and another did not parts them only when it
    changed a dtype or raised (a backend that skips a no-op conversion does not).
    """
    named = {b: call_steps(t) for b, t in traces.items() if t}
    if len(named) < 2:
        return None
    backends = list(named)
    ref = named[backends[0]]
    best: tuple[int, str, int] | None = None  # (position in ref, op, occurrence of op)
    for other in backends[1:]:
        found = _part(ref, named[other])
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    if best is None:
        return None
    _, op, occurrence = best
    steps: dict[str, int | None] = {}
    outcomes: dict[str, str] = {}
    for backend in backends:
        same = [s for s in named[backend] if s.op == op]
        step = same[occurrence] if occurrence < len(same) else None
        steps[backend] = step.index if step is not None else None
        outcomes[backend] = step.outcome if step is not None else "absent"
    return TraceDivergence(op=op, steps=steps, outcomes=outcomes)


def _key(step: TraceStep) -> tuple:
    return (step.op, tuple(t.dtype for t in step.inputs), step.outcome)


def _significant(step: TraceStep) -> bool:
    return step.changes_dtype or step.error is not None


def _occurrence(steps: list[TraceStep], step: TraceStep) -> int:
    return sum(1 for s in steps[: steps.index(step)] if s.op == step.op)


def _part(ref: list[TraceStep], other: list[TraceStep]) -> tuple[int, str, int] | None:
    """(position in ``ref``, op, which occurrence of that op) of the first difference."""
    matcher = difflib.SequenceMatcher(
        a=[s.op for s in ref], b=[s.op for s in other], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                if _key(ref[i1 + k]) != _key(other[j1 + k]):
                    return i1 + k, ref[i1 + k].op, _occurrence(ref, ref[i1 + k])
            continue
        mine = [s for s in ref[i1:i2] if _significant(s)]
        theirs = [s for s in other[j1:j2] if _significant(s)]
        if mine:
            return ref.index(mine[0]), mine[0].op, _occurrence(ref, mine[0])
        if theirs:
            return i1, theirs[0].op, _occurrence(other, theirs[0])
    return None
