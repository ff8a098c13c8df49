"""A promotion table's answers: for every pair of input dtypes, what each backend documents,
declares and returns for one op, beside the reference libraries' answers, and each pair's kind.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from dtype_explorer.backends import LIBRARIES
from dtype_explorer.errors import first_line, unknown
from dtype_explorer.records import display as _display
from dtype_explorer.records._base import GroupedRecord
from dtype_explorer.records._probe import NO_COUNTERPART, ProbeResult

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

#: Reference library -> its usual alias: cells are labelled ``"np.add"``, ``"jnp.add"``, ...
#: (the one map, :data:`dtype_explorer.backends.LIBRARIES`).
REFERENCES: dict[str, str] = LIBRARIES
Kind = Literal["agrees", "references-differ", "backend-specific", "keras-disagrees"]
#: Cell kinds, least to most worrying.
KINDS: tuple[Kind, ...] = ("agrees", "references-differ", "backend-specific", "keras-disagrees")
RAISES = "raises"
#: The column of a unary op's table: one row per input dtype.
UNARY = "x"
#: A reference path's module -> the alias it is shown with (``jax.numpy.add`` -> ``jnp.add``).
_PATH_ALIASES = (
    ("tensorflow.experimental.numpy.", "tnp."),
    ("jax.numpy.", "jnp."),
    ("numpy.", "np."),
)


class RefCell(BaseModel):
    """A reference library's answer for one pair: a dtype, the error it raised, or ``missing``
    (the library has no function of the same meaning)."""

    dtype: str | None = None
    error: str | None = None
    missing: str | None = None


@dataclass(frozen=True)
class PromotionCell:
    """Everything known about one ``(lhs, rhs)`` pair."""

    lhs: str
    rhs: str
    results: dict[str, ProbeResult]
    references: dict[str, RefCell]

    op: str
    paths: dict[str, str | None] = field(default_factory=dict)

    @property
    def answered(self) -> dict[str, RefCell]:
        """The references that have a counterpart (a dtype or an error)."""
        return {lib: ref for lib, ref in self.references.items() if ref.missing is None}

    @property
    def documented(self) -> dict[str, str | None]:
        return {b: _rule(r) for b, r in self.results.items()}

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
        """Some backend's probe judged Keras wrong here (:func:`verdict_disagrees`: the
        probe's own verdict, ``deviates`` or ``declared-mismatch``, is the one judgement)."""
        return any(verdict_disagrees(result) for result in self.results.values())

    @property
    def kind(self) -> Kind:
        if self.keras_disagrees:
            return "keras-disagrees"
        if len({_value(d) for d in self.documented.values()}) > 1:
            return "backend-specific"
        shown = self.shown
        if any(_value(ref.dtype) != shown for ref in self.answered.values()):
            return "references-differ"
        return "agrees"

    def sources(self) -> dict[str, str]:
        """Who says what: ``{"jax documented": "int16", ..., "torch.add": "raises"}``."""
        said: dict[str, str] = {}
        for backend, result in self.results.items():
            said[f"{backend} documented"] = _value(_rule(result))
            if result.declared_dtype is not None:
                said[f"{backend} declared"] = result.declared_dtype
            said[f"{backend} observed"] = _value(result.output_dtype if result.ok else None)
        for library, ref in self.references.items():
            label = reference_label(library, self.op, self.paths.get(library))
            said[label] = NO_COUNTERPART if ref.missing else _value(ref.dtype)
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
                reference_label(k, self.op, self.paths.get(k)): ref.error
                for k, ref in self.references.items()
                if ref.error
            }
        )
        return found


