"""The trace of the user's own code (``dx.trace``, ``%%dtype_trace``): every dtype step inside a
function or a cell run as written, and the facts derived from it, computed here once for every
view (the first inf/NaN, the lossy steps, the dtype changes, the line of the user's code that
caused each step).

The steps are the op trace's own records (:class:`TraceStep`, ``keras_run/trace``): every
``keras.ops`` call, every layer's ``__call__``, the autocasts, variable creation and
assignment (``Variable.__init__``, ``Variable.assign``), the optimizer's step and loss scaling
(``SGD.apply``, ``LossScaleOptimizer.scale_loss``), the conversions of NumPy values at
Keras's boundary and the user's Python operators on Keras tensors, each with the user's line
(``TraceStep.user``). What the code returned is described, never kept: its type, dtype, shape
and a digest of its bytes (:class:`TracedValue`), so that two runs can be compared bitwise.

>>> step = TraceStep(index=0, op="ops.cast", inputs=(TraceTensor(dtype="float32",
...     shape=(2,)),), outputs=(TraceTensor(dtype="float16", shape=(2,)),), change="cast",
...     conversions=("downcast",), user=SourceLine(file="<cell>", line=2, text="y = f(x)"))
>>> r = TraceResult(what="f", kind="function", steps=(step,),
...     returned=(TracedValue(name="out", type="ndarray", dtype="float16", shape=(2,)),),
...     environment=CodeEnvironment(keras="3.12.0", backend="numpy"))
>>> [s.op for s in r.lossy_steps()], r.returned_dtype, r.line_of(step)
(['ops.cast'], 'float16', '<cell>:2')
>>> TraceResult.from_json(r.to_json()) == r
True
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import PrivateAttr

from dtype_explorer.records._base import Record
from dtype_explorer.records._trace import (
    SourceLine,
    TraceDivergence,
    TraceStep,
    TraceTensor,
    first_divergence,
)

#: How far two backends' values of one step may be apart and still agree: relative, absolute.
VALUE_RTOL, VALUE_ATOL = 1e-3, 1e-6

#: How the traced code ended: it returned, it raised (the user's own error), it ran past its
#: time limit, or it called ``sys.exit()``.
CodeStatus = Literal["ok", "raised", "timeout", "exited"]

__all__ = [
    "VALUE_ATOL",
    "VALUE_RTOL",
    "CodeComparison",
    "CodeEnvironment",
    "CodeError",
    "CodeStatus",
    "SourceLine",
    "TraceResult",
    "TraceTensor",
    "TracedValue",
]


class TracedValue(Record):
    """One value the code returned (or one leaf of a returned structure), described.

    ``dtype``/``shape`` are ``None`` for a value with no dtype (a string, a dict's key);
    ``digest`` is a SHA-256 of the value's dtype, shape and bytes (``None`` where it has none),
    equal for two runs exactly when their values are bitwise equal (a string's: its
    characters). ``text`` is a short repr; a string's is its exact repr (every space kept,
    control characters escaped), cut only past 400 characters.
    """

    name: str = "out"
    type: str
    dtype: str | None = None
    shape: tuple[int | None, ...] | None = None
    digest: str | None = None
    text: str = ""
    #: Its first values as floats (16 at most; ``None`` where it has none): compared across
    #: backends within a tolerance where the bytes differ.
    sample: tuple[float, ...] | None = None

    def describe(self) -> str:
        """``float32[2x3] (jaxlib ArrayImpl)`` or the value's repr when it has no dtype."""
        if self.dtype is None:
            return f"{self.text} ({self.type})"
        shape = "x".join("?" if d is None else str(d) for d in self.shape or ())
        return f"{self.dtype}[{shape}] ({self.type})"


