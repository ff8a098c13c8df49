"""``%%dtype_trace --backend all`` and ``dx.trace(backend="all")(fn, ...)``: one cell's source,
or one function, traced in each backend's user-code worker (``<backend>~user``: the workers
whose answers the cache keeps never run user code, and a worker that ran it is tainted,
``runtime/_worker.taint``), the names it reads from the kernel (a function's arguments) sent as
values, the answers side by side (``CodeComparison``). Nothing is cached: traced code is not a
probe. The worker that ran it is replaced once it has answered (``pool.call(fresh=True)``):
whatever the code changed in that process (Keras's global policy, NumPy's error settings, any
module) goes with it, so the next cell starts as a fresh process does.

A name travels as a value where it can: a NumPy array, a number, a string, ``None``, a list,
tuple or dict of those, a tensor (as its NumPy array, its dtype kept), a Keras layer, model,
loss or metric (as its ``.keras`` archive, ``keras_run.pack``), a module (imported there by
its name). Any other name a cell reads is named in the error, never dropped. A function travels
by value (cloudpickle, with the user's source lines, ``pool.code_payload``), and so does an
argument of it that is none of the above.
"""

from __future__ import annotations

import ast
import builtins
import concurrent.futures
import functools
import importlib
import inspect
import linecache
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from dtype_explorer.analyses._code import trace_called, trace_compiled
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import (
    instance_kind,
    keras_snapshot,
    numpy_values,
    pack,
    restore_keras,
)
from dtype_explorer.records import CodeComparison, CodeEnvironment, CodeError, TraceResult
from dtype_explorer.runtime import engines, pool

#: The file name a cell gets in a worker (its lines are the cell's).
CELL_FILE = "<dtype_trace cell>"
#: Seconds a worker is given past the cell's own ``--timeout`` (its backend's import, a
#: Keras object loaded from its archive).
GRACE_SECONDS = 120.0


def read_names(source: str) -> list[str]:
    """The names ``source`` reads before it sets them (the ones it takes from the namespace).

    >>> read_names("y = x + 1\\nz = y * w\\nprint(z)")
    ['x', 'w', 'print']
    """
    tree = ast.parse(source)
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    nodes.sort(key=lambda n: (n.lineno, n.col_offset, not isinstance(n.ctx, ast.Load)))
    first: dict[str, bool] = {}
    for node in nodes:
        first.setdefault(node.id, isinstance(node.ctx, ast.Load))
    return [name for name, loads in first.items() if loads]


def travelling(source: str, namespace: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """What the cell reads from ``namespace``, each as it travels to a worker.

    Raises:
        InvalidSpecError: a name that cannot travel (named, with its type and what can).

    >>> import numpy as np
    >>> sorted(travelling("y = np.sum(x)", {"np": np, "x": np.ones(2)}))
    ['np', 'x']
    """
    out: dict[str, tuple[str, Any]] = {}
    refused: list[str] = []
    for name in read_names(source):
        if name not in namespace:
            continue  # a builtin, or a name the cell will fail on there as here
        value = namespace[name]
        try:
            out[name] = _as_travelling(value)
        except TypeError:
            refused.append(f"{name} ({type(value).__module__}.{type(value).__qualname__})")
    if refused:
        raise InvalidSpecError(
            f"%%dtype_trace --backend: the cell reads {', '.join(refused)} from this kernel, "
            "which cannot travel to another backend's worker. What travels: NumPy arrays, "
            "numbers, strings, None, lists/tuples/dicts of those, tensors (as NumPy arrays), "
            "Keras layers, models, losses and metrics (as .keras archives) and modules; "
            "define the rest inside the cell."
        )
    return out


def _as_travelling(value: Any) -> tuple[str, Any]:
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return ("value", value)
    if isinstance(value, np.ndarray | np.generic):
        return ("value", value)
    if isinstance(value, (list, tuple)):
        return ("list" if isinstance(value, list) else "tuple", [_as_travelling(v) for v in value])
    if isinstance(value, dict) and all(isinstance(k, (str, int)) for k in value):
        return ("dict", {k: _as_travelling(v) for k, v in value.items()})
    if instance_kind(value) is not None:
        return ("keras", pack(value))
    if hasattr(value, "dtype") and hasattr(value, "shape") and not isinstance(value, type):
        return ("tensor", np.array(numpy_values(value)))  # its own copy: it travels
    raise TypeError(type(value).__name__)


def _arrived(kind: str, payload: Any) -> Any:
    if kind == "object":  # a function's argument, by value
        return pool.load_code(payload)
    if kind == "module":
        return importlib.import_module(payload)
    if kind == "value":
        return payload
    if kind in ("list", "tuple"):
        items = [_arrived(k, p) for k, p in payload]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: _arrived(*v) for k, v in payload.items()}
    if kind == "keras":
        return payload.load()
    import keras

    return keras.ops.convert_to_tensor(payload)


