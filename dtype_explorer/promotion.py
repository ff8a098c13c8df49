"""Promotion tables: the dtype an op returns for every pair of input dtypes, three ways, beside
the tables of the libraries Keras is compared with.

For each pair and backend a probe of ``ops.<op>`` gives the *documented* dtype (Keras's
``result_type``, computed in that backend's worker, so TensorFlow's 64-bit results show), the
*declared* (symbolic) dtype and the *observed* (eager) one. Beside them, the same op is run in
JAX (``jax.numpy``, x64 off, as Keras runs it), NumPy, PyTorch and TensorFlow's NumPy
behaviour, each in the process that already imports that library; TensorFlow's NumPy behaviour
changes TensorFlow's global state, so it runs in a throwaway process.

>>> import dtype_explorer as dx
>>> table = dx.promotion_table("add", dtypes=["int8", "uint8", "float16"])   # doctest: +SKIP
>>> table.cell("int8", "uint8").shown                                        # doctest: +SKIP
'int16'
>>> table.disagreements()                                                    # doctest: +SKIP
"""

from __future__ import annotations

import collections
import concurrent.futures
import importlib.metadata
import importlib.util
import multiprocessing
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, PrivateAttr

from dtype_explorer import catalog, dtypes
from dtype_explorer.catalog import OpEntry
from dtype_explorer.errors import InvalidSpecError, first_line
from dtype_explorer.model import ProbeResult, ProbeSpec, Record
from dtype_explorer.versions import library_version

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

#: Ops with a promotion table and a same-named function in every reference library.
OPS: tuple[str, ...] = (
    "add",
    "multiply",
    "matmul",
    "divide",
    "where",
    "maximum",
    "concatenate",
)
#: Reference library -> its usual alias: cells are labelled ``"np.add"``, ``"jnp.add"``, ...
REFERENCES: dict[str, str] = {"jax": "jnp", "numpy": "np", "torch": "torch", "tensorflow": "tnp"}
FLOATX: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")
Kind = Literal["agrees", "references-differ", "backend-specific", "keras-disagrees"]
#: Cell kinds, least to most worrying.
KINDS: tuple[Kind, ...] = ("agrees", "references-differ", "backend-specific", "keras-disagrees")
RAISES = "raises"
#: Seconds a reference library may take for a whole table (JAX compiles each dtype pair).
REFERENCE_TIMEOUT = 600.0


class RefCell(BaseModel):
    """A reference library's answer for one pair: a dtype, or the error it raised."""

    dtype: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class PromotionCell:
    """Everything known about one ``(lhs, rhs)`` pair."""

    lhs: str
    rhs: str
    results: dict[str, ProbeResult]
    references: dict[str, RefCell]

    op: str

    @property
    def documented(self) -> dict[str, str | None]:
        return {b: r.documented_dtype for b, r in self.results.items()}

    @property
    def declared(self) -> dict[str, str | None]:
        return {b: r.declared_dtype for b, r in self.results.items()}

    @property
    def observed(self) -> dict[str, str | None]:
        """Each backend's eager dtype (``None`` where the op raised)."""
        return {b: r.output_dtype if r.ok else None for b, r in self.results.items()}

    @property
    def shown(self) -> str:
        """The documented dtype most backends give (``"raises"`` where ``result_type`` raises)."""
        values = [_value(d) for d in self.documented.values()]
        return collections.Counter(values).most_common(1)[0][0] if values else RAISES

    @property
    def keras_disagrees(self) -> bool:
        """Some backend's eager or symbolic dtype differs from its own documented dtype."""
        for result in self.results.values():
            observed = _value(result.output_dtype if result.ok else None)
            if observed != _value(result.documented_dtype):
                return True
            if result.ok and result.declared_dtype not in (None, result.output_dtype):
                return True
        return False

    @property
    def kind(self) -> Kind:
        if self.keras_disagrees:
            return "keras-disagrees"
        if len({_value(d) for d in self.documented.values()}) > 1:
            return "backend-specific"
        shown = self.shown
        if any(_value(ref.dtype) != shown for ref in self.references.values()):
            return "references-differ"
        return "agrees"

    def sources(self) -> dict[str, str]:
        """Who says what: ``{"jax documented": "int16", ..., "torch.add": "raises"}``."""
        said: dict[str, str] = {}
        for backend, result in self.results.items():
            said[f"{backend} documented"] = _value(result.documented_dtype)
            if result.declared_dtype is not None:
                said[f"{backend} declared"] = result.declared_dtype
            said[f"{backend} observed"] = _value(result.output_dtype if result.ok else None)
        for library, ref in self.references.items():
            said[reference_label(library, self.op)] = _value(ref.dtype)
        return said

    def who_says(self) -> dict[str, list[str]]:
        """Each answer and the sources giving it, the shown (documented) answer first."""
        grouped: dict[str, list[str]] = {self.shown: []}
        for source, value in self.sources().items():
            grouped.setdefault(value, []).append(source)
        return {value: who for value, who in grouped.items() if who}

    def errors(self) -> dict[str, str]:
        """The error behind each ``raises``: backend or library -> ``"Type: message"``."""
        found = {
            b: f"{r.error.type}: {first_line(r.error.message)}"
            for b, r in self.results.items()
            if r.error is not None
        }
        found.update(
            {
                reference_label(k, self.op): ref.error
                for k, ref in self.references.items()
                if ref.error
            }
        )
        return found


