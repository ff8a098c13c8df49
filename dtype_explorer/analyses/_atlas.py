"""The atlas build: a survey through the pool (or a Dask cluster) and its cache, made into an
``Atlas`` and written as ``atlas.parquet`` (the store: one row per run, queryable with DuckDB
or pandas), ``atlas.json`` (the export) and a static site.

Every probe's answer is stored in the result cache as it arrives, so a build interrupted at
any point and run again asks only what is missing, and writes the same atlas (its content
leaves out when and how fast it was built: ``Atlas.content``). The survey streams into an
``AtlasCollector``: each answer is made its atlas run as it arrives and let go, so the front
process holds the answers in flight and the atlas, never the map's op traces.

>>> import dtype_explorer as dx
>>> atlas = build_atlas(["Dense", "ops.add"], backends="numpy", out="atlas/")  # doctest: +SKIP
>>> atlas.cell("Dense", "uint8", "mixed_float16").classification               # doctest: +SKIP
'casts-to-compute'
"""

from __future__ import annotations

import collections
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dtype_explorer.analyses._survey import axis_policies, quantize_axis, resolve, survey
from dtype_explorer.errors import InvalidSpecError, received, received_path
from dtype_explorer.records import (
    Atlas,
    AtlasCollector,
    AtlasStoreWriter,
    AtlasWritten,
    Survey,
)
from dtype_explorer.records import display as _display

if TYPE_CHECKING:
    import pandas as pd

#: The atlas's files in its directory: the store, then the export.
STORE, EXPORT = "atlas.parquet", "atlas.json"


def build_atlas(
    targets: Sequence[str] | None = None,
    input_dtypes: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    backends: Sequence[str] | str | None = None,
    *,
    out: str | Path | None = None,
    modes: Sequence[str] | None = None,
    floatx: str | None = None,
    engine: str | None = None,
    quantize: Sequence[str | None] | None = None,
    timeout: float | None = None,
    cluster: Any = None,
    progress: bool = True,
) -> Atlas:
    """Survey the map (``dx.survey``'s arguments; the default is every layer, every dtype,
    four policies, every installed backend) and make it an atlas, written to ``out``.

    Args:
        targets: catalog names, groups or patterns (``"ops"``, ``"Conv*D"``).
        input_dtypes: dtype names (default: every Keras dtype).
        policies: policy names.
        backends: backend names or ``"all"``.
        out: a directory for ``atlas.json``, ``index.html`` and ``targets/*.html`` (created;
            ``None``: nothing written).
        modes: how each target runs (``dx.survey``'s ``modes``).
        floatx: ``keras.config.floatx()`` during each probe.
        engine: which Keras answers (``dx.probe``'s ``engine``: ``"keras==3.X.Y"``,
            ``"tf_keras"``); its versions are the atlas's, so two engines' atlases diff.
        quantize: quantization modes (``dx.survey``'s ``quantize``: ``[None, "int8"]``), on
            the policy axis as ``"<policy>+quantize=<mode>"``.
        timeout: seconds per probe.
        cluster: a ``distributed.Client`` to spread the probes over.
        progress: show a progress bar.

    Returns:
        The ``Atlas``.
    """
    directory = None if out is None else writable_directory(out)
    collector, found = _collected(
        targets, input_dtypes, policies, backends, modes=modes, floatx=floatx, engine=engine,
        quantize=quantize, timeout=timeout, cluster=cluster, progress=progress,
    )  # fmt: skip
    atlas = collector.atlas(found)
    if directory is not None:
        save_atlas(atlas, directory)
    return atlas