def _made_here(what: str, kind: str, payload: Any, inside: str = "the cell") -> Any:
    """One name the cell reads (``what``: ``the cell reads 'x' from the kernel``), or one
    argument of a function (``inside``: ``the function``), made again in this worker; a value
    this Keras cannot make (a newer release's ``.keras`` archive in an older engine) is named,
    with Keras's reason."""
    try:
        return _arrived(kind, payload)
    except Exception as error:
        import keras

        sent = "its .keras archive" if kind == "keras" else f"a {kind}"
        raise TypeError(
            f"{what}, sent as {sent}, which Keras {keras.__version__} here could not make "
            f"again ({type(error).__name__}: {str(error)[:160]}); define it inside {inside}"
        ) from None


def run_source(
    source: str,
    names: dict[str, tuple[str, Any]],
    options: dict[str, Any],
    engine: str | None = None,
) -> dict:
    """In a worker: the cell's source run traced with its names (``trace_compiled``), the
    result as a dict (its ``environment.where``: this user-code worker; ``engine``: the
    engine whose worker this is, ``None`` for the installed Keras's)."""
    options = _worker_options(options)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    namespace.update(
        {
            name: _made_here(f"the cell reads {name!r} from the kernel", *value)
            for name, value in names.items()
        }
    )
    linecache.cache[CELL_FILE] = (len(source), None, source.splitlines(True), CELL_FILE)
    tree = ast.parse(source, CELL_FILE)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), CELL_FILE, "eval")
    body = compile(tree, CELL_FILE, "exec")
    return _in_worker(
        lambda: trace_compiled(
            body, last, namespace, source=source, cell_file=CELL_FILE, **options
        ),
        engine,
    )


def run_function(
    payload: bytes,
    args: list[tuple[str, Any]],
    kwargs: dict[str, tuple[str, Any]],
    what: str,
    options: dict[str, Any],
    engine: str | None = None,
) -> dict:
    """In a worker: the user's function (``pool.code_payload``) called traced with its
    arguments made again here (``trace_called``); the result as a dict, as
    :func:`run_source`'s."""
    options = _worker_options(options)
    fn = pool.load_code(payload)
    values = [
        _made_here(f"dx.trace's argument {i}", *a, "the function") for i, a in enumerate(args)
    ]
    named = {
        k: _made_here(f"dx.trace's argument {k}=", *v, "the function") for k, v in kwargs.items()
    }
    return _in_worker(lambda: trace_called(fn, tuple(values), named, what=what, **options), engine)


def _worker_options(options: dict[str, Any]) -> dict[str, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {**options, "timeout": None}  # the pool's time limit stops it instead
    return options


def _in_worker(work: Callable[[], TraceResult], engine: str | None) -> dict:
    """``work()``'s result as a dict, its ``environment.where`` this user-code worker
    (``engine``: the engine whose worker this is), Keras's objects the code changed put back
    afterwards (said in the note) for whatever runs here before the pool replaces it."""
    import keras

    before = keras_snapshot()
    try:
        result = work()
    finally:  # the next user probe in this worker sees Keras's own objects again
        restored, _ = restore_keras(before)
    where = f"{keras.backend.backend()}~user worker" + (f" of engine {engine}" if engine else "")
    env = result.environment.model_copy(update={"where": where, "engine": engine})
    note = result.note
    if restored:
        after = "the cell" if result.kind == "cell" else "the function"
        note = (note + "; " if note else "") + put_back_note(after, restored)
    update = {"environment": env, "note": note, "put_back": tuple(restored)}
    return result.model_copy(update=update).to_dict()


#: How many of the objects put back after the code the note names (the record keeps all).
NAMED_PUT_BACK = 3


def put_back_note(after: str, restored: list[str]) -> str:
    """The note on Keras's objects put back ``after`` the code: all of them where few, else
    how many and the first :data:`NAMED_PUT_BACK` (an ``import keras_hub`` registers hundreds:
    ``TraceResult.put_back`` keeps every name).

    Args:
        after: ``"the function"`` or ``"the cell"``.
        restored: the names put back (``keras_run.restore_keras``).

    Returns:
        ``put back after the function: 812 of Keras's objects (GLOBAL_...[...], ... and 809
        more; all in the result's put_back)``.

    >>> put_back_note("the cell", ["a", "b"])
    'put back after the cell: a, b'
    >>> put_back_note("the cell", list("abcdef"))[:61]
    "put back after the cell: 6 of Keras's objects (a, b, c and 3 "
    """
    if len(restored) <= NAMED_PUT_BACK + 1:
        return f"put back after {after}: " + ", ".join(restored)
    first = ", ".join(restored[:NAMED_PUT_BACK])
    more = len(restored) - NAMED_PUT_BACK
    return (
        f"put back after {after}: {len(restored)} of Keras's objects ({first} and {more} more; "
        "all in the result's put_back)"
    )


def trace_on_backends(
    source: str,
    namespace: dict[str, Any],
    backends: list[str],
    options: dict[str, Any],
    *,
    engine: str | None = None,
) -> CodeComparison:
    """``source`` traced in each backend's user-code worker, side by side.

    Args:
        source: the cell's text (its syntax checked first, in the kernel).
        namespace: the kernel's namespace (the names the cell reads are sent as values).
        backends: the backends to run on.
        options: ``max_steps``, ``timeout``, ``policy``, ``floatx``, ``precision``, ``eager``.
        engine: a Keras release's engine (``"keras==3.11.3"``, checked by
            ``records.engine_spec``): the cell runs in that engine's user-code workers, that
            release of Keras over the installed backends; created first where it is not yet
            (``engines.ensure``). ``None``: the installed Keras's workers.

    Returns:
        The :class:`CodeComparison`; a worker that died or ran past its time is that
        backend's result (``status`` ``raised`` or ``timeout``), the others answer.
    """
    names = travelling(source, namespace)
    work = functools.partial(run_source, source, names, options, engine)  # the ~user worker
    return _on_backends(work, backends, options, engine, source=source, kind="cell", what="cell")


def trace_function_on_backends(
    fn: Any,
    args: tuple,
    kwargs: dict[str, Any],
    backends: list[str],
    options: dict[str, Any],
    *,
    what: str,
    engine: str | None = None,
) -> CodeComparison:
    """``fn(*args, **kwargs)`` traced in each backend's user-code worker, side by side
    (``dx.trace(backend=...)``'s work).

    Args:
        fn: the user's function: it travels by value (``pool.code_payload``, with its
            source lines and those of the helpers it calls).
        args: its positional arguments: each travels as a cell's names do
            (:func:`travelling`), or else by value.
        kwargs: its keyword arguments, the same way.
        backends: the backends to run on.
        options: ``max_steps``, ``timeout``, ``policy``, ``floatx``, ``precision``, ``eager``.
        what: the function's name in the results.
        engine: a Keras 3 release's engine, as :func:`trace_on_backends`'s.

    Returns:
        The :class:`CodeComparison` (``results``: each backend's :class:`TraceResult`).

    Raises:
        InvalidSpecError: ``fn`` or an argument cannot travel (named, with the reason).
    """
    payload = pool.code_payload(fn, f"dx.trace: the function {what}")
    sent = [_argument(f"argument {i}", a) for i, a in enumerate(args)]
    named = {k: _argument(f"argument {k}=", v) for k, v in kwargs.items()}
    work = functools.partial(run_function, payload, sent, named, what, options, engine)
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):  # a builtin, a lambda typed at a prompt
        source = ""
    return _on_backends(work, backends, options, engine, source=source, kind="function", what=what)