class PromotionTable(GroupedRecord):
    """The promotion table of one op under one ``floatx``; see :func:`promotion_table`."""

    op: str
    floatx: str
    dtypes: tuple[str, ...]
    backends: tuple[str, ...]
    results: tuple[ProbeResult, ...]
    #: library -> ``"lhs,rhs"`` -> its answer.
    references: dict[str, dict[str, RefCell]]
    reference_versions: dict[str, str]
    #: 2 for a binary op (a dtype x dtype grid), 1 for a unary op (one row per dtype).
    arity: int = 2
    #: library -> the function compared (``"torch.amax"``), ``None`` where there is none.
    reference_paths: dict[str, str | None] = {}
    #: Which Keras answered (``ProbeSpec.engine``): ``None`` is the installed Keras.
    engine: str | None = None

    @property
    def rhs_dtypes(self) -> tuple[str, ...]:
        """The columns: every dtype for a binary op, the one column ``"x"`` for a unary op."""
        return self.dtypes if self.arity == 2 else (UNARY,)

    def _build_cells(self) -> dict[tuple[str, str], PromotionCell]:
        by_pair: dict[tuple[str, str], dict[str, ProbeResult]] = {}
        for result in self.results:
            if self.arity == 1:
                lhs, rhs = result.spec.input_dtypes[0], UNARY
            else:
                lhs, rhs = result.spec.input_dtypes[-2:]
            by_pair.setdefault((lhs, rhs), {})[result.backend] = result
        return {
            (lhs, rhs): PromotionCell(
                lhs,
                rhs,
                {b: by_pair.get((lhs, rhs), {})[b] for b in self.backends},
                {lib: cells[pair_key(lhs, rhs)] for lib, cells in self.references.items()},
                self.op,
                dict(self.reference_paths),
            )
            for lhs in self.dtypes
            for rhs in self.rhs_dtypes
        }

    def cell(self, lhs: str, rhs: str | None = None) -> PromotionCell:
        """The cell of ``(lhs, rhs)``; a unary op's table takes the input dtype alone."""
        if rhs is None:
            if self.arity != 1:
                raise ValueError(f"{self.op} is binary: give both dtypes, cell(lhs, rhs)")
            rhs = UNARY
        try:
            return self._cells[(lhs, rhs)]
        except KeyError:
            bad = rhs if lhs in self.dtypes else lhs
            raise unknown("dtype in this table", bad, self.dtypes) from None

    def cells(self) -> list[PromotionCell]:
        return list(self._cells.values())

    def documented_grid(self, backend: str | None = None) -> pd.DataFrame:
        """lhs x rhs: the documented dtype on ``backend`` (default: the shown one)."""
        import pandas as pd

        if backend is not None and backend not in self.backends:
            raise unknown("backend in this table", backend, self.backends)
        grid = {
            rhs: [
                self.cell(lhs, rhs).shown
                if backend is None
                else _value(self.cell(lhs, rhs).documented[backend])
                for lhs in self.dtypes
            ]
            for rhs in self.rhs_dtypes
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

    def figure(self, *, theme: str | None = None) -> go.Figure:
        """A dtype x dtype grid of the documented dtype, marked where anyone disagrees.
        ``theme``: ``"light"`` or ``"dark"``; ``None`` follows plotly's default template."""
        return _display.figure(self, theme=theme)

    def __repr__(self) -> str:
        return (
            f"<PromotionTable ops.{self.op.removeprefix('ops.')} over {len(self.dtypes)} dtypes, "
            f"floatx {self.floatx}>"
        )


def reference_label(library: str, op: str, path: str | None = None) -> str:
    """How a reference is named in tables: ``"jnp.add"`` for JAX's ``add``; with the path of the
    function compared, its usual spelling (``"torch.amax"``, ``"scipy.special.expit"``).

    >>> reference_label("torch", "ops.max", "torch.amax"), reference_label("jax", "ops.add")
    ('torch.amax', 'jnp.add')
    """
    if path:
        for module, alias in _PATH_ALIASES:
            if path.startswith(module):
                return alias + path.removeprefix(module)
        return path
    return f"{REFERENCES[library]}.{op.rsplit('.', 1)[-1]}"


def pair_key(lhs: str, rhs: str) -> str:
    return f"{lhs},{rhs}"


#: The probe verdicts that make a cell ``keras-disagrees``.
DISAGREEING_VERDICTS = ("deviates", "declared-mismatch")


def verdict_disagrees(result: ProbeResult) -> bool:
    """Whether the probe's verdict says Keras disagrees with what it expects here: observed
    differs from the expectation the probe chose (``deviates``), or from the declared dtype
    (``declared-mismatch``), or the op raised where Keras documents a dtype. The table judges
    with the probe's verdict, never its own rule.

    >>> from dtype_explorer.records import ProbeSpec
    >>> r = ProbeResult(spec=ProbeSpec(target="ops.maximum"), backend="torch", status="ok",
    ...                 output_dtype="float32", documented_dtype="float64", verdict="deviates")
    >>> verdict_disagrees(r), verdict_disagrees(r.model_copy(update={"verdict": "undocumented"}))
    (True, False)
    """
    if result.verdict in DISAGREEING_VERDICTS:
        return True
    return result.status == "error" and result.documented_dtype is not None


def _value(dtype: str | None) -> str:
    return RAISES if dtype is None else dtype


def _rule(result: ProbeResult) -> str | None:
    """Keras's own rule for a cell, ``result_type`` (``None`` where it raises), even where the
    probe's verdict is judged by an array library (``keras_run/_expect.py``)."""
    said = result.expectation("result_type")
    return said.dtype if said is not None else result.documented_dtype
