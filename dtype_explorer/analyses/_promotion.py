"""Promotion tables: the dtype an op returns for every pair of input dtypes (every dtype, for a
unary op), three ways, beside the tables of the libraries Keras is compared with.

Any catalog op with one or two probed inputs has a table (``ops.where`` too: its condition is
bool). The library functions compared are the catalog's references: the same name in each
library where it means the same, a small table where names differ (``torch.amax`` for ``max``,
``torch.remainder`` for ``mod``), and "no counterpart" where the library has none. They run on
the samples the Keras probes use (valid for the op: no zero divisors, positive ``sqrt`` inputs).

For each pair and backend a probe of ``ops.<op>`` gives the *documented* dtype (Keras's
``result_type``, computed in that backend's worker, so TensorFlow's 64-bit results show), the
*declared* (symbolic) dtype and the *observed* (eager) one. Beside them, the same op is run in
JAX (``jax.numpy``, x64 off, as Keras runs it), NumPy, PyTorch and TensorFlow's NumPy
behaviour, each in the process that already imports that library; TensorFlow's NumPy behaviour
changes TensorFlow's global state, so it runs in the TensorFlow reference process the probe's
references use too (``keras_run``'s ``tf_reference_submit``: long-lived, its output in
``pool.log_path("tensorflow-reference")``).

>>> import dtype_explorer as dx
>>> table = dx.promotion_table("add", dtypes=["int8", "uint8", "float16"])   # doctest: +SKIP
>>> table.cell("int8", "uint8").shown                                        # doctest: +SKIP
'int16'
>>> table.disagreements()                                                    # doctest: +SKIP
"""

from __future__ import annotations

import concurrent.futures
import importlib
import importlib.util
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.analyses._survey import installed, run_specs
from dtype_explorer.dtypes import FLOATX
from dtype_explorer.errors import InvalidSpecError, first_line, listed, received, unknown
from dtype_explorer.keras_run import array_library as _library
from dtype_explorer.keras_run import catalog, tf_reference_submit
from dtype_explorer.keras_run import resolve_function as _resolve
from dtype_explorer.keras_run.catalog import OpEntry
from dtype_explorer.records import (
    REFERENCES,
    UNARY,
    ProbeSpec,
    PromotionTable,
    RefCell,
    pair_key,
)
from dtype_explorer.runtime import engines, pool
from dtype_explorer.versions import library_version

#: Ops whose tables the lessons show (any unary or binary op has one).
OPS: tuple[str, ...] = (
    "add",
    "multiply",
    "matmul",
    "divide",
    "where",
    "maximum",
    "concatenate",
)
#: Seconds a reference library may take for a whole table (JAX compiles each dtype pair).
REFERENCE_TIMEOUT = 600.0