def _argument(name: str, value: Any) -> tuple[str, Any]:
    """One argument of a function, as it travels: as a cell's name does, else by value."""
    try:
        return _as_travelling(value)
    except TypeError:
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        return ("object", pool.code_payload(value, f"dx.trace: {name} ({kind})"))


def _on_backends(
    work: Any,
    backends: list[str],
    options: dict[str, Any],
    engine: str | None,
    *,
    source: str,
    kind: str,
    what: str,
) -> CodeComparison:
    """``work`` run in each backend's user-code worker (replaced once it has answered), each
    answer (or what stopped it) that backend's :class:`TraceResult`."""
    engines.ensure(engine)  # created on first use, with progress, as dx.probe does
    timeout = options.get("timeout")
    seconds = (timeout or pool.DEFAULT_TIMEOUT * 5) + GRACE_SECONDS
    futures = {b: pool.call(b, work, timeout=seconds, engine=engine, fresh=True) for b in backends}
    results = {b: _answer(b, f, source, timeout, engine, kind, what) for b, f in futures.items()}
    return CodeComparison(source=source, results=results)


def _answer(
    backend: str,
    future: Any,
    source: str,
    timeout: float | None,
    engine: str | None,
    kind: str,
    what: str,
) -> TraceResult:
    where = f"{backend}~user worker" + (f" of engine {engine}" if engine else "")
    limit = f"--timeout {timeout}" if kind == "cell" else f"timeout={timeout}"
    try:
        return TraceResult.from_dict(future.result())
    except concurrent.futures.TimeoutError:
        status, error = "timeout", CodeError(
            type="Timeout", message=f"the {backend} worker ran past {limit} s and was replaced"
        )  # fmt: skip
    except Exception as failure:  # the worker died (os._exit, a crash: it is replaced), or
        # could not run the engine asked (``_worker.call`` says why)
        lost = pool.lost_worker(failure)
        if lost is None:
            status = "raised"
            error = CodeError(
                type=type(failure).__name__,
                message=f"the {where} gave no answer for the {kind}: {failure}"[:600],
            )
        else:
            status = "exited"
            error = CodeError(
                type="WorkerExited",
                message=(
                    f"the {where} {lost[0]} while running the {kind} (its own os._exit, a "
                    "crash in native code, or out of memory): no answer came back, not even "
                    "the steps before it; the worker is replaced for the next run"
                    + (f". Its output is in {lost[1]}" if lost[1] else "")
                ),
            )
    env = CodeEnvironment(keras="?", backend=backend, where=where, engine=engine)
    return TraceResult(
        what=what, kind=kind, status=status, error=error, environment=env, source=source
    )  # type: ignore[arg-type]
