"""``%%dtype_trace``'s work in the kernel: the options checked, the cell compiled as IPython
compiles it (its magics transformed, its lines cached so that tracebacks and the trace show
them, its last expression the cell's value), then run traced (``analyses.trace_compiled``), or
its source sent to other backends' user-code workers (``analyses.trace_on_backends``)."""

from __future__ import annotations

import ast
import threading
from typing import Any

from IPython.core.error import UsageError

from dtype_explorer.analyses import trace_compiled, trace_on_backends
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import check_precision, validate_policy
from dtype_explorer.records import CodeComparison, TraceResult, engine_spec
from dtype_explorer.runtime import engines, pool
from dtype_explorer.runtime.engines import EngineError


def trace_cell(shell: Any, cell: str, args: Any) -> TraceResult | CodeComparison | None:
    """Run ``cell`` traced in ``shell``'s namespace with the magic's ``args``.

    Args:
        shell: the IPython shell.
        cell: the cell's source.
        args: the parsed magic line (``backend``, ``engine``, ``policy``, ``floatx``,
            ``precision``, ``eager``, ``max_steps``, ``timeout``).

    Returns:
        The :class:`TraceResult` (in this kernel), the :class:`CodeComparison` (``--backend``
        naming other backends: each one's user-code worker; ``--engine`` with ``--backend``:
        that Keras release's user-code worker of each), the :class:`TraceResult` of the
        engine's worker on this kernel's backend (``--engine`` alone), or ``None`` for a
        syntax error (shown as IPython shows it).
    """
    backends, options = _checked(args)
    engine = _engine(args.engine)
    alone = engine is not None and backends is None  # this kernel's backend, in the engine
    if alone:
        import keras

        backends = [keras.backend.backend()]  # an engine never runs in this kernel
    try:
        body, last, filename = _compiled(shell, cell)
    except (SyntaxError, OverflowError, ValueError):  # what compile() raises on a bad cell
        shell.showsyntaxerror()
        return None
    if backends is not None:
        source = shell.transform_cell(cell)
        try:
            compared = trace_on_backends(source, shell.user_ns, backends, options, engine=engine)
        except EngineError as error:  # not created, and pip could not create it
            raise UsageError(f"%%dtype_trace --engine: {error}; {_created()}") from None
        except InvalidSpecError as error:
            raise UsageError(str(error)) from None
        return compared.results[backends[0]] if alone else compared
    try:
        return trace_compiled(body, last, shell.user_ns, source=cell, cell_file=filename, **options)
    except ValueError as error:  # --floatx or --policy refused by Keras before the cell ran
        raise UsageError(f"%%dtype_trace: {error}") from None


def _checked(args: Any) -> tuple[list[str] | None, dict[str, Any]]:
    """The backends' workers to run on (``None``: this kernel) and the run's options."""
    import keras

    backends = None
    if args.backend is not None and args.backend.strip() != keras.backend.backend():
        try:
            backends = pool.usable(args.backend.strip())
        except InvalidSpecError as error:
            raise UsageError(f"%%dtype_trace --backend: {error}") from None
    if args.max_steps < 0:
        raise UsageError(f"%%dtype_trace --max-steps: must be >= 1; received: {args.max_steps}")
    if args.timeout is not None:
        if not args.timeout > 0:
            raise UsageError(f"%%dtype_trace --timeout: must be > 0; received: {args.timeout}")
        if threading.current_thread() is not threading.main_thread():
            raise UsageError("%%dtype_trace --timeout: only in the kernel's main thread")
    policy = None
    if args.policy is not None:
        try:
            policy = validate_policy(args.policy)
        except InvalidSpecError as error:
            raise UsageError(f"%%dtype_trace --policy: {error}") from None
    try:
        precision = check_precision(args.precision)
    except InvalidSpecError as error:
        raise UsageError(f"%%dtype_trace --precision: {error}") from None
    return backends, {
        "max_steps": args.max_steps,
        "timeout": args.timeout,
        "policy": policy,
        "floatx": args.floatx,
        "precision": precision,
        "eager": bool(args.eager),
    }


def _engine(value: str | None) -> str | None:
    """``--engine``'s engine name (``records.engine_spec``), a Keras 3 release's; a form that
    names none is refused with the valid forms and the engines created here."""
    if value is None:
        return None
    try:
        engine = engine_spec(value)
    except InvalidSpecError:
        raise UsageError(
            f"%%dtype_trace --engine: {value!r} names no engine; valid forms: "
            "'keras==3.X.Y' (a Keras 3 release, created on first use; '3.X.Y' too), 'nightly' "
            f"(Keras's main: the newest keras-nightly build); {_created()}"
        ) from None
    engine = engines.pin(engine)  # "nightly": the exact build
    if engine is not None and engine.startswith("tf_keras"):
        raise UsageError(
            f"%%dtype_trace --engine: received {value!r}: the cell trace wraps Keras 3's "
            "keras.ops, layers and optimizers, and Keras 2 (tf_keras) has no keras.ops; "
            "give a Keras 3 release ('keras==3.X.Y'), or run the cell in the Keras 2 kernel "
            "(dx.engines.kernel()) untraced"
        )
    return engine


def _created() -> str:
    """The engines created here, in words (the ``--engine`` errors name them)."""
    made = [e.spec for e in engines.created()]
    return "created here: " + (", ".join(made) if made else "none yet")


def _compiled(shell: Any, cell: str) -> tuple[Any, Any, str]:
    """The cell's statements and its last expression compiled under the file name IPython
    gives the cell (its lines cached for tracebacks)."""
    transformed = shell.transform_cell(cell)
    filename = shell.compile.cache(transformed, shell.execution_count, raw_code=cell)
    tree = shell.compile.ast_parse(transformed, filename=filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    flags = shell.compile.flags
    body = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
    last_code = (
        None if last is None else compile(last, filename, "eval", flags=flags, dont_inherit=True)
    )
    return body, last_code, filename
