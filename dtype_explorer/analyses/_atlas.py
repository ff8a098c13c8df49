"""The atlas build: a survey through the pool (or a Dask cluster) and its cache, made into an
``Atlas`` and written as ``atlas.json`` plus a static site.

Every probe's answer is stored in the result cache as it arrives, so a build interrupted at
any point and run again asks only what is missing, and writes the same atlas (its content
leaves out when and how fast it was built: ``Atlas.content``). The targets are surveyed
:data:`CHUNK_TARGETS` at a time and each chunk made atlas cells at once, so the front
process never holds the whole map's op traces.

>>> import dtype_explorer as dx
>>> atlas = build_atlas(["Dense", "ops.add"], backends="numpy", out="atlas/")  # doctest: +SKIP
>>> atlas.cell("Dense", "uint8", "mixed_float16").classification               # doctest: +SKIP
'casts-to-compute'
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dtype_explorer.analyses._survey import resolve, survey
from dtype_explorer.errors import InvalidSpecError, received
from dtype_explorer.records import Atlas

#: Targets surveyed at a time: the front process holds one chunk's results (op traces and
#: all: an LSTM's is ~61 KB) until they are made atlas cells, so memory stays bounded (8 of
#: the default map: 8 x 18 dtypes x 4 policies x 4 backends = 2,304 results).
CHUNK_TARGETS = 8


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
        timeout: seconds per probe.
        cluster: a ``distributed.Client`` to spread the probes over.
        progress: show a progress bar.

    Returns:
        The ``Atlas``.
    """
    directory = None if out is None else writable_directory(out)
    names, dtype_names, policy_names = resolve(targets, input_dtypes, policies)
    parts = []
    for start in range(0, len(names), CHUNK_TARGETS):
        found = survey(
            names[start : start + CHUNK_TARGETS],
            dtype_names,
            policy_names,
            backends,
            floatx=floatx,
            modes=modes,
            engine=engine,
            timeout=timeout,
            progress=progress,
            cluster=cluster,
        )
        parts.append(Atlas.from_survey(found))  # the results, traces and all, go
        del found
    atlas = Atlas.merged(parts)
    if directory is not None:
        save_atlas(atlas, directory)
    return atlas


def save_atlas(atlas: Atlas, directory: Path) -> Path:
    """Write ``atlas`` into ``directory``: the pages first, ``atlas.json`` last, each file
    replaced whole (a build stopped while writing leaves the old file or the new one)."""
    pages = atlas.to_html()
    for name, text in [*pages.items(), ("atlas.json", atlas.to_json())]:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    return directory / "index.html"


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
