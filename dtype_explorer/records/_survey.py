"""A survey's answers: every target x input dtype x policy, answered by each backend, and
classified.

Each *cell* (one target, input dtype and policy) holds one answer per backend and one
classification, the way the hand-made uint8 survey sorted layers, only finer:

========================  ====================================================================
``casts-to-compute``      returns the policy's compute dtype
``keeps-input``           returns the input dtype (e.g. passes uint8 through)
``other-dtype``           returns some other dtype
``raises``                every backend raises
``diverges``              backends disagree (one raises, or they return different dtypes)
``declared-mismatch``     the symbolic (declared) dtype differs from the eager one
========================  ====================================================================

An op reads no dtype policy (nothing under ``keras/src/ops`` reads one: its answer under
``mixed_float16`` is its answer under ``float32``), so a survey of layers *and* ops probes each
op under one policy only, :func:`op_policy` (the first asked, normally ``float32``), and keeps
it in ``Survey.op_policy``. An op's other policy columns are no missing probe: every reader says
"an op reads no policy" there (:data:`ANY_POLICY`), never "absent", never a copied answer.

A layer takes arrays only, so in a survey of layers *and* ops the weak Python scalars
(``python_int``, ``python_float``, ``python_bool``) are an op's input dtypes only,
:func:`op_dtypes` (kept in ``Survey.op_dtypes``): a layer is never probed on one there, and
every reader says so for a layer's weak-scalar rows (:data:`ARRAYS_ONLY`): ``cell`` refuses
them with what is valid, a target's heatmap has no such rows, a diff no change for them.
A survey of layers alone probes what it is asked (a layer on ``python_int`` answers the
probe's refusal, classed ``raises``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dtype_explorer.dtypes import PYTHON_SCALARS
from dtype_explorer.errors import InvalidSpecError, unknown
from dtype_explorer.records import display as _display
from dtype_explorer.records._base import GroupedRecord
from dtype_explorer.records._probe import ProbeResult

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

Classification = Literal[
    "casts-to-compute", "keeps-input", "other-dtype", "raises", "diverges", "declared-mismatch"
]
CLASSIFICATIONS: tuple[Classification, ...] = (
    "casts-to-compute",
    "keeps-input",
    "other-dtype",
    "declared-mismatch",
    "diverges",
    "raises",
)


def classify_result(result: ProbeResult, compute_dtype: str) -> Classification:
    """The class of one backend's answer."""
    if not result.ok:
        return "raises"
    if result.declared_dtype is not None and result.declared_dtype != result.output_dtype:
        return "declared-mismatch"
    if result.output_dtype == compute_dtype:
        return "casts-to-compute"
    if result.output_dtype == result.spec.input_dtypes[0]:
        return "keeps-input"
    return "other-dtype"


def classify_cell(results: Iterable[ProbeResult], compute_dtype: str) -> Classification:
    """The class of a cell: ``diverges`` when backends disagree, else their shared class."""
    return combine_classes(
        (r.ok, r.output_dtype, classify_result(r, compute_dtype)) for r in results
    )


def combine_classes(answers: Iterable[tuple[bool, str | None, Classification]]) -> Classification:
    """The class of a cell from each run's (ok, output dtype, class): what
    :func:`classify_cell` decides, for runs already classed (an atlas's)."""
    answers = list(answers)
    if len({(ok, dtype if ok else None) for ok, dtype, _ in answers}) > 1:
        return "diverges"
    classes = {found for _, _, found in answers}
    if "declared-mismatch" in classes:
        return "declared-mismatch"
    return classes.pop() if classes else "raises"


#: What an op's one policy column says in a survey of layers and ops.
ANY_POLICY = "any policy: an op reads none"
#: What a layer's weak-scalar rows say in a survey of layers and ops (:func:`op_dtypes`).
ARRAYS_ONLY = "arrays only: a layer takes no Python scalar"
#: The column of :meth:`Survey.counts` that counts an op's cells in such a survey.
OPS_COLUMN = "ops (any policy)"


def is_op(target: str) -> bool:
    """Whether ``target`` is an op (``ops.add``), which takes no dtype policy."""
    return target.startswith("ops.")