class CodeEnvironment(Record):
    """Where the code ran: Keras's version, the backend, and its global dtype settings;
    ``engine`` the Keras release's engine it ran in (``--engine``; ``None``: the installed
    Keras), ``precision`` the float32 matmul precision set for it (``--precision``; ``None``:
    the backend's own, left as it was), ``eager`` whether the backend's compiled functions
    (``jax.jit``, ``tf.function``, ``torch.compile``) ran op by op for it (``--eager``).
    ``floatx``/``policy`` are Keras's as the code began; ``floatx_after``/``policy_after``
    those in effect when it ended, where the code set others (``None``: the same)."""

    keras: str
    backend: str
    floatx: str = "float32"
    policy: str = "float32"
    floatx_after: str | None = None
    policy_after: str | None = None
    where: str = "this process"
    engine: str | None = None
    precision: str | None = None
    eager: bool = False

    def settings_text(self) -> str:
        """Keras's floatx and policy, each with the one the code ended with where it set
        another.

        >>> CodeEnvironment(keras="3", backend="jax", floatx_after="bfloat16").settings_text()
        'floatx float32 -> bfloat16 (set by the code), policy float32'
        """
        said = []
        for name, began, ended in (
            ("floatx", self.floatx, self.floatx_after),
            ("policy", self.policy, self.policy_after),
        ):
            after = f" -> {ended} (set by the code)" if ended and ended != began else ""
            said.append(f"{name} {began}{after}")
        return ", ".join(said)

    def set_for_run(self) -> list[str]:
        """The tool's settings made for the run, in words, each a phrase of the meta line.

        >>> CodeEnvironment(keras="3", backend="jax", precision="tf32", eager=True).set_for_run()
        ['matmul precision tf32', 'compiled functions run eagerly']
        """
        said = [f"matmul precision {self.precision}"] if self.precision else []
        return said + (["compiled functions run eagerly"] if self.eager else [])


