"""The layer survey: every target x input dtype x policy x backend, probed and classified.

Each *cell* (one target, input dtype and policy) gets one probe per backend, through the worker
pool and its cache, and one classification, the way the hand-made uint8 survey sorted layers,
only finer:

========================  ====================================================================
``casts-to-compute``      returns the policy's compute dtype
``keeps-input``           returns the input dtype (e.g. passes uint8 through)
``other-dtype``           returns some other dtype
``raises``                every backend raises
``diverges``              backends disagree (one raises, or they return different dtypes)
``declared-mismatch``     the symbolic (declared) dtype differs from the eager one
========================  ====================================================================

>>> import dtype_explorer as dx
>>> s = dx.survey(["Dense", "Flatten"], ["uint8", "float64"], ["float32"])    # doctest: +SKIP
>>> s.to_frame()                                                              # doctest: +SKIP
>>> s.save("survey.html")                                                     # doctest: +SKIP
"""

from __future__ import annotations

import concurrent.futures
import datetime
import functools
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import PrivateAttr

from dtype_explorer import catalog, dtypes
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.model import ProbeResult, ProbeSpec, Record

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
DEFAULT_POLICIES: tuple[str, ...] = ("float32", "mixed_float16", "mixed_bfloat16", "float64")
#: Probes in flight per backend: enough to keep every worker busy, few enough to stop quickly.
WINDOW = 32


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
    results = list(results)
    if len({(r.ok, r.output_dtype if r.ok else None) for r in results}) > 1:
        return "diverges"
    classes = {classify_result(r, compute_dtype) for r in results}
    if "declared-mismatch" in classes:
        return "declared-mismatch"
    return classes.pop() if classes else "raises"


def outcome(result: ProbeResult) -> str:
    """``"float32"``, or ``"raises ValueError"`` (``"timeout"``, ``"crashed"``)."""
    if result.ok:
        return str(result.output_dtype)
    if result.status in ("timeout", "crashed"):
        return result.status
    return f"raises {result.error.type}" if result.error else "raises"


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