def op_policy(targets: Iterable[str], policies: Sequence[str]) -> str | None:
    """The one policy a survey of ``targets`` probes its ops under: where layers are among
    the targets too and several policies are asked, the first of ``policies`` (``float32`` by
    default; where ``float32`` is not asked, the first one given), an op reading none;
    ``None`` otherwise (every target under every policy: a survey of ops alone probes each
    policy it is asked).

    >>> op_policy(["Dense", "ops.add"], ["mixed_float16", "float32"])
    'mixed_float16'
    >>> op_policy(["ops.add", "ops.abs"], ["float32", "float64"]) is None
    True
    """
    targets = list(targets)
    ops = [is_op(t) for t in targets]
    if len(policies) < 2 or all(ops) or not any(ops):
        return None
    return policies[0]


def target_policies(target: str, policies: Sequence[str], ops_under: str | None) -> tuple[str, ...]:
    """The policy axis's entries ``target`` is probed under: every one for a layer; for an op,
    the unquantized ones (an op has no weights to quantize), only ``ops_under`` where a survey
    of layers and ops set one (:func:`op_policy`).

    >>> target_policies("ops.add", ["float32", "float64", "float32+quantize=int8"], None)
    ('float32', 'float64')
    >>> target_policies("ops.add", ["float32", "float64"], "float32")
    ('float32',)
    """
    if not is_op(target):
        return tuple(policies)
    return tuple(
        p for p in policies if "+quantize=" not in p and (ops_under is None or p == ops_under)
    )


def op_dtypes(targets: Iterable[str], input_dtypes: Sequence[str]) -> tuple[str, ...]:
    """The input dtypes a survey of ``targets`` probes its ops on only: where layers and ops
    are surveyed together, the weak Python scalars among ``input_dtypes`` (a layer takes
    arrays only; asked explicitly or by default, the same), else ``()`` (a survey of layers
    alone, or of ops alone, probes every dtype it is asked).

    >>> op_dtypes(["Dense", "ops.add"], ["int8", "python_int", "python_float"])
    ('python_int', 'python_float')
    >>> op_dtypes(["Dense", "Flatten"], ["int8", "python_int"])
    ()
    """
    ops = [is_op(t) for t in targets]
    if all(ops) or not any(ops):
        return ()
    return tuple(d for d in input_dtypes if d in PYTHON_SCALARS)


def target_dtypes(
    target: str, input_dtypes: Sequence[str], ops_only: Sequence[str]
) -> tuple[str, ...]:
    """The input dtypes ``target`` is probed on: every one for an op; for a layer, all but
    ``ops_only`` (:func:`op_dtypes`).

    >>> target_dtypes("Dense", ["int8", "python_int"], ["python_int"])
    ('int8',)
    """
    return (
        tuple(input_dtypes)
        if is_op(target)
        else tuple(d for d in input_dtypes if d not in ops_only)
    )


def arrays_only(key: tuple[str, str, str], ops_only: Sequence[str]) -> bool:
    """Whether cell ``key`` (target, input dtype, policy) is a layer's on a weak Python scalar
    of a survey of layers and ops, which probes it on arrays only: no missing probe.

    >>> arrays_only(("Dense", "python_int", "float32"), ["python_int"])
    True
    >>> arrays_only(("ops.add", "python_int", "float32"), ["python_int"])
    False
    """
    target, dtype, _ = key
    return not is_op(target) and dtype in ops_only


def arrays_only_error(target: str, dtype: str, valid: Sequence[str]) -> InvalidSpecError:
    """The error of asking a layer's cell on a weak Python scalar of a survey of layers and
    ops (:func:`arrays_only`): what was asked, why there is none, what is valid."""
    return InvalidSpecError(
        f"{target} has no cell on {dtype}: {ARRAYS_ONLY}, so a survey of layers and ops "
        f"probes the weak Python scalars on its ops only; {target}'s input dtypes here: "
        f"{', '.join(valid) or 'none'}. Received: input_dtype={dtype!r}"
    )


def takes_no_policy(
    key: tuple[str, str, str], policies: Sequence[str], ops_under: str | None
) -> bool:
    """Whether cell ``key`` (target, input dtype, policy) is an op's under one of
    ``policies`` it was not probed under because it reads none (``ops_under`` set): no
    missing probe.

    >>> takes_no_policy(("ops.add", "int8", "float64"), ["float32", "float64"], "float32")
    True
    """
    target, _, policy = key
    return (
        ops_under is not None
        and is_op(target)
        and policy in policies
        and "+quantize=" not in policy
        and policy != ops_under
    )


