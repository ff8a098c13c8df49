"""The dtype atlas: a survey made into a report, and the diff of two atlases.

An ``Atlas`` holds, per cell (target, input dtype, policy), each backend's answer as an
``AtlasRun``: the outcome, the three dtypes, the verdict, the whole cast path (variables,
stored and read, included), the error (its message cut to :data:`MAX_MESSAGE` characters) and a
summary of the op trace (how many ops, the first one that changed a dtype, the first inf/NaN)
instead of the trace itself (one LSTM trace is ~61 KB; the whole default map would be
gigabytes). Versions and devices are kept once per backend. Keras numbers the objects it names
itself per process (``seed_generator_6/seed_generator_state``, ``'lstm_3'`` in a message): that
number says how many the worker built before, not what the question asked, so the atlas drops
it (:func:`unnumbered`), and an atlas does not depend on the order its probes ran in. What
differs between two builds of the same map (when, how long, what came from the cache) is in
``build`` and left out of :meth:`Atlas.content`, so a build resumed from the cache and an
uninterrupted one have the same content.

``AtlasCollector`` collects an atlas as its answers arrive, each run kept as its compressed
JSON (a few hundred bytes, not the ~5 KB record); ``AtlasCollector.parts`` (and
``Atlas.parts``) give it back a target at a time, each part with the whole atlas's header, so
``write_atlas`` writes the site, the store and the export without holding the map.

``Atlas.diff(other)`` is the upgrade review: every cell and run whose outcome or class changed,
each with its kind of change (:data:`CHANGE_KINDS`).

>>> from dtype_explorer.records import ProbeResult, ProbeSpec, Survey
>>> spec = ProbeSpec(target="Dense", input_dtypes=("uint8",), backend="numpy")
>>> r = ProbeResult(spec=spec, status="ok", backend="numpy", output_dtype="float32",
...                 verdict="as-documented")
>>> s = Survey(targets=("Dense",), input_dtypes=("uint8",), policies=("float32",),
...            backends=("numpy",), compute_dtypes={"float32": "float32"}, results=(r,))
>>> a = Atlas.from_survey(s)
>>> a.cell("Dense", "uint8", "float32").classification
'casts-to-compute'
>>> b = Atlas.from_survey(s.model_copy(update={"results": (r.model_copy(
...     update={"status": "error", "output_dtype": None}),)}))
>>> [(c.kind, c.before, c.after) for c in a.diff(b).changes]
[('now-raises', 'float32', 'raises')]
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import itertools
import json
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import Field

from dtype_explorer.errors import InvalidSpecError, first_line, unknown
from dtype_explorer.records import _atlas_table
from dtype_explorer.records import display as _display
from dtype_explorer.records._atlas_run import AtlasCell, AtlasRun
from dtype_explorer.records._base import Record
from dtype_explorer.records._probe import ProbeResult
from dtype_explorer.records._survey import (
    PlannedCells,
    Survey,
    arrays_only_error,
    axis_policy,
    combine_classes,
)

if TYPE_CHECKING:
    import pandas as pd

#: The atlas format; readers refuse another.
FORMAT = 1

ChangeKind = Literal[
    "now-raises",
    "now-works",
    "dtype-changed",
    "error-changed",
    "class-changed",
    "added",
    "removed",
]
#: Kinds of change, most serious first: an answer that now raises, one that now works, an
#: output dtype that changed, another error, the same outcome classed otherwise (declared vs
#: observed), and cells or runs only one atlas has.
CHANGE_KINDS: tuple[ChangeKind, ...] = get_args(ChangeKind)


class Atlas(PlannedCells, Record):
    """The whole map: every cell of a survey, the versions and devices that produced it."""

    format: int = FORMAT
    targets: tuple[str, ...]
    input_dtypes: tuple[str, ...]
    policies: tuple[str, ...]
    backends: tuple[str, ...]
    modes: tuple[str, ...] = ("call",)
    floatx: str | None = None
    compute_dtypes: dict[str, str]
    #: backend -> library versions (keras, the backend's, numpy, ...), as the workers said.
    versions: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: backend -> the devices its answers ran on.
    devices: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    #: How this copy was built (``created``, ``elapsed_s``, ``probes``, ``from_cache``); not
    #: part of :meth:`content`.
    build: dict[str, Any] = Field(default_factory=dict)
    cells: tuple[AtlasCell, ...]
    #: In an atlas of layers and ops, the one policy its ops were probed under (an op reads
    #: none: ``Survey.op_policy``); ``None``: every target under every policy.
    op_policy: str | None = None
    #: In an atlas of layers and ops, the input dtypes only its ops were probed on (the weak
    #: Python scalars: ``Survey.op_dtypes``); ``()``: every target on every input dtype.
    op_dtypes: tuple[str, ...] = ()

    @classmethod
    def from_survey(cls, survey: Survey, **build: Any) -> Atlas:
        """The atlas of ``survey`` (``build``: facts about this build, kept in ``build``)."""
        collector = AtlasCollector(survey)
        for result in survey.results:
            collector.add(result)
        return collector.atlas(survey, **build)

    @classmethod
    def merged(cls, parts: Sequence[Atlas]) -> Atlas:
        """One atlas of ``parts`` (surveys of different targets over the same dtypes,
        policies and backends): their cells in order, versions and devices together, build
        facts summed."""
        if not parts:
            raise InvalidSpecError("an atlas needs at least one part to merge")
        first = parts[0]
        versions: dict[str, dict[str, str]] = {}
        devices: dict[str, set[str]] = {}
        compute: dict[str, str] = {}
        for part in parts:
            for backend, said in part.versions.items():
                versions.setdefault(backend, said)
            for backend, found in part.devices.items():
                devices.setdefault(backend, set()).update(found)
            compute.update(part.compute_dtypes)
        build = dict(first.build)
        for key in ("elapsed_s", "probes", "from_cache"):
            build[key] = round(sum(p.build.get(key, 0) for p in parts), 3)
        return first.model_copy(
            update={
                "targets": tuple(t for p in parts for t in p.targets),
                "backends": tuple(dict.fromkeys(b for p in parts for b in p.backends)),
                "compute_dtypes": compute,
                "versions": dict(sorted(versions.items())),
                "devices": {b: tuple(sorted(d)) for b, d in sorted(devices.items())},
                "build": build,
                "cells": tuple(c for p in parts for c in p.cells),
            }
        )

    def content(self) -> dict[str, Any]:
        """Everything but ``build``: what two builds of the same map share."""
        return self.model_dump(mode="json", exclude={"build"})

    def fingerprint(self) -> str:
        """A short hash of :meth:`content` (two builds of the same map have the same)."""
        text = json.dumps(self.content(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def cell(self, target: str, input_dtype: str, policy: str | None = None) -> AtlasCell:
        """The cell for ``target`` on ``input_dtype`` under ``policy`` (default: the first).

        An op of an atlas of layers and ops, asked under a policy other than ``op_policy``,
        answers its one cell, probed under ``op_policy`` (its ``policy`` says so): an op
        reads no policy (``Survey.cell``). A layer's cell on a weak Python scalar, which
        such an atlas has not (``op_dtypes``), raises ``InvalidSpecError`` saying so.
        """
        key = (target, input_dtype, policy or self.policies[0])
        if self.takes_no_policy(key):
            key = (target, input_dtype, str(self.op_policy))
        if self.arrays_only(key):
            raise arrays_only_error(target, input_dtype, self.dtypes_of(target))
        found = self._index().get(key)
        if found is None:
            for value, valid, kind in zip(
                key, (self.targets, self.input_dtypes, self.policies), ("target", "dtype", "policy")
            ):
                if value not in valid:
                    raise unknown(f"{kind} in this atlas", value, valid)
            raise InvalidSpecError(f"this atlas has no cell {key}")
        return found

    def cells_of(self, target: str) -> list[AtlasCell]:
        """Every cell of ``target``, in the atlas's order."""
        return [c for c in self.cells if c.target == target]

    def parts(self) -> Iterator[Atlas]:
        """One atlas per target, in order: this one's header (all its targets and axes) with
        that target's cells only; a site is written a part at a time (``write_atlas``)."""
        by_target: dict[str, list[AtlasCell]] = collections.defaultdict(list)
        for c in self.cells:
            by_target[c.target].append(c)
        build = {**self.build, "cells": len(self.cells)}  # the whole atlas's, for its pages
        for target in self.targets:
            yield self.model_copy(
                update={"cells": tuple(by_target.get(target, ())), "build": build}
            )

    def counts(self, target: str | None = None) -> dict[str, int]:
        """How many cells (of ``target``, or all) fall in each class."""
        found = collections.Counter(
            c.classification for c in self.cells if target is None or c.target == target
        )
        return {k: found[k] for k in sorted(found)}

    def diff(self, other: Atlas) -> AtlasDiff:
        """Every cell and run whose outcome or class changed from ``self`` to ``other``."""
        return AtlasDiff.between(self, other)

    def to_html(self) -> dict[str, str]:
        """The static site: relative path -> page (``index.html``, ``targets/<name>.html``)."""
        return _display.page(self)

    def to_rows(self) -> Iterator[dict[str, Any]]:
        """One flat row per run (the columns of ``atlas.parquet``), cell by cell."""
        for c in self.cells:
            cell = {
                "target": c.target,
                "input_dtype": c.input_dtype,
                "policy": c.policy,
                "compute_dtype": c.compute_dtype,
                "cell_classification": c.classification,
            }
            for run, found in c.runs.items():
                yield {**cell, "run": run, **found.model_dump(mode="json")}

    @classmethod
    def from_rows(cls, header: dict[str, Any], rows: Iterable[dict[str, Any]]) -> Atlas:
        """The atlas of ``header`` (everything but the cells) and its rows (:meth:`to_rows`)."""
        cells: dict[tuple[str, str, str], dict[str, Any]] = {}
        for row in rows:
            key = (row["target"], row["input_dtype"], row["policy"])
            cell = cells.setdefault(
                key,
                {
                    "target": key[0],
                    "input_dtype": key[1],
                    "policy": key[2],
                    "compute_dtype": row["compute_dtype"],
                    "classification": row["cell_classification"],
                    "runs": {},
                },
            )
            cell["runs"][row["run"]] = {k: row[k] for k in AtlasRun.model_fields if k in row}
        return cls.model_validate({**header, "cells": list(cells.values())})

    def header(self) -> dict[str, Any]:
        """Everything but the cells, as JSON values (the Parquet file's metadata)."""
        return self.model_dump(mode="json", exclude={"cells"})

    def save(self, path: str | Path) -> Path:
        """Write the atlas to ``path``: ``.parquet`` (one row per run, queryable with DuckDB
        or pandas) or ``.json`` (the export)."""
        path = Path(path)
        if path.suffix == ".parquet":
            return _atlas_table.write(path, self.header(), self.to_rows())
        if path.suffix == ".json":
            path.write_text(self.to_json(), encoding="utf-8")
            return path
        raise InvalidSpecError(f"an atlas is saved as .parquet or .json; received: {str(path)!r}")

    def to_frame(self) -> pd.DataFrame:
        """A pandas table: one row per run, the columns of ``atlas.parquet``.

        >>> from dtype_explorer.records import ProbeResult, ProbeSpec, Survey
        >>> r = ProbeResult(spec=ProbeSpec(target="Flatten"), status="ok", backend="numpy",
        ...                 output_dtype="float32", verdict="as-documented")
        >>> s = Survey(targets=("Flatten",), input_dtypes=("float32",), policies=("float32",),
        ...            backends=("numpy",), compute_dtypes={"float32": "float32"}, results=(r,))
        >>> Atlas.from_survey(s).to_frame()[["target", "run", "outcome"]].values.tolist()
        [['Flatten', 'numpy', 'float32']]
        """
        import pandas as pd

        return pd.DataFrame(list(self.to_rows()), columns=list(_atlas_table.COLUMNS))

    @classmethod
    def load(cls, path: str | Path) -> Atlas:
        """Read an ``atlas.parquet`` or ``atlas.json`` (or the directory holding one: the
        Parquet file when there is one)."""
        path = Path(path)
        if path.is_dir():
            parquet = path / "atlas.parquet"
            path = parquet if parquet.exists() else path / "atlas.json"
        if path.suffix == ".parquet":
            with _damaged(path):
                header, rows = _atlas_table.read(path)
                _check_format(path, header)
                return cls.from_rows(header, rows)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidSpecError(f"cannot read the atlas {str(path)!r}: {exc}") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidSpecError(f"{str(path)!r} is not JSON: {exc}") from None
        if not isinstance(data, dict) or "cells" not in data:
            raise InvalidSpecError(
                f"{str(path)!r} is not an atlas (no 'cells'); give the atlas.json that "
                "`dtype-explorer atlas build` wrote"
            )
        _check_format(path, data)
        with _damaged(path):
            return cls.model_validate(data)

    @classmethod
    def load_parts(cls, path: str | Path) -> Iterator[Atlas]:
        """An ``atlas.parquet`` (or its directory) read back as :meth:`parts`, a target at a
        time, never whole: what a site is written from (``write_parts``) when the map is too
        big to hold. The file's rows come a target at a time, as ``write_parts`` and
        :meth:`save` write them."""
        path = Path(path)
        path = path / "atlas.parquet" if path.is_dir() else path
        with _damaged(path):
            yield from cls._stored_parts(path)

    @classmethod
    def _stored_parts(cls, path: Path) -> Iterator[Atlas]:
        header, rows = _atlas_table.read(path)
        _check_format(path, header)
        header = {**header, "build": {**header.get("build", {}), "cells": _atlas_table.cells(path)}}
        targets = iter(header["targets"])  # the parts in this order, an empty one where
        group: list[dict[str, Any]] = []  # a target has no row
        for row in itertools.chain(rows, [None]):
            if group and (row is None or row["target"] != group[0]["target"]):
                for target in targets:
                    if target == group[0]["target"]:
                        break
                    yield cls.model_validate({**header, "cells": []})
                else:
                    raise InvalidSpecError(
                        f"{str(path)!r} holds rows of {group[0]['target']!r} out of its order"
                    )
                yield cls.from_rows(header, group)
                group = []
            if row is not None:
                group.append(row)
        for _ in targets:
            yield cls.model_validate({**header, "cells": []})

    def _index(self) -> dict[tuple[str, str, str], AtlasCell]:
        return {c.key: c for c in self.cells}

    def __repr__(self) -> str:
        return (
            f"<Atlas {len(self.targets)} targets x {len(self.input_dtypes)} dtypes x "
            f"{len(self.policies)} policies on {', '.join(self.backends)}: {len(self.cells)} cells>"
        )


