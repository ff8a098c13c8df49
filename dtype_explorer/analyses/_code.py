"""The user's own code run traced in this process (``keras_run.code``): a function
(:func:`trace_called`, ``dx.trace``'s) or a compiled cell (:func:`trace_compiled`,
``%%dtype_trace``'s), under the tool's own ``policy``/``floatx``/``precision``/``eager`` (set for
the run, put back after it) and ``timeout``, each way it can end answered (``ok``, ``raised``,
``timeout``, ``exited``). The public face, ``dx.trace``, is ``_code_api``; other backends'
workers, ``_code_backends``.

The code runs as the user's: it may change the user's state as it would untraced (nothing is
put back but the trace's own wrappers and the tool's own settings), and nothing from it is
cached. The trace does not change what it computes: the value returned traced is bitwise the
value returned untraced (``tests/analyses/test_code.py``).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

from dtype_explorer.keras_run import precision_set, preserved_keras_state
from dtype_explorer.keras_run.code import TracedRun, as_called, compiled_run_eagerly
from dtype_explorer.records import TraceResult


class CellTimeout(BaseException):
    """The traced cell (or function) ran past its ``--timeout`` (``timeout=``): a
    ``BaseException``, as ``KeyboardInterrupt`` is, so that the code's own ``except Exception``
    does not catch it."""


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
    eager: bool = False,
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
        eager: run the backend's compiled functions (``jax.jit``, ``tf.function``,
            ``torch.compile``) op by op for the cell, so that their steps are traced with
            values (``keras_run.code.compiled_run_eagerly``); put back afterwards.

    Returns:
        The :class:`TraceResult`: ``status`` ``ok``, ``raised`` (the user's own error and
        traceback, the steps up to it), ``timeout`` or ``exited`` (``sys.exit()``).

    >>> ns = {"keras": __import__("keras")}
    >>> r = trace_compiled(compile("x = keras.ops.ones(2)", "<c>", "exec"),
    ...     compile("x * 2", "<c>", "eval"), ns, source="", cell_file="<c>")
    >>> r.status, r.returned_dtype
    ('ok', 'float32')
    """
    run = TracedRun(
        what="cell", kind="cell", max_steps=max_steps, source=source, cell_file=cell_file
    )

    def cell() -> Any:
        exec(body, namespace)
        return eval(last, namespace) if last is not None else None

    return _traced(run, cell, timeout, policy, floatx, precision, eager)


def trace_called(
    fn: Any,
    args: tuple,
    kwargs: dict[str, Any],
    *,
    what: str,
    max_steps: int = 0,
    timeout: float | None = None,
    policy: str | None = None,
    floatx: str | None = None,
    precision: str | None = None,
    eager: bool = False,
) -> TraceResult:
    """``fn(*args, **kwargs)`` run traced (``dx.trace``'s work, here or in a worker).

    Args:
        fn: the user's function (a Keras op too: its trace wrapper is called).
        args: its positional arguments, as given.
        kwargs: its keyword arguments, as given.
        what: its name in the result.
        max_steps: the most steps kept (0: the op trace's own limit).
        timeout: seconds after which it is stopped (main thread only), or ``None``.
        policy: a global dtype policy set for the call and put back afterwards.
        floatx: a ``floatx`` set for the call and put back afterwards.
        precision: the float32 matmul precision set for the call and put back afterwards.
        eager: run the backend's compiled functions op by op for the call (as
            :func:`trace_compiled`'s).

    Returns:
        The :class:`TraceResult` (``value``: what ``fn`` returned, in this process), ended as
        :func:`trace_compiled`'s: ``ok``, ``raised``, ``timeout`` or ``exited``.

    >>> import keras
    >>> r = trace_called(keras.ops.ones, ((2,),), {"dtype": "int8"}, what="ones")
    >>> r.steps[0].op, r.returned_dtype, r.status
    ('ops.ones', 'int8', 'ok')
    """
    run = TracedRun(what=what, kind="function", max_steps=max_steps, own=True)
    work = lambda: as_called(fn)(*args, **kwargs)  # noqa: E731  (its wrapper, in the trace)
    return _traced(run, work, timeout, policy, floatx, precision, eager)


def _traced(
    run: TracedRun,
    work: Any,
    timeout: float | None,
    policy: str | None,
    floatx: str | None,
    precision: str | None,
    eager: bool,
) -> TraceResult:
    """``work()`` run inside ``run`` under the tool's settings and time limit; the result
    says the ``precision`` and ``eager`` set (:func:`settings_said`)."""
    with tool_settings(policy, floatx, precision, eager), _time_limit(timeout):
        result = _ended(run, work, timeout)
    return settings_said(result, precision, eager)


def settings_said(result: TraceResult, precision: str | None, eager: bool) -> TraceResult:
    """``result`` with the tool's ``precision`` and ``eager`` set for its run in its
    environment (``TracedRun`` reads the rest of it from Keras), its value kept."""
    if precision is None and not eager:
        return result
    env = result.environment.model_copy(update={"precision": precision, "eager": eager})
    return result.model_copy(update={"environment": env}).with_value(result.value)


def _ended(run: TracedRun, work: Any, timeout: float | None) -> TraceResult:
    """``work()`` run traced, each way it can end answered."""
    if run.kind == "cell":
        what, limit = "the cell", f"--timeout {timeout}"
    else:
        what, limit = "the function", f"timeout={timeout}"
    try:
        with run:
            value = work()
    except CellTimeout as error:
        return run.result(
            error=_said(error, f"{what} ran past {limit} s and was stopped"),
            status="timeout",
        )
    except SystemExit as error:
        return run.result(
            error=_said(
                error,
                f"{what} called sys.exit({error.code!r}): stopped there, the process goes on",
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
def tool_settings(
    policy: str | None, floatx: str | None, precision: str | None, eager: bool = False
) -> Iterator[None]:
    """The tool's own settings for traced code (``--policy``/``policy=``, ``floatx``, the
    float32 matmul ``precision`` of this process's backend, ``eager``: its compiled functions
    run op by op), set for the block and put back after it; ``None`` (``False``) leaves each
    as it is.

    >>> import keras
    >>> with tool_settings("mixed_float16", None, None):
    ...     print(keras.config.dtype_policy().name)
    mixed_float16
    >>> keras.config.dtype_policy().name
    'float32'
    """
    backend = _backend() if precision is not None or eager else ""
    with (
        _settings(policy, floatx),
        precision_set(precision, backend),
        compiled_run_eagerly(eager, backend),
    ):
        yield


@contextlib.contextmanager
def _settings(policy: str | None, floatx: str | None) -> Iterator[None]:
    if policy is None and floatx is None:
        yield
        return
    import keras

    with preserved_keras_state(seeds=False):  # the code's draws are the user's own
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
