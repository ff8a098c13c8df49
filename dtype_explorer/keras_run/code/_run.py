"""One run of the user's code with the op trace on: ``TracedRun`` (a context manager around
any code) and ``traced_run`` (a function called with its arguments), each giving a
``TraceResult``. The collector is left as it is while the user's code runs: a
``gc.collect()`` in it frees what it frees untraced (``keras_run._heap`` is the audit's).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from typing import Any

from dtype_explorer.errors import strip_ansi
from dtype_explorer.keras_run.code._eager import running_eagerly
from dtype_explorer.keras_run.code._named import named_steps
from dtype_explorer.keras_run.code._reference import float32_reference
from dtype_explorer.keras_run.code._values import describe_returned, user_traceback
from dtype_explorer.keras_run.trace import op_trace, operator_limit, unwrapped
from dtype_explorer.records import CodeEnvironment, CodeError, CodeStatus, TraceResult

#: No value: the code raised, or a ``with`` block returns none.
_NOTHING = object()


def code_environment(where: str = "this process") -> CodeEnvironment:
    """Keras's version, the backend and its global dtype settings, as they are now.

    >>> code_environment().where
    'this process'
    """
    import keras

    return CodeEnvironment(
        keras=keras.__version__,
        backend=keras.backend.backend(),
        floatx=keras.config.floatx(),
        policy=keras.config.dtype_policy().name,
        where=where,
    )


def ended_environment(began: CodeEnvironment) -> CodeEnvironment:
    """``began`` (the environment as the code began) with Keras's floatx and policy now, as
    the code ended, where it set others.

    >>> env = code_environment()
    >>> ended_environment(env).floatx_after is None
    True
    """
    now = code_environment(began.where)
    update = {
        "floatx_after": now.floatx if now.floatx != began.floatx else None,
        "policy_after": now.policy if now.policy != began.policy else None,
    }
    return began.model_copy(update=update)


class TracedRun:
    """The op trace open around the user's code, with Keras's entry points as named steps
    (layer calls, variables made and assigned, optimizer steps: ``_named``) and the user's
    lines.

    ``with TracedRun(what="cell", kind="cell") as run: ...`` runs the block traced; then
    ``run.result(value)`` (or ``run.result(error=e)``) is its :class:`TraceResult`. An error
    raised by the block is not swallowed: it goes on to the caller, and the steps up to it
    are kept.
    """

    def __init__(
        self,
        *,
        what: str,
        kind: str,
        max_steps: int = 0,
        source: str = "",
        cell_file: str = "",
        where: str = "this process",
        own: bool = False,
    ):
        self.what, self.kind, self.max_steps = what, kind, max_steps
        self.source, self.cell_file, self.where = source, cell_file, where
        #: Record what dtype-explorer's own frame calls too: ``traced_run`` calls the user's
        #: function itself, which may be a Keras op (``dx.trace(keras.ops.add, ...)``).
        self.own = own
        self._stack = contextlib.ExitStack()
        self.trace: Any = None
        self.environment: CodeEnvironment | None = None

    def __enter__(self) -> TracedRun:
        self.environment = code_environment(self.where)
        with contextlib.ExitStack() as stack:
            stack.enter_context(named_steps())
            self.trace = stack.enter_context(
                op_trace(user=True, limit=self.max_steps, own=self.own, lazy=True)
            )
            self.trace.reference = float32_reference  # each 16-bit step against float32
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self._stack.__exit__(*exc)
        return False

    def result(
        self, value: Any = _NOTHING, *, error: BaseException | None = None, status: str = ""
    ) -> TraceResult:
        """The run's record: its steps, ``value`` described (not kept in the JSON), or the
        ``error`` the code raised with the user's own traceback."""
        steps = self.trace.steps() if self.trace is not None else ()
        said = status or ("ok" if error is None else "raised")
        problem = None
        if error is not None:
            problem = CodeError(
                type=type(error).__name__,
                message=_message(error),
                traceback=user_traceback(error),
            )
        env = ended_environment(self.environment or code_environment(self.where))
        elsewhere = self.trace.elsewhere if self.trace is not None else 0
        compiled = self.trace.compiled if self.trace is not None else 0
        notes = (
            operator_limit(env.backend),
            not_run_yet(value),
            _elsewhere_note(elsewhere),
            _compiled_note(compiled) or _unseen_note(len(steps), said),
        )
        result = TraceResult(
            what=self.what,
            kind=self.kind,  # type: ignore[arg-type]
            status=_status(said),
            steps=steps,
            dropped=self.trace.dropped if self.trace is not None else 0,
            max_steps=self.trace.limit if self.trace is not None else self.max_steps,
            returned=() if value is _NOTHING else describe_returned(value),
            error=problem,
            environment=env,
            source=self.source,
            cell_file=self.cell_file,
            note="; ".join(n for n in notes if n),
        )
        return result.with_value(None if value is _NOTHING else value)


