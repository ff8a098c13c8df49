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

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dtype_explorer.analyses._survey import axis_policies, quantize_axis, resolve, survey
from dtype_explorer.errors import InvalidSpecError, received
from dtype_explorer.records import Atlas, AtlasCollector, Survey

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
    names, dtype_names, policy_names = resolve(targets, input_dtypes, policies)
    plan = _planned(names, dtype_names, policy_names, modes, quantize_axis(quantize))
    collector = AtlasCollector(plan)
    found = survey(
        names,
        dtype_names,
        policy_names,
        backends,
        floatx=floatx,
        modes=modes,
        engine=engine,
        quantize=quantize,
        timeout=timeout,
        progress=progress,
        cluster=cluster,
        sink=collector.add,  # each answer made its atlas run as it arrives, then let go
    )
    atlas = collector.atlas(found)
    if directory is not None:
        save_atlas(atlas, directory)
    return atlas


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
    """Write ``atlas`` into ``directory``: the pages first, then ``atlas.json`` and
    ``atlas.parquet``, each file replaced whole (a build stopped while writing leaves the old
    file or the new one)."""
    pages = atlas.to_html()
    for name, text in [*pages.items(), (EXPORT, atlas.to_json())]:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    temporary = directory / f".{STORE}.{os.getpid()}.tmp.parquet"
    os.replace(atlas.save(temporary), directory / STORE)
    return directory / "index.html"


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
            f"no atlas store at {received(str(path))}: give the directory `dtype-explorer atlas "
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
        raise InvalidSpecError(f"out must be a directory, not a file: {received(str(path))}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidSpecError(f"cannot make the directory {received(str(path))}: {exc}") from None
    if not os.access(path, os.W_OK):
        raise InvalidSpecError(f"cannot write into {received(str(path))}")
    return path