class Survey(Record):
    """The answers of a survey, with views: a table, a heatmap, JSON, HTML and a diff."""

    targets: tuple[str, ...]
    input_dtypes: tuple[str, ...]
    policies: tuple[str, ...]
    backends: tuple[str, ...]
    #: policy -> its compute dtype, as Keras's ``DTypePolicy`` names it.
    compute_dtypes: dict[str, str]
    floatx: str | None = None
    created: str = ""
    elapsed_s: float = 0.0
    results: tuple[ProbeResult, ...]

    _memo: tuple[Any, Any] | None = PrivateAttr(default=None)

    @property
    def _cells(self) -> dict:
        """The cells, rebuilt whenever ``results`` is another tuple (``model_copy(update=)``)."""
        if self._memo is None or self._memo[0] is not self.results:
            self._memo = (self.results, self._build_cells())
        return self._memo[1]

    def _build_cells(self) -> dict[tuple[str, str, str], SurveyCell]:
        grouped: dict[tuple[str, str, str], dict[str, ProbeResult]] = {}
        for r in self.results:
            key = (r.spec.target, r.spec.input_dtypes[0], r.spec.policy)
            grouped.setdefault(key, {})[r.backend] = r
        return {
            key: SurveyCell(*key, self.compute_dtypes[key[2]], by_backend)
            for key, by_backend in grouped.items()
        }

    def cells(self) -> list[SurveyCell]:
        return list(self._cells.values())

    def cell(self, target: str, input_dtype: str, policy: str | None = None) -> SurveyCell:
        """The cell for ``target`` on ``input_dtype`` under ``policy`` (default: the first)."""
        key = (target, input_dtype, policy or self.policies[0])
        if key not in self._cells:
            from dtype_explorer.errors import unknown

            for value, valid, kind in zip(
                key, (self.targets, self.input_dtypes, self.policies), ("target", "dtype", "policy")
            ):
                if value not in valid:
                    raise unknown(f"{kind} in this survey", value, valid)
        return self._cells[key]

    def to_frame(self, *, per: Literal["cell", "probe"] = "cell") -> pd.DataFrame:
        """A table: one row per cell with a column per backend (``per="cell"``), or one row
        per probe with every view (``per="probe"``)."""
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
                rows.append(base | {b: outcome(r) for b, r in cell.results.items()})
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
                        "cast_path": cast_path_text(r),
                        "error": f"{r.error.type}: {r.error.message}" if r.error else None,
                        "cached": r.cached,
                    }
                )
        return pd.DataFrame(rows)

    def counts(self) -> pd.DataFrame:
        """How many cells fall in each class, per policy."""
        frame = self.to_frame()
        table = frame.groupby(["classification", "policy"]).size().unstack(fill_value=0)
        order = [c for c in CLASSIFICATIONS if c in table.index]
        return table.loc[order, [p for p in self.policies if p in table.columns]]

    def figure(self, policy: str | None = None) -> go.Figure:
        """A heatmap, targets x input dtypes, coloured by class; hover shows the cast path and
        error on each backend. Several policies: a menu switches between them."""
        from dtype_explorer.figures import survey_figure

        return survey_figure(self, policy=policy)

    def diff(self, other: Survey) -> pd.DataFrame:
        """What changed from ``self`` to ``other`` (e.g. two Keras versions): one row per cell
        and backend whose outcome or class differs, or which only one survey has."""
        import pandas as pd

        columns = ["target", "input_dtype", "policy", "backend", "before", "after"]
        columns += ["before_class", "after_class"]
        rows = []
        keys = list(dict.fromkeys([*self._cells, *other._cells]))
        for key in keys:
            old, new = self._cells.get(key), other._cells.get(key)
            backends = dict.fromkeys([*(old.results if old else {}), *(new.results if new else {})])
            for backend in backends:
                before = _described(old, backend)
                after = _described(new, backend)
                if before != after:
                    rows.append([*key, backend, before[0], after[0], before[1], after[1]])
        return pd.DataFrame(rows, columns=columns)

    def to_html(self) -> str:
        """A standalone HTML page: the heatmap (plotly.js included) and the class counts."""
        from dtype_explorer.figures import survey_html

        return survey_html(self)

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

    def _repr_html_(self) -> str:
        from dtype_explorer.figures import survey_summary_html

        return survey_summary_html(self)