def plan_text(
    targets: Sequence[str],
    input_dtypes: Sequence[str],
    policies: Sequence[str],
    ops_under: str | None,
    ops_only: Sequence[str] = (),
) -> str:
    """The cells a survey or an atlas plans, as a true equation: layers and ops apart where
    they take different policies (``ops_under``) or input dtypes (``ops_only``: the weak
    Python scalars, an op's only).

    >>> text = plan_text(["Dense", "ops.add", "ops.abs"], ["int8", "uint8"],
    ...                  ["float32", "float64"], "float32")
    >>> print(*text.split(" + "), sep=" +\\n")
    1 layer x 2 input dtypes x 2 policies +
    2 ops x 2 input dtypes (an op reads no policy: under float32 only) = 8 cells
    >>> text = plan_text(["Dense", "ops.add"], ["int8", "python_int"], ["float32"], None,
    ...                  ["python_int"])
    >>> print(*text.split(" ("), sep=" (\\n")
    1 layer x 1 input dtype x 1 policy + 1 op x 2 input dtypes x 1 policy (
    1 weak Python scalar too: a layer takes arrays only) = 3 cells
    """

    def shape(t: str) -> tuple[int, int]:
        return len(target_dtypes(t, input_dtypes, ops_only)), len(
            target_policies(t, policies, ops_under)
        )

    groups: dict[bool, list[str]] = {}
    for t in targets:
        groups.setdefault(is_op(t), []).append(t)
    cells = sum(d * p for d, p in map(shape, targets))
    if len({shape(ts[0]) for ts in groups.values()}) <= 1:
        return (
            f"{_n(len(targets), 'target')} x {_n(len(input_dtypes), 'input dtype')} x "
            f"{_n(len(policies), 'policy', 'policies')} = {_n(cells, 'cell')}"
        )
    (layer_d, layer_p), (op_d, op_p) = shape(groups[False][0]), shape(groups[True][0])
    why = [f"{_n(op_d - layer_d, 'weak Python scalar')} too: a layer takes arrays only"] * (
        op_d != layer_d
    )
    if ops_under is not None:
        why.append(f"an op reads no policy: under {ops_under} only")
    elif op_p != layer_p:
        why.append("an op is not quantized")
    return (
        f"{_n(len(groups[False]), 'layer')} x {_n(layer_d, 'input dtype')} x "
        f"{_n(layer_p, 'policy', 'policies')} + {_n(len(groups[True]), 'op')} x "
        f"{_n(op_d, 'input dtype')}"
        + (f" x {_n(op_p, 'policy', 'policies')}" if op_p != 1 or ops_under is None else "")
        + f" ({'; '.join(why)}) = {_n(cells, 'cell')}"
    )


class PlannedCells:
    """What a survey or an atlas planned for each target (a mixin of ``Survey`` and
    ``Atlas``, read from their ``targets``, ``input_dtypes``, ``policies``, ``op_policy`` and
    ``op_dtypes``): one owner of the rules above for both."""

    def policies_of(self, target: str) -> tuple[str, ...]:
        """The policy axis's entries ``target`` was probed under (:func:`target_policies`)."""
        return target_policies(target, self.policies, self.op_policy)

    def dtypes_of(self, target: str) -> tuple[str, ...]:
        """The input dtypes ``target`` was probed on (:func:`target_dtypes`): a layer of a
        survey of layers and ops, none of the weak Python scalars."""
        return target_dtypes(target, self.input_dtypes, self.op_dtypes)

    def takes_no_policy(self, key: tuple[str, str, str]) -> bool:
        """Whether cell ``key`` (target, input dtype, policy) is an op's under a policy it was
        not probed under because it reads none: no missing probe."""
        return takes_no_policy(key, self.policies, self.op_policy)

    def arrays_only(self, key: tuple[str, str, str]) -> bool:
        """Whether cell ``key`` is a layer's on a weak Python scalar, which a survey of layers
        and ops does not probe (:func:`arrays_only`): no missing probe."""
        return arrays_only(key, self.op_dtypes)

    def unplanned(self, key: tuple[str, str, str]) -> bool:
        """Whether cell ``key`` was left out by plan (an op's other policy, a layer's weak
        scalar), not missing: a diff finds no change there."""
        return self.takes_no_policy(key) or self.arrays_only(key)

    def planned_cells(self) -> int:
        """How many cells the plan has (:meth:`plan_text`'s right-hand side)."""
        return sum(len(self.policies_of(t)) * len(self.dtypes_of(t)) for t in self.targets)

    def plan_text(self) -> str:
        """The cells planned, as a true equation (:func:`plan_text`)."""
        return plan_text(
            self.targets, self.input_dtypes, self.policies, self.op_policy, self.op_dtypes
        )


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def axis_policy(policy: str, quantize: str | None = None) -> str:
    """The policy axis's entry for a cell: ``policy``, or for a layer quantized by the probe
    (``ProbeSpec.quantize``) ``"<policy>+quantize=<mode>"``.

    ``quantize=`` is folded onto the policy axis rather than made a fourth: ``quantize()``
    turns a layer's policy into ``<mode>_from_<policy>`` and its answer is classed against
    that policy's compute dtype, so a quantized cell is a policy column of its own in every
    view (table, heatmap menu, counts, diff, atlas). The label keeps it apart from a layer
    *built* under ``int8_from_float32`` (whose weights Keras creates quantized).

    >>> axis_policy("float32"), axis_policy("mixed_bfloat16", "int8")
    ('float32', 'mixed_bfloat16+quantize=int8')
    """
    return policy if quantize is None else f"{policy}+quantize={quantize}"