def write_atlas(
    targets: Sequence[str] | None = None,
    input_dtypes: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    backends: Sequence[str] | str | None = None,
    *,
    out: str | Path = "atlas",
    modes: Sequence[str] | None = None,
    floatx: str | None = None,
    engine: str | None = None,
    quantize: Sequence[str | None] | None = None,
    timeout: float | None = None,
    cluster: Any = None,
    progress: bool = True,
) -> AtlasWritten:
    """Survey the map and write its atlas to ``out`` without ever holding it: what
    ``dtype-explorer atlas build`` runs, and the way to build a map too big for memory.

    The answers stream into an ``AtlasCollector`` (each kept as its run's compressed JSON),
    then the site, ``atlas.parquet`` and ``atlas.json`` are written a target at a time
    (``AtlasCollector.parts``): the front holds one target's cells at a time, never the map's.
    Read the atlas back with ``Atlas.load(out)``, or ask it with :func:`query_atlas`.

    Args:
        targets: catalog names, groups or patterns, as :func:`build_atlas`'s; and so
            ``input_dtypes``, ``policies``, ``backends``, ``modes``, ``floatx``, ``engine``,
            ``quantize``, ``timeout``, ``cluster`` and ``progress``.
        input_dtypes: dtype names.
        policies: policy names.
        backends: backend names or ``"all"``.
        out: the directory (created).
        modes: how each target runs.
        floatx: ``keras.config.floatx()`` during each probe.
        engine: which Keras answers.
        quantize: quantization modes.
        timeout: seconds per probe.
        cluster: a ``distributed.Client``.
        progress: show a progress bar.

    Returns:
        An ``AtlasWritten``: where the index is, how many cells and probes, the cells' classes.

    >>> written = write_atlas(["Flatten"], ["uint8"], backends="numpy", out="atlas/",
    ...                       progress=False)                            # doctest: +SKIP
    >>> written.cells, written.counts                                    # doctest: +SKIP
    (4, {'keeps-input': 4})
    """
    directory = writable_directory(out)
    collector, found = _collected(
        targets, input_dtypes, policies, backends, modes=modes, floatx=floatx, engine=engine,
        quantize=quantize, timeout=timeout, cluster=cluster, progress=progress,
    )  # fmt: skip
    return write_parts(collector.parts(found), directory)


def _collected(
    targets: Sequence[str] | None,
    input_dtypes: Sequence[str] | None,
    policies: Sequence[str] | None,
    backends: Sequence[str] | str | None,
    **options: Any,
) -> tuple[AtlasCollector, Survey]:
    """The survey streamed into a collector: the collector, and the survey (its axes, no
    results)."""
    names, dtype_names, policy_names = resolve(targets, input_dtypes, policies)
    plan = _planned(
        names, dtype_names, policy_names, options["modes"], quantize_axis(options["quantize"])
    )
    collector = AtlasCollector(plan)
    found = survey(
        names,
        dtype_names,
        policy_names,
        backends,
        **options,
        sink=collector.add,  # each answer made its atlas run as it arrives, then let go
    )
    return collector, found


def _planned(
    names: tuple[str, ...],
    dtype_names: tuple[str, ...],
    policy_names: tuple[str, ...],
    modes: Sequence[str] | None,
    quantize: tuple[str | None, ...] = (None,),
) -> Survey:
    """The axes a collector needs before the answers arrive (the compute dtype of each
    policy, whether runs are keyed by mode)."""
    mode_names = tuple(dict.fromkeys(modes or ("call",)))
    axis = axis_policies(policy_names, quantize)
    return Survey(
        targets=names,
        input_dtypes=dtype_names,
        policies=tuple(axis),
        backends=(),
        modes=mode_names,
        compute_dtypes=axis,
        results=(),
        quantize=quantize,
    )


def save_atlas(atlas: Atlas, directory: Path) -> Path:
    """Write ``atlas`` into ``directory`` (:func:`write_parts` of its ``parts``); returns the
    index page's path."""
    return Path(write_parts(atlas.parts(), directory).index)


def write_parts(parts: Iterable[Atlas], directory: Path, *, export: bool = True) -> AtlasWritten:
    """Write an atlas given as its parts (``Atlas.parts``/``AtlasCollector.parts``: an atlas
    per target, each with the whole header) into ``directory``, a part at a time: the pages
    and data files, ``atlas.json`` (unless ``export`` is false) and ``atlas.parquet``, each
    file replaced whole (a build stopped while writing leaves the old file or the new one).
    A stored atlas is rewritten from ``Atlas.load_parts(path)`` the same way."""
    suffix = f".{os.getpid()}.tmp"
    json_path = directory / f".{EXPORT}{suffix}" if export else None
    store = directory / f".{STORE}{suffix}.parquet"
    files = _Files(json_path, store)
    header = None
    try:
        for name, text in _display.page(files.first(parts), parts=files.kept()).items():
            _replace(directory / name, text)
        header = files.close()
    finally:
        files.abort()
    if json_path is not None:
        os.replace(json_path, directory / EXPORT)
    os.replace(store, directory / STORE)
    return AtlasWritten(
        index=str(directory / "index.html"),
        cells=files.cells,
        probes=header.build.get("probes", 0) if header else 0,
        from_cache=header.build.get("from_cache", 0) if header else 0,
        counts=dict(sorted(files.counts.items())),
    )