def survey(
    targets: Sequence[str] | None = None,
    input_dtypes: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    backends: Sequence[str] | str | None = None,
    *,
    floatx: str | None = None,
    timeout: float | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> Survey:
    """Probe every target on every input dtype under every policy on every backend.

    Defaults: every catalog layer; every Keras dtype (plus the weak Python scalars when an op
    is among the targets: layers take arrays only); ``float32``, ``mixed_float16``,
    ``mixed_bfloat16`` and ``float64``; every installed backend. Backends run in parallel,
    one worker each; every probe goes through the cache, so a repeated survey is fast.
    """
    from dtype_explorer.api import make_spec, validate_policy

    names = _targets(targets)
    dtype_names = _input_dtypes(input_dtypes, names)
    policy_names = tuple(
        dict.fromkeys(validate_policy(p) for p in _listed(policies, DEFAULT_POLICIES))
    )
    backend_names = installed(backends)
    specs = [
        make_spec(t, d, p, b, floatx=floatx)
        for t in names
        for d in dtype_names
        for p in policy_names
        for b in backend_names
    ]
    started = time.perf_counter()
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results = run_specs(specs, timeout=timeout, use_cache=use_cache, progress=progress)
    return Survey(
        targets=names,
        input_dtypes=dtype_names,
        policies=policy_names,
        backends=backend_names,
        compute_dtypes={p: compute_dtype(p) for p in policy_names},
        floatx=floatx,
        created=created,
        elapsed_s=round(time.perf_counter() - started, 3),
        results=tuple(results),
    )


def run_specs(
    specs: Sequence[ProbeSpec],
    *,
    timeout: float | None = None,
    use_cache: bool = True,
    progress: bool = True,
    desc: str = "survey",
) -> list[ProbeResult]:
    """Answer ``specs`` through the pool, every backend at once, in ``specs`` order.

    At most ``WINDOW`` probes per backend are in flight, so an interrupt stops soon and
    cancels the rest.
    """
    from dtype_explorer import pool

    results: list[ProbeResult | None] = [None] * len(specs)
    backends = {s.backend for s in specs}
    limit = WINDOW * max(1, len(backends))
    queue: Iterator[tuple[int, ProbeSpec]] = iter(enumerate(specs))
    running: dict[concurrent.futures.Future[ProbeResult], int] = {}
    with progress_bar(total=len(specs), desc=desc, enabled=progress) as bar:
        try:
            while True:
                for index, spec in queue:
                    future = pool.submit(spec, timeout=timeout, use_cache=use_cache)
                    if future.done():
                        results[index] = future.result()
                        bar.update(1)
                        continue
                    running[future] = index
                    if len(running) >= limit:
                        break
                if not running:
                    break
                done, _ = concurrent.futures.wait(
                    running, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    results[running.pop(future)] = future.result()
                bar.update(len(done))
        except BaseException:
            for future in running:
                future.cancel()
            raise
    return [r for r in results if r is not None]


def progress_bar(*, total: int, desc: str, enabled: bool = True) -> Any:
    """A notebook-aware progress bar (``tqdm.auto``)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, unit="probe")


def installed(backends: Sequence[str] | str | None) -> tuple[str, ...]:
    """``backends`` (``None`` or ``"all"``: every installed one), each checked to be installed
    and allowed, so that a survey fails before it starts rather than half-way."""
    from dtype_explorer import pool
    from dtype_explorer.api import resolve_backends

    available = pool.installed_backends()
    names = resolve_backends("all" if backends is None else backends)
    for name in names:
        if name not in available:
            from dtype_explorer.errors import unknown

            raise unknown("backend (installed and allowed)", name, available)
    return tuple(str(n) for n in names)


@functools.cache
def compute_dtype(policy: str) -> str:
    """The compute dtype of ``policy``, as Keras's ``DTypePolicy`` says."""
    import keras

    return str(keras.dtype_policies.get(policy).compute_dtype)


def cast_path_text(result: ProbeResult) -> str:
    """The cast path on one line: ``uint8 -> float32 (autocast) -> float32 (output)``."""
    parts: list[str] = []
    for step in result.cast_path:
        if step.stage == "input" or step.changed or step.stage == "output":
            label = step.name or step.stage
            parts.append(f"{step.dtype} ({label})" if step.stage != "input" else step.dtype)
    return " -> ".join(parts)


def _described(cell: SurveyCell | None, backend: str) -> tuple[str, str]:
    if cell is None or backend not in cell.results:
        return "absent", "absent"
    return outcome(cell.results[backend]), cell.backend_classification(backend)


def _targets(targets: Sequence[str] | None) -> tuple[str, ...]:
    if targets is None:
        return tuple(e.name for e in catalog.layers())
    return tuple(dict.fromkeys(catalog.entry(t).name for t in _listed(targets, ())))


def _input_dtypes(names: Sequence[str] | None, targets: tuple[str, ...]) -> tuple[str, ...]:
    if names is None:
        with_ops = any(t.startswith("ops.") for t in targets)
        return dtypes.all_input_dtypes() if with_ops else dtypes.keras_dtypes()
    return tuple(dict.fromkeys(dtypes.validate(n) for n in _listed(names, ())))


def _listed(values: Sequence[str] | str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if values is None:
        return default
    listed = (values,) if isinstance(values, str) else tuple(values)
    if not listed:
        raise InvalidSpecError("an empty list was given; leave it out (None) for the default")
    return listed