@contextlib.contextmanager
def _damaged(path: Path) -> Iterator[None]:
    """A stored atlas that cannot be read back (a header that is not JSON or is nested too
    deep, a missing or mistyped column or field) is an ``InvalidSpecError`` naming the file."""
    try:
        yield
    except InvalidSpecError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        said = first_line(str(exc))[:300]
        raise InvalidSpecError(
            f"the atlas {str(path)!r} is damaged and cannot be read back "
            f"({type(exc).__name__}: {said}); write it again (`dtype-explorer atlas build`)"
        ) from None


def _check_format(path: Path, data: dict[str, Any]) -> None:
    if data.get("format", FORMAT) != FORMAT:
        raise InvalidSpecError(
            f"{str(path)!r} is atlas format {data.get('format')!r}; this dtype-explorer "
            f"reads format {FORMAT}"
        )


class AtlasCollector:
    """Probe results in, atlas runs kept compressed: each result is made its ``AtlasRun`` as
    it arrives and let go (traces and all), so a survey streamed into it
    (``survey(..., sink=c.add)``) is never held whole. :meth:`atlas` and :meth:`parts` order
    the cells as the survey planned them, whatever order the answers came in.
    """

    def __init__(self, survey: Survey) -> None:
        self._compute = dict(survey.compute_dtypes)
        self._several_modes = len(survey.modes) > 1
        #: target -> (input dtype, policy) -> run -> the AtlasRun's JSON, compressed
        self._runs: dict[str, dict[tuple[str, str], dict[str, bytes]]] = {}
        self._versions: dict[str, collections.Counter] = {}
        self._devices: dict[str, set[str]] = {}
        #: Results added, and how many came from the cache.
        self.added = 0
        self.from_cache = 0

    def add(self, result: ProbeResult) -> None:
        """Keep ``result``'s run (summarised, compressed), its versions and its device."""
        spec = result.spec
        policy = axis_policy(spec.policy, spec.quantize)
        run = f"{result.backend}/{spec.mode}" if self._several_modes else result.backend
        summary = AtlasRun.from_result(result, self._compute[policy])
        cell = self._runs.setdefault(spec.target, {}).setdefault((spec.input_dtypes[0], policy), {})
        cell[run] = zlib.compress(summary.to_json().encode(), 1)
        if result.versions:
            versions = json.dumps(result.versions, sort_keys=True)
            self._versions.setdefault(result.backend, collections.Counter())[versions] += 1
        self._devices.setdefault(result.backend, set()).add(result.device)
        self.added += 1
        self.from_cache += bool(result.cached)

    @property
    def cell_count(self) -> int:
        """How many cells the runs added fill."""
        return sum(len(cells) for cells in self._runs.values())

    def atlas(self, survey: Survey, **build: Any) -> Atlas:
        """The atlas of the runs added, every cell decoded; ``survey`` gives the axes and when
        it ran (its results may be empty: they came here instead)."""
        cells = [c for t in survey.targets for c in self._cells(survey, t)]
        return self._header(survey, **build).model_copy(update={"cells": tuple(cells)})

    def parts(self, survey: Survey, **build: Any) -> Iterator[Atlas]:
        """One atlas per target of ``survey``, in its order: the whole atlas's header and that
        target's cells (none where it has no answer), each decoded as it is reached."""
        header = self._header(survey, cells=self.cell_count, **build)
        for target in survey.targets:
            yield header.model_copy(update={"cells": tuple(self._cells(survey, target))})

    def _cells(self, survey: Survey, target: str) -> list[AtlasCell]:
        dtypes = {d: i for i, d in enumerate(survey.input_dtypes)}
        policies = {p: i for i, p in enumerate(survey.policies)}
        found = self._runs.get(target, {})
        cells = []
        for key in sorted(found, key=lambda k: (dtypes[k[0]], policies[k[1]])):
            runs = {
                name: AtlasRun.from_json(zlib.decompress(blob))
                for name, blob in sorted(found[key].items())
            }
            answers = [(r.status == "ok", r.output_dtype, r.classification) for r in runs.values()]
            cells.append(
                AtlasCell(
                    target=target,
                    input_dtype=key[0],
                    policy=key[1],
                    compute_dtype=self._compute[key[1]],
                    classification=combine_classes(answers),
                    runs=runs,
                )
            )
        return cells

    def _header(self, survey: Survey, **build: Any) -> Atlas:
        """Everything of the atlas but its cells."""
        return Atlas(
            targets=survey.targets,
            input_dtypes=survey.input_dtypes,
            policies=survey.policies,
            backends=survey.backends,
            modes=survey.modes,
            floatx=survey.floatx,
            compute_dtypes=survey.compute_dtypes,
            op_policy=survey.op_policy,
            op_dtypes=survey.op_dtypes,
            versions={
                b: json.loads(c.most_common(1)[0][0]) for b, c in sorted(self._versions.items())
            },
            devices={b: tuple(sorted(d)) for b, d in sorted(self._devices.items())},
            build={
                "created": survey.created,
                "elapsed_s": survey.elapsed_s,
                "probes": self.added,
                "from_cache": self.from_cache,
                **build,
            },
            cells=(),
        )