class CodeError(Record):
    """The error the user's code raised, with the user's own traceback (the tool's frames
    left out) or, for a time limit or ``sys.exit()``, what happened in words."""

    type: str
    message: str = ""
    traceback: str = ""

    def text(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


class TraceResult(Record):
    """The dtype steps of the user's own code, run as written once with the op trace on.

    ``kind`` says what ran (a ``function`` given to ``dx.trace``, a ``block`` of a ``with
    dx.trace()``, a notebook ``cell``); ``steps`` are the op trace's steps, ``dropped`` how many
    more ran past ``max_steps``; ``returned`` describes what the code returned (a cell: its
    last expression); ``error`` is what it raised, the steps up to the raise kept.
    """

    what: str
    kind: Literal["function", "block", "cell"]
    status: CodeStatus = "ok"
    steps: tuple[TraceStep, ...] = ()
    dropped: int = 0
    max_steps: int = 300
    returned: tuple[TracedValue, ...] = ()
    error: CodeError | None = None
    environment: CodeEnvironment
    source: str = ""
    #: The file name a cell was compiled under (its lines are shown as the cell's).
    cell_file: str = ""
    #: What the trace cannot see on this backend ("" where it sees everything).
    note: str = ""
    #: Keras's objects the code changed, put back after it in a user-code worker, each by its
    #: dotted name (``GLOBAL_CUSTOM_NAMES[...]``); the note says how many and the first few.
    put_back: tuple[str, ...] = ()
    _value: Any = PrivateAttr(default=None)

    @property
    def value(self) -> Any:
        """The value the code returned itself (in this process only; not in the JSON)."""
        return self._value

    def with_value(self, value: Any) -> TraceResult:
        """This record holding ``value`` as :attr:`value` (the record itself is unchanged)."""
        self._value = value
        return self

    @property
    def returned_dtype(self) -> str | None:
        """The dtype of what the code returned (its first leaf), or ``None``."""
        for v in self.returned:
            if v.dtype is not None:
                return v.dtype
        return None

    def first_nonfinite_step(self) -> TraceStep | None:
        """The first step that made inf/NaN from finite inputs, or ``None``."""
        return next((s for s in self.steps if s.first_nonfinite), None) or next(
            (s for s in self.steps if s.nonfinite), None
        )

    def lossy_steps(self) -> list[TraceStep]:
        """The narrowing steps, by dtype: a float downcast, a float to int, an int narrowing
        (each could lose values; what the values lost is :meth:`lost_steps`)."""
        return [s for s in self.steps if s.lossy]

    def lost_steps(self) -> list[TraceStep]:
        """The steps whose cast or variable read lost values, measured (``TraceStep.losses``:
        integers rounded, overflow, wrap ...), not only bits by dtype."""
        return [s for s in self.steps if s.losses]

    def wrong_steps(self) -> list[TraceStep]:
        """The steps computed in a 16-bit float whose numbers were wrong against the same op
        run again in float32 (``TraceStep.wrong``): damage that raised nothing."""
        return [s for s in self.steps if s.wrong is not None]

    def dtype_changes(self) -> list[TraceStep]:
        """The steps whose output dtype is not their input's (promotions, casts, changes)."""
        return [s for s in self.steps if s.changes_dtype]

    def user_line(self, step: TraceStep) -> SourceLine | None:
        """The user's line that caused ``step`` (the step's own line where it has none)."""
        return step.user or step.source

    def line_of(self, step: TraceStep) -> str:
        """``<cell>:3`` (the cell's line for a cell), ``file.py:12``, or ``""``."""
        src = self.user_line(step)
        if src is None:
            return ""
        if self.cell_file and src.file == self.cell_file:
            return f"cell line {src.line}"
        return src.short

    def headline(self) -> str:
        """The result in one sentence."""
        n = len(self.steps) + self.dropped
        ran = f"{self.what} on {self.environment.backend}: {n} step(s)"
        if self.status != "ok" and self.error is not None:
            return f"{ran}, then {self.error.text()}"
        out = self.returned_dtype
        changes = len(self.dtype_changes())
        said = f", {changes} dtype change(s)" if changes else ", no dtype change"
        narrowing = len(self.lossy_steps())  # by dtype; what was lost, measured, follows
        said += f", {narrowing} narrowing" if narrowing else ""
        lost = self.lost_steps()
        if lost:
            first, cause = lost[0], lost[0].losses[0].cause
            said += f", values lost at {len(lost)} step(s) (first: {first.op}, {cause})"
        wrong = self.wrong_steps()
        if wrong:
            said += f", values wrong at {len(wrong)} step(s) (first: {wrong[0].op})"
        return f"{ran}{said}; returned {out}" if out else f"{ran}{said}"


class CodeComparison(Record):
    """One cell's source (``%%dtype_trace --backend all``), or one function
    (``dx.trace(backend="all")(fn, ...)``), traced on several backends: each
    backend's :class:`TraceResult` side by side and where they first part, by dtype (the op
    traces aligned, :func:`first_divergence`; the user's line that caused that step named,
    :meth:`part_lines`) and then by value (each aligned step's largest magnitude, then what
    the cell returned, within :data:`VALUE_RTOL`/:data:`VALUE_ATOL`).
    """

    source: str
    results: dict[str, TraceResult]

    def dtype_part(self) -> TraceDivergence | None:
        """The first step whose dtypes or outcome differ between backends, or ``None``."""
        return first_divergence({b: r.steps for b, r in self.results.items()})

    def value_part(self) -> str | None:
        """Where the values first part, in words, once the dtypes agree (``None``: they
        agree everywhere the trace looked)."""
        if self.dtype_part() is not None or len(self.results) < 2:
            return None
        names = list(self.results)
        ref = self.results[names[0]]
        for other in names[1:]:
            said = _value_part(names[0], ref, other, self.results[other])
            if said:
                return said
        return None

    def part_steps(self) -> dict[str, TraceStep | None]:
        """Each backend's step where the backends first part by dtype (``None`` for a backend
        that runs no such step there); ``{}`` where they do not part by dtype."""
        part = self.dtype_part()
        if part is None:
            return {}
        out: dict[str, TraceStep | None] = {}
        for backend, result in self.results.items():
            index = part.steps.get(backend)
            out[backend] = next((s for s in result.steps if s.index == index), None)
        return out

    def part_lines(self) -> dict[str, str]:
        """The line of the user's code that caused the step where the backends first part by
        dtype, on each backend that ran that step (``{"jax": "cell line 2"}``); ``{}`` where
        they do not part by dtype or the step has no line of the user's."""
        return {
            backend: self.results[backend].line_of(step)
            for backend, step in self.part_steps().items()
            if step is not None and self.results[backend].line_of(step)
        }

    def part_text(self) -> str | None:
        """Where the backends first part by dtype, in a sentence that names the user's line
        that caused it and what each backend gives there (``None``: they do not part by
        dtype).

        The step is the first one, in order, whose dtypes or outcome differ between the
        backends' traces aligned by op (:func:`first_divergence`); a backend that runs no
        such step there is said to run none.
        """
        part = self.dtype_part()
        if part is None:
            return None
        steps = self.part_steps()
        lines = {self._line(b, s) for b, s in steps.items() if s is not None} - {None}
        said = "; ".join(
            self._absent(b, part.op, lines) if o == "absent"
            else f"on {b} it {o}" if o.startswith("raises")
            else f"on {b} it gives {o}"
            for b, o in part.outcomes.items()
        )  # fmt: skip
        return f"The backends first part by dtype at {part.op}{self._caused_by(steps)}: {said}."

    def _line(self, backend: str, step: TraceStep) -> tuple[str, int] | None:
        src = self.results[backend].user_line(step)
        return None if src is None else (src.file, src.line)

    def _absent(self, backend: str, op: str, lines: set) -> str:
        """What a backend that runs no ``op`` where the others part does on the same line."""
        same = [s for s in self.results[backend].steps if self._line(backend, s) in lines]
        if not lines:
            return f"{backend} runs no {op} there"
        if not same:
            return f"{backend} runs no Keras step on that line"
        ran = ", ".join(f"{s.op} -> {s.outcome}" for s in same[:3])
        return f"{backend} runs no {op} there (on that line: {ran})"

    def _caused_by(self, steps: dict[str, TraceStep | None]) -> str:
        """``, caused by cell line 2 (`z = f(y)`)``, per backend where their lines differ."""
        lines: dict[str, tuple[str, str]] = {}
        for backend, step in steps.items():
            result = self.results[backend]
            where = result.line_of(step) if step is not None else ""
            if where:
                src = result.user_line(step)  # type: ignore[arg-type]
                text = f" (`{src.text}`)" if src is not None and src.text else ""
                lines[backend] = (where, text)
        if not lines:
            return ""
        if len(set(lines.values())) == 1:
            where, text = next(iter(lines.values()))
            return f", caused by {where}{text}"
        return ", caused by " + "; ".join(f"{w}{t} on {b}" for b, (w, t) in lines.items())

    def _what(self) -> str:
        """``cell``, or ``function`` for ``dx.trace(backend=...)(fn)``'s comparison."""
        kinds = {r.kind for r in self.results.values()}
        return "function" if kinds == {"function"} else "cell"

    def statuses(self) -> dict[str, str]:
        """How the code ended on each backend (``ok``, ``raised``, ...)."""
        return {b: r.status for b, r in self.results.items()}

    def headline(self) -> str:
        """Where the backends part, or that they agree, in one sentence."""
        ended = self.statuses()
        if set(ended.values()) != {"ok"}:
            said = "; ".join(
                f"{b}: {r.status}" + (f" ({r.error.text()})" if r.error is not None else "")
                for b, r in self.results.items()
            )
            return f"The {self._what()} did not end normally everywhere: {said}."
        part = self.part_text()
        if part is not None:
            return part
        value = self.value_part()
        if value is not None:
            return value
        return f"The backends agree on every step's dtypes and values ({', '.join(ended)})."


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return True
    if a != a or b != b:  # NaN: agree only with NaN
        return a != a and b != b
    if a in (float("inf"), float("-inf")) or b in (float("inf"), float("-inf")):
        return a == b
    return abs(a - b) <= VALUE_ATOL + VALUE_RTOL * max(abs(a), abs(b))


def _value_part(name: str, ref: TraceResult, other_name: str, other: TraceResult) -> str:
    mine = [s for s in ref.steps if s.phase == "call"]
    theirs = [s for s in other.steps if s.phase == "call"]
    if [s.op for s in mine] == [s.op for s in theirs]:
        for a, b in zip(mine, theirs, strict=True):
            if not _close(a.max_abs, b.max_abs):
                return (
                    f"The values first part at #{a.index} {a.op} ({ref.line_of(a)}): largest "
                    f"magnitude {a.max_abs:g} on {name}, {b.max_abs:g} on {other_name}."
                )
    for x, y in zip(ref.returned, other.returned, strict=False):
        if x.digest == y.digest:
            continue
        if x.sample is None and y.sample is None:  # strings: equal only when exact
            differ = x.digest is not None and y.digest is not None
        elif x.sample is None or y.sample is None:
            continue
        else:
            differ = len(x.sample) != len(y.sample) or not all(map(_close, x.sample, y.sample))
        if differ:
            return (
                f"The values the {ref.kind} returned part ({x.name}: {x.text} on {name}, "
                f"{y.text} on {other_name})."
            )
    return ""
