"""mkdocs hook: the whole map, as measured, drawn into the site's ``atlas/``.

``docs/atlas/whole-map.parquet`` is the store of one run of the whole map (every layer, op,
loss and metric x Keras's dtypes x the default policies x the four backends: ``python
benchmarks/map_slice.py --whole``, its versions, devices and date in the file's header). Every
answer in it was produced by running Keras; the build only draws it: the pages, their data
files and the store (no ``atlas.json`` export: the store is the download), read back a target at
a time (``Atlas.load_parts``) and written by ``write_parts``, as ``dtype-explorer atlas build``
writes its own. The file is required: a build without it fails, naming it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

from dtype_explorer.analyses import write_parts
from dtype_explorer.records import Atlas

STORE = Path("docs") / "atlas" / "whole-map.parquet"
log = logging.getLogger("mkdocs.hooks.atlas")


def on_post_build(config: Any) -> None:
    store = Path(config["config_file_path"]).parent / STORE
    if not store.is_file():
        raise PluginError(
            f"the whole map's store {str(store)!r} is missing: write it with "
            "`python benchmarks/map_slice.py --whole --keep DIR` (DIR/site/atlas.parquet)"
        )
    started = time.perf_counter()
    out = Path(config["site_dir"]) / "atlas"
    out.mkdir(parents=True, exist_ok=True)
    written = write_parts(Atlas.load_parts(store), out, export=False)
    log.info(
        f"the whole map: {written.cells} cells, {written.probes} probes, drawn into "
        f"{out} in {time.perf_counter() - started:.1f}s"
    )
