"""The op trace's state, each in one object (as jax's ``TracingContext``): the process's
(:class:`Tracing`: the trace open on each thread, the wrappers and what they replace) and
one trace's (:class:`Trace`: its steps, where it is in the call, what it counted). The
wrappers that read and change them are ``_op_trace``'s.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from dtype_explorer.keras_run.trace import _bindings as bindings
from dtype_explorer.keras_run.trace import _operators as operators
from dtype_explorer.keras_run.trace import _records as records
from dtype_explorer.keras_run.trace import _values as values
from dtype_explorer.keras_run.trace._records import Step
from dtype_explorer.records import TraceStep

__all__ = ["MAX_STEPS", "Trace", "Tracing"]

#: A call running more ops than this keeps the first ones only (``Trace.dropped`` counts the
#: rest): an augmentation pipeline can run thousands, and every probe's JSON carries its trace.
MAX_STEPS = 300


class _Local(threading.local):
    """The trace open on each thread (``None`` where none is)."""

    trace: Trace | None = None


class Tracing:
    """The op trace's process state, in one place (as jax's ``TracingContext``): the trace
    open on each thread, how many traces are open, the bindings they replace (found again
    when modules were imported or a binding changed), and the wrappers made so far."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.local = _Local()
        #: Open traces, on every thread: the wrappers are in place while this is above 0.
        self.installed = 0
        #: Calls of wrapped ops on a thread with no trace open while a trace was open on
        #: another (``Trace.elsewhere``: a thread pool, tf.data's map functions).
        self.elsewhere = 0
        #: Whether the wrappers are in place now, and whether they stay between traces
        #: (:func:`keep_installed`: a worker's, where no user's kernel sees them).
        self.bound = False
        self.resident = False
        self.groups: list[bindings.Group] | None = None
        #: ``len(sys.modules)`` when ``groups`` were found, and when they were installed.
        self.modules_found = -1
        self.modules_at_install = 0
        #: ``(shown name, id(function)) -> wrapper``: one wrapper per function and name.
        self.wrappers: dict[tuple[str, int], Callable[..., Any]] = {}
        #: Modules already checked for wrappers bound while a trace was open.
        self.scanned: set[str] = set()
        #: The operators replaced on classes while a trace is open (``_operators``).
        self.class_patches: list[operators.Patch] = []

    @property
    def trace(self) -> Trace | None:
        """The trace open on this thread."""
        return self.local.trace

    @trace.setter
    def trace(self, trace: Trace | None) -> None:
        self.local.trace = trace


class Trace:
    """The steps recorded by one :func:`op_trace` (read them with :meth:`steps`)."""

    def __init__(
        self, *, children: bool, numerics: bool, own: bool, user: bool = False, limit: int = 0
    ):
        self.children = children
        self.numerics = numerics
        self.own = own
        #: Whether each step also names the user's own line that caused it (``TraceStep.user``).
        self.user = user
        #: The most steps kept (the rest counted in ``dropped``).
        self.limit = limit or MAX_STEPS
        self.raw: list[Step] = []
        self.level = 0
        self.top: Step | None = None
        self.busy = False
        self.first_nonfinite: Step | None = None
        self.dropped = 0
        self._values = values.Seen()
        #: Each variable read in another dtype, measured once (``_values``),
        #: and how many steps found a read that overflowed so far.
        self._reads: dict[tuple, tuple] = {}
        self.read_overflows = 0
        #: Read the values of a step when the trace closes, not when the step ends
        #: (``values.later``: jax, whose dispatch is asynchronous), and the steps waiting:
        #: ``(step, top, inner)``, in the order they ended.
        self.lazy = False
        self.pending: list[tuple[Step, bool, bool]] = []
        #: What the recorder's own reads run inside: torch's function modes switched off, so
        #: that reading a step's tensors does not pass through the trace's own mode.
        self.quiet: Callable[[], Any] = contextlib.nullcontext
        #: ``dx.trace``'s ``reference(op, fn, args, kwargs, out)`` (``values.against_reference``)
        self.reference: Callable[..., Any] | None = None
        self.unowned: list[Any] = []  # what Python numbers lost under no step (an op probe's)
        #: Wrapped ops called on other threads while this trace was open, which it does not
        #: record (it follows its own thread): set as it closes.
        self.elsewhere = 0
        #: Functions ``torch.compile`` compiled while this trace was open, whose ops ran in
        #: the compiled graph, not as steps (``_compiled``): set as it closes.
        self.compiled = 0

    def steps(self) -> tuple[TraceStep, ...]:
        """The recorded steps as records, in the order the ops started."""
        values.settle(self)
        return tuple(records.record(s, i) for i, s in enumerate(self.raw))

    def __len__(self) -> int:
        return len(self.raw)