def promotion_table(
    op: str = "add",
    dtypes: Sequence[str] | None = None,
    backends: Sequence[str] | str | None = None,
    *,
    floatx: str | None = None,
    references: Sequence[str] | None = None,
    engine: str | None = None,
    timeout: float | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> PromotionTable:
    """Probe ``ops.<op>`` on every pair of ``dtypes`` on every backend, under ``floatx``.

    Args:
        op: a ``keras.ops`` function with one or two probed inputs (``"add"``, ``"ops.add"``,
            ``"ops.nn.relu"``; ``"where"`` takes a boolean condition and the pair). A unary op
            gets one row per dtype (``table.cell("int8")``).
        dtypes: the dtypes of the grid (default: every Keras dtype but ``string``, plus the
            weak Python scalars ``python_int``, ``python_float`` and ``python_bool``).
        backends: backend names or ``"all"`` (default: every installed one).
        floatx: decides weak floats and int-to-float results (default: this session's
            ``keras.config.floatx()``); the table records the one it was made under.
        references: the libraries beside Keras: ``jax``, ``numpy``, ``torch``, ``tensorflow``
            (default: every installed one).
        engine: which Keras answers (``dx.probe``'s ``engine``): ``None`` or a Keras 3
            release, ``"keras==3.X.Y"`` (created first when missing). Keras 2 has no
            ``keras.ops``: ``"tf_keras"`` is refused.
        timeout: seconds a worker may take per probe (default: the pool's).
        use_cache: answer from, and store into, the result cache.
        progress: show a progress bar.

    Returns:
        A ``PromotionTable``: ``.cell(lhs, rhs)``, ``.disagreements()``, ``.to_frame()``,
        ``.figure()``.

    >>> import dtype_explorer as dx
    >>> t = dx.promotion_table("add", dtypes=["int8", "uint8"], backends="numpy",
    ...                        references=["numpy"], progress=False)      # doctest: +SKIP
    >>> t.cell("int8", "uint8").shown                                     # doctest: +SKIP
    'int16'
    """
    # 1. Validate: the time limit, the engine (Keras 3: ops), the op and the grid's axes.
    timeout = pool.time_limit(timeout)
    engine = _ops_engine(engine)
    entry = _op_entry(op)
    names = _dtypes(dtypes)
    chosen = installed(backends)
    libraries = _references(references)
    floatx = _floatx(floatx)
    # 2. Plan: every dtype (unary) or pair of dtypes, and the operands each stands for.
    arity = 1 if entry.arity == 1 else 2
    if arity == 1:
        pairs = [(name, UNARY) for name in names]
    else:
        pairs = [(lhs, rhs) for lhs in names for rhs in names]
    operands = [_operands(entry, lhs, rhs) for lhs, rhs in pairs]
    # 3. Run: the references in their libraries' workers, beside Keras's probes.
    engines.ensure(engine, progress=progress)  # created on first use
    pending = {lib: _reference_future(lib, entry, tuple(operands)) for lib in libraries}
    specs = [
        ProbeSpec(target=entry.name, input_dtypes=ops_, backend=b, floatx=floatx, engine=engine)
        for ops_ in operands
        for b in chosen
    ]
    results = run_specs(
        specs, timeout=timeout, use_cache=use_cache, progress=progress, desc=entry.name
    )
    answers = {lib: _answers_or_failure(lib, future, len(pairs)) for lib, future in pending.items()}
    # 4. Collect: Keras's answers and each reference's, by pair.
    return PromotionTable(
        op=entry.name,
        floatx=floatx,
        dtypes=names,
        backends=chosen,
        results=tuple(results),
        references={
            lib: {pair_key(*pair): cell for pair, cell in zip(pairs, cells)}
            for lib, cells in answers.items()
        },
        reference_versions={lib: library_version(lib) for lib in libraries},
        arity=arity,
        reference_paths={lib: entry.references.get(lib) for lib in libraries},
        engine=engine,
    )


def _ops_engine(engine: str | None) -> str | None:
    """``engine`` checked to have ``keras.ops``: the installed Keras or a Keras 3 release."""
    engine = engines.pin(engine)
    if engine is not None and engine.startswith("tf_keras"):
        raise InvalidSpecError(
            "keras.ops has no counterpart in Keras 2 (tf_keras): promotion tables take "
            f"engine=None or 'keras==3.X.Y'; received: engine={engine!r}"
        )
    return engine


def _floatx(floatx: str | None) -> str:
    """``floatx`` checked (``None``: this session's ``keras.config.floatx()``)."""
    if floatx is None:
        import keras

        floatx = keras.config.floatx()
    if floatx not in FLOATX:
        raise unknown("floatx", floatx, FLOATX)
    return floatx


# ------------------------------------------------------------------------------ references


@pool.trusted_entry  # pool.call runs it in a cache-keeping worker
def reference_dtypes(
    library: str, op: str, operands: tuple[tuple[str, ...], ...], path: str | None
) -> list[RefCell]:
    """Run the library's counterpart of ``op`` (``path``) on samples of each operand tuple and
    name each result's dtype.

    Runs in a process that imports ``library`` (``"tensorflow"``: the TensorFlow reference
    process, NumPy behaviour on). The samples are the ones the Keras probes use (the catalog's
    inputs by role), with the same Python arguments and kwargs; weak Python scalars go in as
    Python numbers.
    """
    _, convert, name_of = _library(library)
    fn = _resolve(path)
    entry = catalog.entry(op)
    cells = []
    for names in operands:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                args, _ = catalog.op_calls.build(entry.inputs, _sampler(names, convert))
                out = fn(*args, **entry.kwargs)
            cells.append(RefCell(dtype=name_of(out)))
        except Exception as error:
            cells.append(RefCell(error=f"{type(error).__name__}: {first_line(str(error))}"[:300]))
    return cells


def _sampler(names: tuple[str, ...], convert: Any) -> Any:
    """Makes each tensor of one reference call: the probe's sample, in the library's type."""
    rng = np.random.default_rng(0)

    def tensor(leaf: dict, i: int | None) -> Any:
        dtype = leaf["dtype"] if i is None else names[i]
        if dtype in dtypes.PYTHON_SCALARS:
            return catalog.op_calls.python_scalar(leaf["values"], dtype)
        values = catalog.op_calls.values(leaf["values"], tuple(leaf["shape"]), dtype, rng)
        return _convert(convert, values)

    return tensor


def _convert(convert: Any, value: Any) -> Any:
    if convert is None or isinstance(value, (bool, int, float)):
        return value  # Python scalars go in as they are: weak types
    return convert(value)


_answers: dict[tuple, list[RefCell]] = {}
_answers_lock = threading.Lock()


def _reference_future(
    library: str, entry: OpEntry, operands: tuple[tuple[str, ...], ...]
) -> concurrent.futures.Future[list[RefCell]]:
    """The library's answers for ``operands``: remembered per library version for the session;
    ``missing`` in every cell where the library has no counterpart."""
    path = entry.references.get(library)
    if path is None:
        done: concurrent.futures.Future[list[RefCell]] = concurrent.futures.Future()
        missing = f"{library} has no function of the same meaning as {entry.name}"
        done.set_result([RefCell(missing=missing)] * len(operands))
        return done
    args = (entry.name, operands, path)
    key = (library, library_version(library), repr(args))
    with _answers_lock:
        known = _answers.get(key)
    if known is not None:
        done = concurrent.futures.Future()
        done.set_result(known)
        return done
    future = _start_reference(library, args)

    def remember(f: concurrent.futures.Future) -> None:
        if f.exception() is None:
            with _answers_lock:
                _answers[key] = f.result()

    future.add_done_callback(remember)
    return future


def _answers_or_failure(
    library: str, future: concurrent.futures.Future[list[RefCell]], count: int
) -> list[RefCell]:
    """The library's answers; if its run failed (a timeout, a crash), that failure in each cell."""
    try:
        return future.result(timeout=REFERENCE_TIMEOUT)
    except Exception as error:
        message = f"the {library} reference run failed: {type(error).__name__}: {error}"
        return [RefCell(error=message[:300])] * count


def _start_reference(library: str, args: tuple) -> concurrent.futures.Future[list[RefCell]]:
    if library == "numpy":  # NumPy is already in this process
        done: concurrent.futures.Future[list[RefCell]] = concurrent.futures.Future()
        done.set_result(reference_dtypes("numpy", *args))
        return done
    if library == "tensorflow":  # NumPy behaviour on, in the TensorFlow reference process
        return tf_reference_submit(
            reference_dtypes,
            "tensorflow",
            *args,
            log=pool.log_path("tensorflow-reference"),
            process_name=f"{pool.WORKER_PROCESS_NAME}/tensorflow-reference",
        )
    return pool.call(library, reference_dtypes, library, *args, timeout=REFERENCE_TIMEOUT)


# --------------------------------------------------------------------------------- helpers


def _op_entry(op: str) -> OpEntry:
    if not isinstance(op, str):
        raise InvalidSpecError(
            f"op must be an op name such as 'add'; received: {received(op)} ({type(op).__name__})"
        )
    name = op if op.startswith("ops.") else f"ops.{op}"
    found = catalog.entry(name)
    if not isinstance(found, OpEntry) or _pair_arity(found) is None:
        arity = found.arity if isinstance(found, OpEntry) else 0
        raise InvalidSpecError(
            f"{name} takes {arity} probed input dtypes; promotion tables are for ops with one "
            f"or two (unary ops such as ops.sqrt, binary ops such as {', '.join(OPS)})"
        )
    if found.skip:
        raise InvalidSpecError(f"{found.name} cannot be probed standalone: {found.skip}")
    return found


def _pair_arity(entry: OpEntry) -> int | None:
    if entry.arity in (1, 2):
        return entry.arity
    if entry.arity == 3 and entry.short_name == "where":
        return 3
    return None


def _operands(entry: OpEntry, lhs: str, rhs: str) -> tuple[str, ...]:
    """The input dtypes of one probe: the dtype (unary), or the pair, after ``where``'s boolean
    condition."""
    if entry.arity == 1:
        return (lhs,)
    return (lhs, rhs) if entry.arity == 2 else ("bool", lhs, rhs)


def _dtypes(names: Sequence[str] | None) -> tuple[str, ...]:
    if names is None:
        return tuple(n for n in dtypes.all_input_dtypes() if n != "string")
    chosen = tuple(dict.fromkeys(dtypes.standardize(n, "dtypes") for n in listed(names, "dtypes")))
    if not chosen:
        raise InvalidSpecError("dtypes must name at least one dtype")
    return chosen


def _references(libraries: Sequence[str] | None) -> tuple[str, ...]:
    if libraries is None:  # JAX and PyTorch run in their backend's worker, so it must be allowed
        workers = pool.installed_backends()
        return tuple(
            lib
            for lib in REFERENCES
            if importlib.util.find_spec(lib) is not None
            and lib in (*workers, "numpy", "tensorflow")
        )
    if isinstance(libraries, str):
        libraries = [libraries]
    for lib in libraries:
        if lib not in REFERENCES:
            raise unknown("reference library", lib, REFERENCES)
    return tuple(dict.fromkeys(libraries))
