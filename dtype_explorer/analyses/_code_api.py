"""``dx.trace``: the user's own function, or a ``with`` block, run as written with every dtype
step inside it recorded, in this process (``_code``) or in other backends' user-code workers
(``_code_backends``).

Two forms, so that the tool's options never take a keyword of the user's function:

* ``dx.trace(fn, *args, **kwargs)`` calls ``fn(*args, **kwargs)`` here, now: every keyword
  is ``fn``'s, whatever its name (``policy=``, ``backend=`` too).
* ``dx.trace(**options)`` (no function) gives a :class:`Tracer` holding the tool's options
  (``backend``, ``engine``, ``policy``, ``floatx``, ``precision``, ``max_steps``,
  ``timeout``), checked at once: call it as ``dx.trace(backend="all")(fn, *args, **kwargs)``
  (again every keyword is ``fn``'s), or open it as ``with dx.trace(policy=...) as t:``.

This is how ``jax.jit(f, static_argnums=...)(x)``, ``jax.make_jaxpr(f)(x)`` and
``torch.compile(model, backend=...)`` keep a transformation's options apart from the call's
arguments. A keyword of the first form that ``fn`` does not accept but that names an option is
refused, pointing at the second form, rather than passed to ``fn`` to fail there.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import threading
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.analyses._code import settings_said, tool_settings, trace_called
from dtype_explorer.analyses._code_backends import trace_function_on_backends
from dtype_explorer.errors import InvalidSpecError, received, unknown
from dtype_explorer.keras_run import check_precision, validate_policy
from dtype_explorer.keras_run.code import TracedRun
from dtype_explorer.records import CodeComparison, TraceResult, engine_spec
from dtype_explorer.runtime import pool

#: The tool's own options (``dx.trace(**options)``), never a keyword of the user's function.
OPTIONS = ("backend", "engine", "policy", "floatx", "precision", "eager", "max_steps", "timeout")


class Tracer:
    """The tool's options for ``dx.trace`` (``dx.trace(**options)``), checked at once; called
    with the user's function, or opened around a block.

    ``tracer(fn, *args, **kwargs)`` runs ``fn(*args, **kwargs)`` traced (every keyword is
    ``fn``'s): here, or with ``backend``/``engine`` in each backend's user-code worker (the
    function and its arguments sent by value). ``with tracer as t:`` traces the block here
    (``policy``, ``floatx``, ``precision``, ``eager``, ``max_steps``; a block cannot travel to
    another backend): ``t.result`` is its :class:`TraceResult` once it ends, ``t`` reads its
    fields (``t.steps``) and displays as it.
    """

    def __init__(
        self,
        *,
        backend: Any = None,
        engine: str | None = None,
        policy: Any = None,
        floatx: str | None = None,
        precision: str | None = None,
        eager: bool = False,
        max_steps: int = 0,
        timeout: float | None = None,
    ):
        self.backends, self.single = _backends(backend)
        self.engine = _engine(engine)
        self.options: dict[str, Any] = {
            "max_steps": _max_steps(max_steps),
            "timeout": _timeout(timeout),
            "policy": None if policy is None else validate_policy(policy),
            "floatx": _floatx(floatx),
            "precision": check_precision(precision),
            "eager": _eager(eager),
        }
        given = {"backend": backend, "engine": engine, "timeout": timeout}
        self._given = {n: v for n, v in given.items() if v is not None}
        self.result: TraceResult | None = None
        self._run: TracedRun | None = None
        self._stack = contextlib.ExitStack()

    def __call__(self, fn: Any, /, *args: Any, **kwargs: Any) -> TraceResult | CodeComparison:
        """``fn(*args, **kwargs)`` traced with these options (see :func:`trace`)."""
        what = _checked_fn(fn)
        backends, single = self.backends, self.single
        if backends is None and self.engine is not None:  # this backend, in the engine
            backends, single = [_current_backend()], True
        if backends is None:
            if self.options["timeout"] is not None and not _main_thread():
                raise InvalidSpecError(
                    "dx.trace(timeout=...): here, only in the main thread (a signal stops "
                    "the function); give backend= to run it in a worker instead"
                )
            return trace_called(fn, args, kwargs, what=what, **self.options)
        compared = trace_function_on_backends(
            fn, args, kwargs, backends, self.options, what=what, engine=self.engine
        )
        return compared.results[backends[0]] if single else compared

    def __enter__(self) -> Tracer:
        refused = {n: v for n, v in self._given.items() if n in ("backend", "engine", "timeout")}
        if refused:
            raise InvalidSpecError(
                f"with dx.trace(...): {', '.join(refused)} applies to a function "
                "(dx.trace(backend='all')(fn, *args)): a block runs here, as written, and "
                "cannot travel to another worker or be stopped; received: "
                + ", ".join(f"{n}={received(v)}" for n, v in refused.items())
            )
        options = self.options
        self.result = None
        self._run = TracedRun(what="with dx.trace()", kind="block", max_steps=options["max_steps"])
        with contextlib.ExitStack() as stack:
            stack.enter_context(
                tool_settings(
                    options["policy"], options["floatx"], options["precision"], options["eager"]
                )
            )
            stack.enter_context(self._run)
            self._stack = stack.pop_all()
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        self._stack.__exit__(kind, error, tb)
        result = self._run.result(error=error) if self._run is not None else None
        if result is not None:
            result = settings_said(result, self.options["precision"], self.options["eager"])
        self.result = result
        return False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or self.__dict__.get("result") is None:
            raise AttributeError(f"{name!r}: the dx.trace() block has not finished yet")
        return getattr(self.result, name)

    def __str__(self) -> str:
        return str(self.result) if self.result is not None else "dx.trace(): not run yet"

    def _repr_html_(self) -> str | None:
        return self.result._repr_html_() if self.result is not None else None


def trace(fn: Any = None, /, *args: Any, **kwargs: Any) -> TraceResult | Tracer:
    """Run the user's own code once, as written, and record every dtype step inside it.

    ``dx.trace(fn, *args, **kwargs)`` calls ``fn(*args, **kwargs)`` here, now: every keyword
    is ``fn``'s. The tool's own options come first, without a function:
    ``dx.trace(backend="all", policy="mixed_float16")(fn, *args, **kwargs)`` (a
    :class:`Tracer`, called), or ``with dx.trace() as t:`` around a block. The steps are
    every ``keras.ops`` call, every layer ``__call__``, the autocasts, variable creation and
    assignment, the optimizer's steps and loss scaling, the NumPy-to-tensor conversions at
    Keras's boundary and the user's Python operators on Keras tensors, each with the user's
    line that caused it. Nothing is cached.

    Args:
        fn: the function to call (omit it to give the options, or for the ``with`` form).
        *args: its positional arguments, passed as given.
        **kwargs: its keyword arguments, passed as given; without ``fn``, the options:
            ``backend`` (``None``: this process; a name, a list or ``"all"``: the function
            and its arguments sent by value to each backend's user-code worker, where an
            ``os._exit`` or a crash ends that worker only; the one name of the backend this
            process runs: this process, as ``None``), ``engine``
            (a Keras 3 release, ``"keras==3.X.Y"``: its user-code worker, on this backend or
            each ``backend``), ``policy`` and ``floatx`` (set for the run, put back after),
            ``precision`` (``highest``, ``tf32``, ``default``: the float32 matmul precision),
            ``eager`` (``True``: the backend's compiled functions, ``jax.jit``,
            ``tf.function``, ``torch.compile``, run op by op, so that the steps inside
            Keras's ``predict``/``fit`` and keras-hub's ``generate()`` are traced with their
            values; a compiled function's second call otherwise runs no step the trace sees),
            ``max_steps`` (the most steps kept, default 300), ``timeout`` (seconds).

    Returns:
        A :class:`TraceResult` (``.steps``, ``.returned``, ``.value``, ``.error``,
        ``.first_nonfinite_step()``, ``.lossy_steps()``, ``.dtype_changes()``, ``to_json()``;
        a card in notebooks), ``status`` ``ok``, ``raised`` (the user's own traceback and
        the steps up to the raise), ``timeout`` or ``exited``. With ``backend`` naming
        several backends (or ``"all"``), a :class:`CodeComparison` of them: each one's
        result and the first step where they part, with the user's line that caused it.
        Without ``fn``: the :class:`Tracer` to call or to open.

    Raises:
        InvalidSpecError: ``fn`` is not callable; an option is not valid; a keyword given
            with ``fn`` that ``fn`` does not take names an option (give it first); with
            ``backend``, ``fn`` or an argument cannot travel.

    >>> import dtype_explorer as dx, keras, numpy as np
    >>> r = dx.trace(keras.ops.add, np.ones(2, "int8"), 1.5)
    >>> r.steps[0].op, r.returned_dtype
    ('ops.add', 'float32')
    >>> with dx.trace() as t:
    ...     y = keras.ops.cast(keras.ops.ones(2), "float16")
    >>> [s.op for s in t.steps]
    ['ops.ones', 'ops.cast']
    >>> dense = lambda x: keras.layers.Dense(2)(x)
    >>> dx.trace(policy="mixed_float16")(dense, np.ones((1, 3))).returned_dtype
    'float16'
    """
    if fn is None:
        return Tracer(**_options(kwargs))
    _check_keywords(fn, kwargs)
    return Tracer()(fn, *args, **kwargs)


def _options(given: dict[str, Any]) -> dict[str, Any]:
    unknown_names = sorted(set(given) - set(OPTIONS))
    if unknown_names:
        raise unknown("dx.trace() option", unknown_names[0], OPTIONS)
    return given


def _check_keywords(fn: Any, kwargs: dict[str, Any]) -> None:
    """A keyword that names an option and that ``fn`` does not take is refused, pointing at
    the options-first form; one ``fn`` takes is ``fn``'s."""
    mistaken = [name for name in kwargs if name in OPTIONS and not _takes(fn, name)]
    if mistaken:
        shown = ", ".join(f"{n}={kwargs[n]!r}" for n in mistaken)
        raise InvalidSpecError(
            f"dx.trace({_name(fn)}, ..., {shown}): {_name(fn)} takes no keyword "
            f"{mistaken[0]!r}, and every keyword given with the function is the function's. "
            f"Give the tool's options first: dx.trace({shown})({_name(fn)}, *args, **kwargs)"
        )


def _takes(fn: Any, name: str) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature: the keyword is passed on, as given
        return True
    return any(
        p.kind is p.VAR_KEYWORD or (p.name == name and p.kind is not p.POSITIONAL_ONLY)
        for p in parameters
    )


def _name(fn: Any) -> str:
    what = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return str(what)[:80]


def _checked_fn(fn: Any) -> str:
    if not callable(fn):
        raise InvalidSpecError(
            f"dx.trace: fn must be a function (or omitted, for `with dx.trace() as t:`); "
            f"received: {received(fn)} ({type(fn).__name__})"
        )
    return _name(fn)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _timeout(value: Any) -> float | None:
    seconds = pool.time_limit(value, "timeout")
    return None if seconds is None or seconds == math.inf else seconds


def _current_backend() -> str:
    import keras

    return keras.backend.backend()


def _backends(backend: Any) -> tuple[list[str] | None, bool]:
    """The workers' backends (``None``: this process) and whether one was named alone (its
    :class:`TraceResult` is the answer, not a comparison)."""
    if backend is None:
        return None, False
    single = isinstance(backend, str) and "," not in backend and backend.strip() != "all"
    if single and backend.strip() == _current_backend():
        return None, False  # this process runs that backend
    return pool.usable(backend), single


def _engine(value: Any) -> str | None:
    if value is None:
        return None
    engine = engine_spec(value)
    if engine is not None and engine.startswith("tf_keras"):
        raise InvalidSpecError(
            f"dx.trace: engine {value!r}: the trace wraps Keras 3's keras.ops, layers and "
            "optimizers, which Keras 2 (tf_keras) does not have; give a Keras 3 release "
            "('keras==3.X.Y')"
        )
    return engine


def _floatx(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or value not in dtypes.FLOATX):
        raise unknown("floatx", value, dtypes.FLOATX)
    return value


def _eager(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidSpecError(
            f"dx.trace(): eager must be True or False; received: {received(value)} "
            f"({type(value).__name__})"
        )
    return value


def _max_steps(steps: Any) -> int:
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise InvalidSpecError(
            f"dx.trace(): max_steps must be an int >= 1 (0: the default, 300); "
            f"received: {received(steps)}"
        )
    return steps