def not_run_yet(value: Any) -> str:
    """What the trace says of a returned ``value`` whose code runs only later, after the trace
    closed (a generator's body as it is iterated, a coroutine's as it is awaited): none of it
    was traced; "" for any other value.

    >>> def numbers():
    ...     yield 1
    >>> not_run_yet(numbers()).startswith("the code returned a generator")
    True
    >>> not_run_yet(1)
    ''
    """
    if inspect.isgenerator(value) or inspect.isasyncgen(value):
        kind, runs = type(value).__name__.replace("_", " "), "as it is iterated"
        how = "trace what iterates it: dx.trace(lambda: list(fn(x)))"
    elif inspect.iscoroutine(value):
        kind, runs = "coroutine", "when it is awaited"
        how = "await it inside the code traced (with dx.trace(): await fn(x))"
    else:
        return ""
    return (
        f"the code returned a {kind}: its body runs only {runs}, after the trace closed, so "
        f"none of it was traced; {how}"
    )


def _elsewhere_note(calls: int) -> str:
    """What the trace says of Keras ops that ran on other threads while it was open.

    >>> _elsewhere_note(0)
    ''
    >>> _elsewhere_note(3).startswith("Keras ops were called 3 times on other threads")
    True
    """
    if not calls:
        return ""
    return (
        f"Keras ops were called {calls} times on other threads while the code ran (those an "
        "op calls inside counted too; a thread pool, tf.data's map functions): the trace "
        "follows the thread that runs the code, so none of them is a step"
    )


def _compiled_note(frames: int) -> str:
    """What the trace says where ``torch.compile`` compiled code while it was open: the ops
    inside ran in the compiled graph, not as steps (as ``jax.jit``'s and ``tf.function``'s
    do once compiled).

    >>> _compiled_note(0)
    ''
    >>> _compiled_note(2).startswith("torch.compile compiled 2 functions")
    True
    """
    if not frames:
        return ""
    what = "a function" if frames == 1 else f"{frames} functions"
    return (
        f"torch.compile compiled {what} while the code ran: the Keras ops inside run in the "
        "compiled graph, so none of them is a step (their Python runs once, as Dynamo reads "
        "it, and not again); dx.trace(..., eager=True) runs them op by op, each a step with "
        "its values"
    )


def _unseen_note(steps: int, said: str) -> str:
    """What the trace says where code ran to its end with no step it could see, outside
    ``eager=True``: a function a backend compiled runs its compiled graph after its first
    call, with no op to see (its ops may be none, too).

    >>> _unseen_note(0, "ok").startswith("no Keras op ran where the trace sees it")
    True
    >>> _unseen_note(3, "ok")
    ''
    """
    if steps or said != "ok" or running_eagerly():
        return ""
    return (
        "no Keras op ran where the trace sees it: a function compiled by jax.jit, "
        "tf.function or torch.compile (Keras's own predict and fit steps, keras-hub's "
        "generate()) runs its compiled graph after its first call, with no op to see; "
        "dx.trace(..., eager=True) runs it op by op"
    )


def _status(said: str) -> CodeStatus:
    return said if said in ("ok", "raised", "timeout", "exited") else "raised"  # type: ignore[return-value]


def _message(error: BaseException) -> str:
    try:
        text = strip_ansi(str(error)).strip()  # Keras's bold codes
    except Exception:
        text = ""
    return text.splitlines()[0][:300] if text else ""


def as_called(fn: Any) -> Any:
    """What to call for ``fn`` while a trace is open (ask inside it): a Keras op given as the
    function (``dx.trace(keras.ops.add, ...)``) was taken before the trace's wrappers were in
    place, so its wrapper, bound in its module now, is called; ``fn`` itself otherwise.

    >>> as_called(len) is len
    True
    """
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    bound = getattr(module, getattr(fn, "__name__", ""), None) if module is not None else None
    return bound if bound is not fn and bound is not None and unwrapped(bound) is fn else fn


def traced_run(
    fn: Any, args: tuple, kwargs: dict, *, what: str, max_steps: int = 0
) -> tuple[Any, TraceResult]:
    """``fn(*args, **kwargs)`` called once with the trace on.

    Args:
        fn: the user's function.
        args: its positional arguments, as given.
        kwargs: its keyword arguments, as given.
        what: its name in the result.
        max_steps: the most steps kept (0: the op trace's own limit).

    Returns:
        ``(value, result)``: what ``fn`` returned (``None`` where it raised) and the
        :class:`TraceResult` (its ``error`` set where ``fn`` raised an ``Exception``; a
        ``KeyboardInterrupt`` or ``SystemExit`` goes on to the caller).

    >>> import keras
    >>> value, result = traced_run(keras.ops.ones, ((2,),), {"dtype": "int8"}, what="ones")
    >>> result.steps[0].op, result.returned_dtype
    ('ops.ones', 'int8')
    """
    run = TracedRun(what=what, kind="function", max_steps=max_steps, own=True)
    try:
        with run:
            value = as_called(fn)(*args, **kwargs)
    except Exception as error:
        return None, run.result(error=error)
    return value, run.result(value)