class AtlasWritten(Record):
    """What ``write_atlas`` wrote: its index page, the cells and how many of each class, the
    probes asked and how many the cache answered."""

    index: str
    cells: int
    counts: dict[str, int]
    probes: int
    from_cache: int


class AtlasChange(Record):
    """One run of one cell whose answer changed between two atlases."""

    target: str
    input_dtype: str
    policy: str
    run: str
    kind: ChangeKind
    before: str
    after: str
    before_class: str
    after_class: str
    before_path: str = ""
    after_path: str = ""


class AtlasDiff(Record):
    """What changed from atlas ``before`` to ``after``: the changes grouped by kind, and the
    versions and devices on each side (what the review compares)."""

    before: dict[str, Any]
    after: dict[str, Any]
    cells_compared: int
    changes: tuple[AtlasChange, ...]

    @classmethod
    def between(cls, old: Atlas, new: Atlas) -> AtlasDiff:
        """Every changed run; a cell one side left out by plan (an atlas of layers and ops
        probes an op under ``op_policy`` only, a layer on no weak scalar) is no change."""
        changes = []
        before, after = old._index(), new._index()
        for key in dict.fromkeys([*before, *after]):
            a, b = before.get(key), after.get(key)
            if (a is None and old.unplanned(key)) or (b is None and new.unplanned(key)):
                continue  # an op probed once on that side: it reads no policy
            runs = dict.fromkeys([*(a.runs if a else {}), *(b.runs if b else {})])
            for run in runs:
                x = a.runs.get(run) if a else None
                y = b.runs.get(run) if b else None
                kind = change_kind(x, y)
                if kind is not None:
                    changes.append(
                        AtlasChange(
                            target=key[0],
                            input_dtype=key[1],
                            policy=key[2],
                            run=run,
                            kind=kind,
                            before=x.outcome if x else "absent",
                            after=y.outcome if y else "absent",
                            before_class=x.classification if x else "absent",
                            after_class=y.classification if y else "absent",
                            before_path=x.path_text if x else "",
                            after_path=y.path_text if y else "",
                        )
                    )
        order = {k: i for i, k in enumerate(CHANGE_KINDS)}
        changes.sort(key=lambda c: order[c.kind])
        return cls(
            before=_side(old),
            after=_side(new),
            cells_compared=len(set(before) | set(after)),
            changes=tuple(changes),
        )

    def by_kind(self) -> dict[str, list[AtlasChange]]:
        """The changes grouped by kind, most serious first (kinds with none left out)."""
        grouped: dict[str, list[AtlasChange]] = {}
        for change in self.changes:
            grouped.setdefault(change.kind, []).append(change)
        return grouped

    def counts(self) -> dict[str, int]:
        return {kind: len(found) for kind, found in self.by_kind().items()}

    def to_html(self) -> str:
        """A standalone page, the changes grouped by kind."""
        return _display.page(self)


def change_kind(before: AtlasRun | None, after: AtlasRun | None) -> ChangeKind | None:
    """How a run changed (``None``: it did not)."""
    if before is None and after is None:
        return None
    if before is None:
        return "added"
    if after is None:
        return "removed"
    was_ok, is_ok = before.status == "ok", after.status == "ok"
    if was_ok and not is_ok:
        return "now-raises"
    if is_ok and not was_ok:
        return "now-works"
    if before.outcome != after.outcome:
        return "dtype-changed" if is_ok else "error-changed"
    if before.classification != after.classification:
        return "class-changed"
    return None


def _side(atlas: Atlas) -> dict[str, Any]:
    return {
        "versions": atlas.versions,
        "devices": {b: list(d) for b, d in atlas.devices.items()},
        "created": atlas.build.get("created", ""),
        "fingerprint": atlas.fingerprint(),
    }