def _replace(path: Path, text: str) -> None:
    """``path`` replaced whole by ``text``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


class _Files:
    """``atlas.json`` (where ``export`` is a path) and ``atlas.parquet`` of an atlas written a
    part at a time (:func:`write_parts`): each part's cells appended as the site reaches it."""

    def __init__(self, export: Path | None, store: Path) -> None:
        self._export_path, self._store_path = export, store
        self._parts: Iterator[Atlas] = iter(())
        self._first: Atlas | None = None
        self._export: Any = None
        self._store: AtlasStoreWriter | None = None
        self._rest = ""
        self._last: Atlas | None = None
        #: Cells written, and how many of each class.
        self.cells = 0
        self.counts: collections.Counter = collections.Counter()

    def first(self, parts: Iterable[Atlas]) -> Atlas:
        """The first part (its header is the atlas's); the parts are then read by
        :meth:`kept`."""
        self._parts = iter(parts)
        self._first = next(self._parts, None)
        if self._first is None:
            raise InvalidSpecError("an atlas needs at least one target to write")
        return self._first

    def kept(self) -> Iterator[Atlas]:
        """Every part, each written to the export and the store before it is handed on."""
        for part in itertools.chain([self._first], self._parts):
            assert part is not None
            self._keep(part)
            yield part

    def _keep(self, part: Atlas) -> None:
        if self._store is None:  # the header, less the parts' count of the whole's cells
            build = {k: v for k, v in part.build.items() if k != "cells"}
            header = part.model_copy(update={"cells": (), "build": build})
            self._store = AtlasStoreWriter(self._store_path, header.header())
            if self._export_path is not None:
                head, _, self._rest = header.to_json().partition('"cells":[]')  # values escape
                self._export = self._export_path.open("w", encoding="utf-8")
                self._export.write(head + '"cells":[')
        for cell in part.cells:
            if self._export is not None:
                self._export.write(("," if self.cells else "") + cell.to_json())
            self.cells += 1
            self.counts[cell.classification] += 1
        self._store.add(part.to_rows())
        self._last = part

    def close(self) -> Atlas | None:
        """Both files finished; the last part (its header), if any was written."""
        if self._export is not None:
            self._export.write("]" + self._rest)
            self._export.close()
            self._export = None
        if self._store is not None:
            self._store.__exit__(None, None, None)
            self._store = None
        return self._last

    def abort(self) -> None:
        """After an error: both files closed and removed (the old atlas stays)."""
        if self._export is not None or self._store is not None:
            if self._export is not None:
                self._export.close()
            if self._store is not None:
                self._store.__exit__(RuntimeError, None, None)
            self._export = self._store = None
            for path in (self._export_path, self._store_path):
                if path is not None:
                    path.unlink(missing_ok=True)


def query_atlas(sql: str, atlas: str | Path = "atlas") -> pd.DataFrame:
    """Run DuckDB ``sql`` over an atlas's runs, one row per run, as the table ``runs``
    (the columns of ``atlas.parquet``: target, input_dtype, policy, run, outcome, ...).

    Args:
        sql: a DuckDB query, e.g. ``SELECT target, count(*) FROM runs GROUP BY target``.
        atlas: an ``atlas.parquet``, or the directory holding one.

    Returns:
        The answer as a pandas ``DataFrame``.

    >>> query_atlas("SELECT target FROM runs WHERE outcome LIKE 'raises%'",
    ...             "atlas/")                                          # doctest: +SKIP
    """
    try:
        import duckdb
    except ImportError:
        raise InvalidSpecError(
            "atlas queries need DuckDB: pip install 'dtype-explorer[atlas]'"
        ) from None
    path = Path(atlas)
    path = path / STORE if path.is_dir() else path
    if path.suffix != ".parquet" or not path.is_file():
        raise InvalidSpecError(
            f"no atlas store at {received_path(path)}: give the directory `dtype-explorer atlas "
            f"build` wrote, or its {STORE}"
        )
    connection = duckdb.connect()
    try:
        connection.execute(f"CREATE VIEW runs AS SELECT * FROM read_parquet('{_quoted(path)}')")
        return connection.execute(sql).df()
    except duckdb.Error as error:
        raise InvalidSpecError(f"the query failed: {error}; received: {received(sql)}") from None
    finally:
        connection.close()


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


def writable_directory(out: str | Path) -> Path:
    """``out`` checked before any work: a directory (made if missing) that can be written."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InvalidSpecError(f"out must be a directory, not a file: {received_path(path)}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidSpecError(f"cannot make the directory {received_path(path)}: {exc}") from None
    if not os.access(path, os.W_OK):
        raise InvalidSpecError(f"cannot write into {received_path(path)}")
    return path
