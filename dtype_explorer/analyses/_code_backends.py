"""``%%dtype_trace --backend all``: one cell's source traced in each backend's user-code worker
(``<backend>~user``: the workers whose answers the cache keeps never run user code, and a
worker that ran it is tainted, ``runtime/_worker.taint``), the names it reads from the kernel
sent as values, the answers side by side (``CodeComparison``). Nothing is cached: a traced cell
is not a probe.

A name travels as a value where it can: a NumPy array, a number, a string, ``None``, a list,
tuple or dict of those, a tensor (as its NumPy array, its dtype kept), a Keras layer, model,
loss or metric (as its ``.keras`` archive, ``keras_run.pack``), a module (imported there by
its name). Any other name is named in the error, never dropped.
"""

from __future__ import annotations

import ast
import builtins
import concurrent.futures
import functools
import importlib
import linecache
import threading
import types
from typing import Any

import numpy as np

from dtype_explorer.analyses._code import trace_compiled
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import instance_kind, keras_snapshot, pack, restore_keras
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
        import keras

        return ("tensor", np.asarray(keras.ops.convert_to_numpy(value)))
    raise TypeError(type(value).__name__)


def _arrived(kind: str, payload: Any) -> Any:
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


def _made_here(name: str, kind: str, payload: Any) -> Any:
    """One name the cell reads, made again in this worker; a value this Keras cannot make
    (a newer release's ``.keras`` archive in an older engine) is named, with Keras's reason."""
    try:
        return _arrived(kind, payload)
    except Exception as error:
        import keras

        sent = "its .keras archive" if kind == "keras" else f"a {kind}"
        raise TypeError(
            f"the cell reads {name!r} from the kernel, sent as {sent}, which Keras "
            f"{keras.__version__} here could not make again ({type(error).__name__}: "
            f"{str(error)[:160]}); define it inside the cell"
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
    import keras

    if threading.current_thread() is not threading.main_thread():
        options = {**options, "timeout": None}  # the pool's time limit stops it instead
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    namespace.update({name: _made_here(name, *value) for name, value in names.items()})
    linecache.cache[CELL_FILE] = (len(source), None, source.splitlines(True), CELL_FILE)
    tree = ast.parse(source, CELL_FILE)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), CELL_FILE, "eval")
    body = compile(tree, CELL_FILE, "exec")
    before = keras_snapshot()
    try:
        result = trace_compiled(
            body, last, namespace, source=source, cell_file=CELL_FILE, **options
        )
    finally:  # the next user probe in this worker sees Keras's own objects again
        restored, _ = restore_keras(before)
    where = f"{keras.backend.backend()}~user worker" + (f" of engine {engine}" if engine else "")
    env = result.environment.model_copy(update={"where": where, "engine": engine})
    note = result.note
    if restored:
        note = (note + "; " if note else "") + "put back after the cell: " + ", ".join(restored)
    return result.model_copy(update={"environment": env, "note": note}).to_dict()


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
        options: ``max_steps``, ``timeout``, ``policy``, ``floatx``, ``precision``.
        engine: a Keras release's engine (``"keras==3.11.3"``, checked by
            ``records.engine_spec``): the cell runs in that engine's user-code workers, that
            release of Keras over the installed backends; created first where it is not yet
            (``engines.ensure``). ``None``: the installed Keras's workers.

    Returns:
        The :class:`CodeComparison`; a worker that died or ran past its time is that
        backend's result (``status`` ``raised`` or ``timeout``), the others answer.
    """
    names = travelling(source, namespace)
    engines.ensure(engine)  # created on first use, with progress, as dx.probe does
    timeout = options.get("timeout")
    seconds = (timeout or pool.DEFAULT_TIMEOUT * 5) + GRACE_SECONDS
    fn = functools.partial(run_source, source, names, options, engine)  # the ~user worker
    futures = {b: pool.call(b, fn, timeout=seconds, engine=engine) for b in backends}
    results = {b: _answer(b, f, source, timeout, engine) for b, f in futures.items()}
    return CodeComparison(source=source, results=results)


def _answer(
    backend: str, future: Any, source: str, timeout: float | None, engine: str | None
) -> TraceResult:
    where = f"{backend}~user worker" + (f" of engine {engine}" if engine else "")
    try:
        return TraceResult.from_dict(future.result())
    except concurrent.futures.TimeoutError:
        status, error = "timeout", CodeError(
            type="Timeout", message=f"the {backend} worker ran past --timeout {timeout} s and "
            "was replaced"
        )  # fmt: skip
    except Exception as failure:  # the worker died (os._exit, a crash: it is replaced), or
        # could not run the engine asked (``_worker.call`` says why)
        status, error = (
            "raised",
            CodeError(
                type=type(failure).__name__,
                message=f"the {where} gave no answer for the cell: {failure}"[:600],
            ),
        )
    env = CodeEnvironment(keras="?", backend=backend, where=where, engine=engine)
    return TraceResult(
        what="cell", kind="cell", status=status, error=error, environment=env, source=source
    )  # type: ignore[arg-type]