@dataclass(frozen=True)
class SurveyCell:
    """One target, input dtype and policy, answered by each backend."""

    target: str
    input_dtype: str
    policy: str
    compute_dtype: str
    results: dict[str, ProbeResult]

    @property
    def classification(self) -> Classification:
        return classify_cell(self.results.values(), self.compute_dtype)

    def backend_classification(self, backend: str) -> Classification:
        return classify_result(self.results[backend], self.compute_dtype)


class Survey(PlannedCells, GroupedRecord):
    """The answers of a survey, with views: a table, a heatmap, JSON, HTML and a diff."""

    targets: tuple[str, ...]
    input_dtypes: tuple[str, ...]
    policies: tuple[str, ...]
    backends: tuple[str, ...]
    #: How each target ran (``ProbeSpec.mode``). With several, a cell's results are keyed
    #: ``"<backend>/<mode>"`` and a cell whose answer depends on the mode is ``diverges``.
    modes: tuple[str, ...] = ("call",)
    #: policy -> its compute dtype, as Keras's ``DTypePolicy`` names it.
    compute_dtypes: dict[str, str]
    floatx: str | None = None
    created: str = ""
    elapsed_s: float = 0.0
    results: tuple[ProbeResult, ...]
    #: Which Keras answered (``ProbeSpec.engine``): ``None`` is the installed Keras.
    engine: str | None = None
    #: The quantization modes asked (``None``: the float layer), each folded onto the policy
    #: axis as ``"<policy>+quantize=<mode>"`` (:func:`axis_policy`).
    quantize: tuple[str | None, ...] = (None,)
    #: In a survey of layers and ops, the one policy its ops were probed under (an op reads
    #: none: :func:`op_policy`); ``None``: every target under every policy.
    op_policy: str | None = None
    #: In a survey of layers and ops, the input dtypes only its ops were probed on (the weak
    #: Python scalars: a layer takes arrays only, :func:`op_dtypes`); ``()``: every target on
    #: every input dtype.
    op_dtypes: tuple[str, ...] = ()

    def _build_cells(self) -> dict[tuple[str, str, str], SurveyCell]:
        grouped: dict[tuple[str, str, str], dict[str, ProbeResult]] = {}
        for r in self.results:
            key = (
                r.spec.target,
                r.spec.input_dtypes[0],
                axis_policy(r.spec.policy, r.spec.quantize),
            )
            run = r.backend if len(self.modes) == 1 else f"{r.backend}/{r.spec.mode}"
            grouped.setdefault(key, {})[run] = r
        return {
            key: SurveyCell(*key, self.compute_dtypes[key[2]], by_backend)
            for key, by_backend in grouped.items()
        }

    def cells(self) -> list[SurveyCell]:
        return list(self._cells.values())

    def cell(self, target: str, input_dtype: str, policy: str | None = None) -> SurveyCell:
        """The cell for ``target`` on ``input_dtype`` under ``policy`` (default: the first).

        An op of a survey of layers and ops was probed under one policy only,
        ``op_policy`` (it reads none): asked under another of the survey's policies, it
        answers that one cell, probed once, whose ``policy`` and ``compute_dtype`` say
        which policy it ran under (``survey.cell("ops.add", "int32", "mixed_float16")
        .policy == "float32"``), classed against that policy's compute dtype.

        A layer of a survey of layers and ops was probed on arrays only (``op_dtypes``: the
        weak Python scalars are an op's): asked on one (``"python_int"``), it raises
        ``InvalidSpecError`` saying so, with the layer's input dtypes (no answer to give,
        none made up).
        """
        key = (target, input_dtype, policy or self.policies[0])
        if self.takes_no_policy(key):
            key = (target, input_dtype, str(self.op_policy))
        if self.arrays_only(key):
            raise arrays_only_error(target, input_dtype, self.dtypes_of(target))
        if key not in self._cells:
            for value, valid, kind in zip(
                key, (self.targets, self.input_dtypes, self.policies), ("target", "dtype", "policy")
            ):
                if value not in valid:
                    raise unknown(f"{kind} in this survey", value, valid)
        return self._cells[key]

    def to_frame(
        self, *, per: Literal["cell", "probe"] = "cell", first_change: bool = False
    ) -> pd.DataFrame:
        """A table: one row per cell with a column per backend (``per="cell"``), or one row
        per probe with every view (``per="probe"``).

        An op of a survey of layers and ops has its rows under ``op_policy`` only (the one
        policy it was probed under: it reads none); ``counts()`` counts them apart. A layer
        there has no rows on the weak Python scalars (``op_dtypes``: it takes arrays only).

        ``first_change`` adds, from each probe's op trace, the first op that changed a dtype
        (``ops.nn.conv``): a ``<backend> first change`` column per backend per cell, or
        ``first_change``, ``first_change_note`` and ``first_change_at`` (its line) per probe.
        """
        import pandas as pd

        if per not in ("cell", "probe"):
            raise InvalidSpecError(f"per must be 'cell' or 'probe', not {per!r}")
        rows = []
        for cell in self.cells():
            base = {
                "target": cell.target,
                "input_dtype": cell.input_dtype,
                "policy": cell.policy,
                "compute_dtype": cell.compute_dtype,
                "classification": cell.classification,
            }
            if per == "cell":
                row = base | {b: r.outcome for b, r in cell.results.items()}
                if first_change:
                    for b, r in cell.results.items():
                        step = r.first_dtype_change()
                        row[f"{b} first change"] = step.op if step is not None else None
                rows.append(row)
                continue
            for backend, r in cell.results.items():
                rows.append(
                    base
                    | {
                        "backend": backend,
                        "backend_classification": cell.backend_classification(backend),
                        "status": r.status,
                        "output_dtype": r.output_dtype,
                        "documented_dtype": r.documented_dtype,
                        "declared_dtype": r.declared_dtype,
                        "verdict": r.verdict,
                        "cast_path": r.path_text(),
                        "error": f"{r.error.type}: {r.error.message}" if r.error else None,
                        "cached": r.cached,
                    }
                    | (_first_change_columns(r) if first_change else {})
                )
        return pd.DataFrame(rows)

    def counts(self) -> pd.DataFrame:
        """How many cells fall in each class, per policy; in a survey of layers and ops, the
        ops' cells (each probed under ``op_policy`` only: an op reads no policy) in a column
        of their own, :data:`OPS_COLUMN`, so that each policy's column counts the same cells
        (a layer's, on arrays only: the weak Python scalars, ``op_dtypes``, are in the ops'
        column alone).
        """
        frame = self.to_frame()
        if self.op_policy is not None:
            ops = frame["target"].str.startswith("ops.")
            frame["policy"] = frame["policy"].where(~ops, OPS_COLUMN)
        table = frame.groupby(["classification", "policy"]).size().unstack(fill_value=0)
        order = [c for c in CLASSIFICATIONS if c in table.index]
        columns = [*self.policies, OPS_COLUMN]
        return table.loc[order, [p for p in columns if p in table.columns]]

    def figure(self, policy: str | None = None, *, theme: str | None = None) -> go.Figure:
        """A heatmap, targets x input dtypes, coloured by class; hover shows the cast path and
        error on each backend. Several policies: a menu switches between them. ``theme``:
        ``"light"`` or ``"dark"`` (the page's colours from the palette); ``None`` follows
        plotly's default template (dark where it is ``plotly_dark``)."""
        if policy is not None and policy not in self.policies:
            raise unknown("policy in this survey", policy, self.policies)
        return _display.figure(self, policy=policy, theme=theme)

    def diff(self, other: Survey, *, outcomes_only: bool = False) -> pd.DataFrame:
        """What changed from ``self`` to ``other`` (two Keras releases, or two engines such as
        ``"tf_keras"`` and the installed Keras 3: a migration table): one row per cell and
        backend whose outcome or class differs, or which only one survey has. An op's cell
        under a policy one side did not probe it under (a survey of layers and ops probes an
        op under ``op_policy`` only: it reads none), or a layer's on a weak Python scalar one
        side did not probe (``op_dtypes``: a layer takes arrays only), is no change.

        Args:
            other: the survey to compare with (the "after" side).
            outcomes_only: keep only the rows whose outcome (the dtype, or the error) differs,
                leaving out those where only the class changed.

        Returns:
            A frame with ``target, input_dtype, policy, backend, before, after, before_class,
            after_class``; ``frame.attrs["before"]`` and ``["after"]`` name which Keras answered
            on each side (``"tf_keras 2.21.0"``, ``"keras 3.15.1"``).

        >>> import dtype_explorer as dx
        >>> k2 = dx.survey(targets=["Discretization"], input_dtypes=["float32"],
        ...                policies=["float32"], backends=["tensorflow"],
        ...                engine="tf_keras")                               # doctest: +SKIP
        >>> k3 = dx.survey(targets=["Discretization"], input_dtypes=["float32"],
        ...                policies=["float32"], backends=["tensorflow"])   # doctest: +SKIP
        >>> k2.diff(k3)[["target", "before", "after"]].values.tolist()       # doctest: +SKIP
        [['Discretization', 'int64', 'int32']]
        """
        import pandas as pd

        columns = ["target", "input_dtype", "policy", "backend", "before", "after"]
        columns += ["before_class", "after_class"]
        rows = []
        keys = list(dict.fromkeys([*self._cells, *other._cells]))
        for key in keys:
            old, new = self._cells.get(key), other._cells.get(key)
            if (old is None and self.unplanned(key)) or (new is None and other.unplanned(key)):
                continue
            backends = dict.fromkeys([*(old.results if old else {}), *(new.results if new else {})])
            for backend in backends:
                before = _described(old, backend)
                after = _described(new, backend)
                if before[0] != after[0] or (before != after and not outcomes_only):
                    rows.append([*key, backend, before[0], after[0], before[1], after[1]])
        frame = pd.DataFrame(rows, columns=columns)
        frame.attrs.update(before=self.keras_label(), after=other.keras_label())
        return frame

    def keras_label(self) -> str:
        """Which Keras answered, with its release: ``"keras 3.15.1"``, ``"tf_keras 2.21.0"``
        (from the results' versions; the engine's name when there are none)."""
        for result in self.results:
            for package in ("tf_keras", "keras"):
                if package in result.versions:
                    return f"{package} {result.versions[package]}"
        return self.engine or "keras (installed)"

    def to_html(self) -> str:
        """A standalone HTML page: the heatmap (plotly.js included) and the class counts."""
        return _display.page(self)

    def save(self, path: str | Path) -> Path:
        """Write ``.html`` or ``.json`` (chosen by the suffix); returns the path."""
        path = Path(path)
        writers = {".html": self.to_html, ".htm": self.to_html, ".json": self.to_json}
        if path.suffix.lower() not in writers:
            raise InvalidSpecError(
                f"cannot save a survey as {path.suffix or 'a file without suffix'!r}; "
                "use .html or .json"
            )
        path.write_text(writers[path.suffix.lower()](), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Survey:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def __repr__(self) -> str:
        return (
            f"<Survey {len(self.targets)} targets x {len(self.input_dtypes)} dtypes x "
            f"{len(self.policies)} policies on {', '.join(self.backends)}>"
        )


def _described(cell: SurveyCell | None, backend: str) -> tuple[str, str]:
    if cell is None or backend not in cell.results:
        return "absent", "absent"
    return cell.results[backend].outcome, cell.backend_classification(backend)


def _first_change_columns(result: ProbeResult) -> dict[str, str | None]:
    step = result.first_dtype_change()
    if step is None:
        return {"first_change": None, "first_change_note": None, "first_change_at": None}
    return {
        "first_change": step.op,
        "first_change_note": step.change_text(),
        "first_change_at": step.source.short if step.source else None,
    }