class PromotionTable(Record):
    """The promotion table of one op under one ``floatx``; see :func:`promotion_table`."""

    op: str
    floatx: str
    dtypes: tuple[str, ...]
    backends: tuple[str, ...]
    results: tuple[ProbeResult, ...]
    #: library -> ``"lhs,rhs"`` -> its answer.
    references: dict[str, dict[str, RefCell]]
    reference_versions: dict[str, str]

    _memo: tuple[Any, Any] | None = PrivateAttr(default=None)

    @property
    def _cells(self) -> dict:
        """The cells, rebuilt whenever ``results`` is another tuple (``model_copy(update=)``)."""
        if self._memo is None or self._memo[0] is not self.results:
            self._memo = (self.results, self._build_cells())
        return self._memo[1]

    def _build_cells(self) -> dict[tuple[str, str], PromotionCell]:
        by_pair: dict[tuple[str, str], dict[str, ProbeResult]] = {}
        for result in self.results:
            lhs, rhs = result.spec.input_dtypes[-2:]
            by_pair.setdefault((lhs, rhs), {})[result.backend] = result
        return {
            (lhs, rhs): PromotionCell(
                lhs,
                rhs,
                {b: by_pair.get((lhs, rhs), {})[b] for b in self.backends},
                {lib: cells[_pair_key(lhs, rhs)] for lib, cells in self.references.items()},
                self.op,
            )
            for lhs in self.dtypes
            for rhs in self.dtypes
        }

    def cell(self, lhs: str, rhs: str) -> PromotionCell:
        try:
            return self._cells[(lhs, rhs)]
        except KeyError:
            from dtype_explorer.errors import unknown

            bad = rhs if lhs in self.dtypes else lhs
            raise unknown("dtype in this table", bad, self.dtypes) from None

    def cells(self) -> list[PromotionCell]:
        return list(self._cells.values())

    def documented_grid(self, backend: str | None = None) -> pd.DataFrame:
        """lhs x rhs: the documented dtype on ``backend`` (default: the shown one)."""
        import pandas as pd

        if backend is not None and backend not in self.backends:
            from dtype_explorer.errors import unknown

            raise unknown("backend in this table", backend, self.backends)
        grid = {
            rhs: [
                self.cell(lhs, rhs).shown
                if backend is None
                else _value(self.cell(lhs, rhs).documented[backend])
                for lhs in self.dtypes
            ]
            for rhs in self.dtypes
        }
        return pd.DataFrame(grid, index=pd.Index(self.dtypes, name="lhs")).rename_axis(
            columns="rhs"
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per pair: the shown dtype, its kind, and every backend's and library's answer."""
        import pandas as pd

        rows = []
        for cell in self.cells():
            row: dict[str, Any] = {
                "lhs": cell.lhs,
                "rhs": cell.rhs,
                "documented": cell.shown,
                "kind": cell.kind,
            }
            row.update(cell.sources())
            rows.append(row)
        return pd.DataFrame(rows)

    def disagreements(self, *, references: bool = True) -> pd.DataFrame:
        """The cells where a backend or (with ``references``) a reference library disagrees."""
        import pandas as pd

        skip = {"agrees"} if references else {"agrees", "references-differ"}
        rows = [
            {
                "lhs": c.lhs,
                "rhs": c.rhs,
                "documented": c.shown,
                "kind": c.kind,
                "who_says": "; ".join(f"{v}: {', '.join(w)}" for v, w in c.who_says().items()),
            }
            for c in self.cells()
            if c.kind not in skip
        ]
        columns = ["lhs", "rhs", "documented", "kind", "who_says"]
        return pd.DataFrame(rows, columns=columns)

    def figure(self) -> go.Figure:
        """A dtype x dtype grid of the documented dtype, marked where anyone disagrees."""
        from dtype_explorer.figures import promotion_figure

        return promotion_figure(self)

    def __repr__(self) -> str:
        return (
            f"<PromotionTable ops.{self.op.removeprefix('ops.')} over {len(self.dtypes)} dtypes, "
            f"floatx {self.floatx}>"
        )

    def _repr_html_(self) -> str:
        from dtype_explorer.figures import promotion_html

        return promotion_html(self)


def promotion_table(
    op: str = "add",
    dtypes: Sequence[str] | None = None,
    backends: Sequence[str] | str | None = None,
    *,
    floatx: str | None = None,
    references: Sequence[str] | None = None,
    timeout: float | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> PromotionTable:
    """Probe ``ops.<op>`` on every pair of ``dtypes`` on every backend, under ``floatx``.

    ``op``: a binary ``keras.ops`` function (``"add"`` or ``"ops.add"``; ``"where"`` takes a
    boolean condition and the pair). ``dtypes`` default to every Keras dtype but ``string``,
    plus the weak Python scalars ``python_int``/``python_float``/``python_bool``. ``backends``
    default to every installed one; ``references`` (``jax``, ``numpy``, ``torch``,
    ``tensorflow``) to every installed library. ``floatx`` (which decides weak floats and
    int-to-float results) defaults to this session's ``keras.config.floatx()``; the table
    records the one it was made under.
    """
    from dtype_explorer.sweep import installed, run_specs

    entry = _op_entry(op)
    names = _dtypes(dtypes)
    chosen = installed(backends)
    libraries = _references(references)
    if floatx is None:
        import keras

        floatx = keras.config.floatx()
    if floatx not in FLOATX:
        from dtype_explorer.errors import unknown

        raise unknown("floatx", floatx, FLOATX)
    pairs = [(lhs, rhs) for lhs in names for rhs in names]
    operands = [_operands(entry, lhs, rhs) for lhs, rhs in pairs]
    pending = {lib: _reference_future(lib, entry, tuple(operands)) for lib in libraries}
    specs = [
        ProbeSpec(target=entry.name, input_dtypes=ops_, backend=b, floatx=floatx)
        for ops_ in operands
        for b in chosen
    ]
    results = run_specs(
        specs, timeout=timeout, use_cache=use_cache, progress=progress, desc=entry.name
    )
    answers = {lib: _answers_or_failure(lib, future, len(pairs)) for lib, future in pending.items()}
    return PromotionTable(
        op=entry.name,
        floatx=floatx,
        dtypes=names,
        backends=chosen,
        results=tuple(results),
        references={
            lib: {_pair_key(*pair): cell for pair, cell in zip(pairs, cells)}
            for lib, cells in answers.items()
        },
        reference_versions={lib: library_version(lib) for lib in libraries},
    )


# ------------------------------------------------------------------------------ references


def reference_dtypes(
    library: str,
    function: str,
    operands: tuple[tuple[str, ...], ...],
    shapes: tuple[tuple[int, ...], ...],
    kwargs: dict[str, Any],
    list_input: bool,
) -> list[RefCell]:
    """Run ``<library>.<function>`` on samples of each operand tuple and name each result's dtype.

    Runs in a process that imports ``library`` (``"tensorflow"`` expects NumPy behaviour to be
    on already). The samples are the ones the Keras probes use (``dtypes.sample``).
    """
    module, convert, name_of = _library(library)
    fn = getattr(module, function)
    cells = []
    for names in operands:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values = [
                    _convert(convert, dtypes.sample(n, s, seed=i))
                    for i, (n, s) in enumerate(zip(names, shapes))
                ]
                out = fn(values, **kwargs) if list_input else fn(*values, **kwargs)
            cells.append(RefCell(dtype=name_of(out)))
        except Exception as error:
            cells.append(RefCell(error=f"{type(error).__name__}: {first_line(str(error))}"[:300]))
    return cells


def tf_numpy_reference_dtypes(*args: Any) -> list[RefCell]:
    """:func:`reference_dtypes` for TensorFlow with its NumPy behaviour switched on.

    This changes TensorFlow's global state for the rest of the process: call it only in a
    throwaway process.
    """
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # it warns about every op it does not cover
    tf.experimental.numpy.experimental_enable_numpy_behavior(dtype_conversion_mode="all")
    return reference_dtypes("tensorflow", *args)


def _library(library: str):
    import numpy as np

    if library == "numpy":
        return np, None, lambda out: np.asarray(out).dtype.name
    if library == "jax":
        import jax.numpy as jnp

        return jnp, jnp.asarray, lambda out: np.dtype(out.dtype).name
    if library == "torch":
        import torch

        def to_torch(array: np.ndarray) -> Any:
            name = array.dtype.name
            if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):  # no NumPy twin in torch
                return torch.from_numpy(array.astype(np.float32)).to(getattr(torch, name))
            return torch.from_numpy(array)

        return torch, to_torch, lambda out: str(out.dtype).removeprefix("torch.")
    if library == "tensorflow":
        import tensorflow as tf

        return tf.experimental.numpy, tf.constant, lambda out: out.dtype.name
    raise InvalidSpecError(f"no reference library {library!r}; valid: {', '.join(REFERENCES)}")


def _convert(convert: Any, value: Any) -> Any:
    if convert is None or isinstance(value, (bool, int, float)):
        return value  # Python scalars go in as they are: weak types
    return convert(value)


_answers: dict[tuple, list[RefCell]] = {}
_answers_lock = threading.Lock()


def _reference_future(
    library: str, entry: OpEntry, operands: tuple[tuple[str, ...], ...]
) -> concurrent.futures.Future[list[RefCell]]:
    """The library's answers for ``operands``: remembered per library version for the session."""
    from dtype_explorer.catalog_ops import LIST_INPUT_OPS

    args = (
        entry.function_name,
        operands,
        tuple(entry.shapes),
        dict(entry.kwargs),
        entry.name in LIST_INPUT_OPS,
    )
    key = (library, library_version(library), repr(args))
    with _answers_lock:
        known = _answers.get(key)
    if known is not None:
        done: concurrent.futures.Future[list[RefCell]] = concurrent.futures.Future()
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
    if library == "tensorflow":
        return _throwaway(tf_numpy_reference_dtypes, *args)
    from dtype_explorer import pool

    return pool.call(library, reference_dtypes, library, *args, timeout=REFERENCE_TIMEOUT)


def _throwaway(fn: Any, *args: Any) -> concurrent.futures.Future:
    """Run ``fn(*args)`` in a fresh process that exits afterwards."""
    executor = concurrent.futures.ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn")
    )
    future = executor.submit(fn, *args)
    executor.shutdown(wait=False)
    return future


