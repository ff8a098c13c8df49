"""``dx.trace``: the user's own function, or a ``with`` block, run as written with every dtype
step inside it recorded (``keras_run.code``), in the user's own process and backend.

The code runs as the user's: it may change the user's state as it would untraced (nothing is
put back but the trace's own wrappers), and nothing from it is cached. The trace does not
change what it computes: the value returned traced is bitwise the value returned untraced
(``tests/analyses/test_code.py``).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

from dtype_explorer.errors import InvalidSpecError, received
from dtype_explorer.keras_run import precision_set, preserved_keras_state
from dtype_explorer.keras_run.code import TracedRun, traced_run
from dtype_explorer.records import TraceResult


class TraceBlock:
    """What ``with dx.trace() as t:`` gives: ``t.result`` is the :class:`TraceResult` once the
    block is done (the steps up to a raise where it raised; the error goes on to the caller).
    ``t`` itself displays as its result and reads its fields (``t.steps``, ``t.to_json()``)."""

    def __init__(self, max_steps: int):
        self._run = TracedRun(what="with dx.trace()", kind="block", max_steps=max_steps)
        self.result: TraceResult | None = None

    def __enter__(self) -> TraceBlock:
        self._run.__enter__()
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        self._run.__exit__(kind, error, tb)
        self.result = self._run.result(error=error)
        return False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or self.__dict__.get("result") is None:
            raise AttributeError(f"{name!r}: the dx.trace() block has not finished yet")
        return getattr(self.result, name)

    def __str__(self) -> str:
        return str(self.result) if self.result is not None else "dx.trace(): still running"

    def _repr_html_(self) -> str | None:
        return self.result._repr_html_() if self.result is not None else None


def trace(fn: Any = None, /, *args: Any, **kwargs: Any) -> TraceResult | TraceBlock:
    """Run the user's own code once, as written, and record every dtype step inside it.

    ``dx.trace(fn, *args, **kwargs)`` calls ``fn(*args, **kwargs)``; ``with dx.trace() as t:``
    traces the block. The steps are every ``keras.ops`` call, every layer ``__call__``, the
    autocasts, variable creation and assignment, the optimizer's and loss scaling's ops, the
    NumPy-to-tensor conversions at Keras's boundary and the user's Python operators on
    Keras tensors, each with the user's line that caused it. Runs in this process, on the
    backend Keras imported, and caches nothing.

    Args:
        fn: the function to call (omit it for the ``with`` form).
        *args: its positional arguments, passed as given.
        **kwargs: its keyword arguments, passed as given; in the ``with`` form the only
            option, ``max_steps`` (the most steps kept, default 300).

    Returns:
        A :class:`TraceResult` (``.steps``, ``.returned``, ``.value``, ``.error``,
        ``.first_nonfinite_step()``, ``.lossy_steps()``, ``.dtype_changes()``, ``to_json()``;
        shown as a card in notebooks). Where ``fn`` raised, the result's ``error`` holds the
        user's own traceback and the steps up to the raise. The ``with`` form gives a
        :class:`TraceBlock`, whose ``result`` is set when the block ends.

    >>> import dtype_explorer as dx, keras, numpy as np
    >>> r = dx.trace(keras.ops.add, np.ones(2, "int8"), 1.5)
    >>> r.steps[0].op, r.returned_dtype
    ('ops.add', 'float32')
    >>> with dx.trace() as t:
    ...     y = keras.ops.cast(keras.ops.ones(2), "float16")
    >>> [s.op for s in t.steps]
    ['ops.ones', 'ops.cast']
    """
    if fn is None:
        return TraceBlock(_max_steps(kwargs))
    if not callable(fn):
        raise InvalidSpecError(
            f"dx.trace: fn must be a function (or omitted, for `with dx.trace() as t:`); "
            f"received: {received(fn)} ({type(fn).__name__})"
        )
    what = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    value, result = traced_run(fn, args, kwargs, what=str(what)[:80])
    return result.with_value(value)


def _max_steps(options: dict[str, Any]) -> int:
    unknown = sorted(set(options) - {"max_steps"})
    if unknown:
        raise InvalidSpecError(
            f"dx.trace(): the with form takes max_steps only; received: {received(unknown)}"
        )
    steps = options.get("max_steps", 0)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise InvalidSpecError(
            f"dx.trace(): max_steps must be an int >= 1; received: {received(steps)}"
        )
    return steps


class CellTimeout(BaseException):
    """The traced cell ran past its ``--timeout`` (a ``BaseException``, as
    ``KeyboardInterrupt`` is, so that the cell's own ``except Exception`` does not catch it)."""


def trace_compiled(
    body: Any,
    last: Any,
    namespace: dict[str, Any],
    *,
    source: str,
    cell_file: str,
    max_steps: int = 0,
    timeout: float | None = None,
    policy: str | None = None,
    floatx: str | None = None,
    precision: str | None = None,
) -> TraceResult:
    """Run a compiled cell in ``namespace`` with the trace on (``%%dtype_trace``'s work).

    Args:
        body: the cell's statements, compiled (``exec``); ``last``: its last expression
            compiled (``eval``), whose value is the cell's, or ``None``.
        last: see ``body``.
        namespace: the user's namespace (the cell's names are read and set there).
        source: the cell's text; ``cell_file``: the file name it was compiled under.
        cell_file: see ``source``.
        max_steps: the most steps kept (0: the op trace's own limit).
        timeout: seconds after which the cell is stopped (main thread only), or ``None``.
        policy: a global dtype policy set for the cell and put back afterwards.
        floatx: a ``floatx`` set for the cell and put back afterwards.
        precision: the float32 matmul precision (``records.PRECISIONS``: ``highest``,
            ``tf32``, ``default``) set on this backend for the cell and put back afterwards,
            as ``dx.probe(precision=...)`` sets it for a probe; ``None`` leaves it.

    Returns:
        The :class:`TraceResult`: ``status`` ``ok``, ``raised`` (the user's own error and
        traceback, the steps up to it), ``timeout`` or ``exited`` (``sys.exit()``).

    >>> ns = {"keras": __import__("keras")}
    >>> r = trace_compiled(compile("x = keras.ops.ones(2)", "<c>", "exec"),
    ...     compile("x * 2", "<c>", "eval"), ns, source="", cell_file="<c>")
    >>> r.status, r.returned_dtype
    ('ok', 'float32')
    """
    backend = _backend() if precision is not None else ""
    with _settings(policy, floatx), precision_set(precision, backend), _time_limit(timeout):
        result = _run_cell(body, last, namespace, source, cell_file, max_steps, timeout)
    if precision is None:
        return result
    env = result.environment.model_copy(update={"precision": precision})
    return result.model_copy(update={"environment": env})


def _run_cell(
    body: Any,
    last: Any,
    namespace: dict[str, Any],
    source: str,
    cell_file: str,
    max_steps: int,
    timeout: float | None,
) -> TraceResult:
    """The compiled cell run traced, each way it can end answered (``trace_compiled``)."""
    run = TracedRun(
        what="cell", kind="cell", max_steps=max_steps, source=source, cell_file=cell_file
    )
    try:
        with run:
            exec(body, namespace)
            value = eval(last, namespace) if last is not None else None
    except CellTimeout as error:
        return run.result(
            error=_said(error, f"the cell ran past --timeout {timeout} s and was stopped"),
            status="timeout",
        )
    except SystemExit as error:
        return run.result(
            error=_said(
                error,
                f"the cell called sys.exit({error.code!r}): stopped there, the process goes on",
            ),
            status="exited",
        )
    except BaseException as error:  # the user's own error, KeyboardInterrupt included
        return run.result(error=error)
    return run.result(value)


def _backend() -> str:
    import keras

    return keras.backend.backend()


def _said(error: BaseException, text: str) -> BaseException:
    error.args = (text,)
    return error


@contextlib.contextmanager
def _settings(policy: str | None, floatx: str | None) -> Iterator[None]:
    if policy is None and floatx is None:
        yield
        return
    import keras

    with preserved_keras_state():
        if floatx is not None:
            keras.config.set_floatx(floatx)
        if policy is not None:
            keras.config.set_dtype_policy(policy)
        yield


@contextlib.contextmanager
def _time_limit(timeout: float | None) -> Iterator[None]:
    if timeout is None:
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise CellTimeout(f"the cell ran past {timeout} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