# --------------------------------------------------------------------------------- helpers


def _op_entry(op: str) -> OpEntry:
    name = op if op.startswith("ops.") else f"ops.{op}"
    found = catalog.entry(name)
    if not isinstance(found, OpEntry) or _pair_arity(found) is None:
        raise InvalidSpecError(
            f"{name} takes no pair of inputs; promotion tables are for binary ops such as "
            f"{', '.join(OPS)}"
        )
    return found


def _pair_arity(entry: OpEntry) -> int | None:
    if entry.arity == 2:
        return 2
    if entry.arity == 3 and entry.function_name == "where":
        return 3
    return None


def _operands(entry: OpEntry, lhs: str, rhs: str) -> tuple[str, ...]:
    """The input dtypes of one probe: the pair, after ``where``'s boolean condition."""
    return (lhs, rhs) if entry.arity == 2 else ("bool", lhs, rhs)


def _dtypes(names: Sequence[str] | None) -> tuple[str, ...]:
    if names is None:
        return tuple(n for n in dtypes.all_input_dtypes() if n != "string")
    if isinstance(names, str):
        names = [names]
    chosen = tuple(dict.fromkeys(dtypes.validate(n) for n in names))
    if not chosen:
        raise InvalidSpecError("dtypes must name at least one dtype")
    return chosen


def _references(libraries: Sequence[str] | None) -> tuple[str, ...]:
    if libraries is None:  # JAX and PyTorch run in their backend's worker, so it must be allowed
        from dtype_explorer import pool

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
            from dtype_explorer.errors import unknown

            raise unknown("reference library", lib, REFERENCES)
    return tuple(dict.fromkeys(libraries))


def reference_label(library: str, op: str) -> str:
    """How a reference is named in tables: ``"jnp.add"`` for JAX's ``add``."""
    return f"{REFERENCES[library]}.{op.removeprefix('ops.')}"


def _pair_key(lhs: str, rhs: str) -> str:
    return f"{lhs},{rhs}"


def _value(dtype: str | None) -> str:
    return RAISES if dtype is None else dtype
