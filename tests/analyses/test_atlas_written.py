"""An atlas written without being held (``write_atlas``, what ``dtype-explorer atlas build``
runs): the survey streamed into a collector that keeps each run compressed, then the site,
``atlas.parquet`` and ``atlas.json`` written a target at a time. Real probes on the numpy
worker; the same atlas as ``build_atlas`` holds, file for file."""

from __future__ import annotations

import json
import re
import zlib

import pytest

from dtype_explorer.analyses import _atlas as atlas_module
from dtype_explorer.analyses import build_atlas, survey, write_atlas
from dtype_explorer.records import Atlas, AtlasCollector

QUESTION = {
    "targets": ["Dense", "Flatten", "ops.add"],
    "input_dtypes": ["float32", "uint8"],
    "policies": ["float32", "mixed_float16"],
    "backends": "numpy",
    "progress": False,
}


def files(directory):
    return sorted(p.relative_to(directory) for p in directory.rglob("*") if p.is_file())


def unbuilt(page):
    """A page less its "built" row (when, how long, how much from the cache)."""
    return re.sub(r"<tr><th>built</th>.*?</tr>", "", page.read_text())


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    held_dir, written_dir = tmp_path_factory.mktemp("held"), tmp_path_factory.mktemp("written")
    held = build_atlas(**QUESTION, out=held_dir)
    written = write_atlas(**QUESTION, out=written_dir)  # answered from the cache: same runs
    return held, held_dir, written, written_dir


def test_the_written_atlas_is_the_held_one_file_for_file(both):
    held, held_dir, written, written_dir = both
    assert Atlas.load(written_dir).content() == held.content()
    assert Atlas.load(written_dir / "atlas.json").content() == held.content()
    pages = files(held_dir)
    assert pages == files(written_dir)
    for page in pages:
        if page.suffix in (".html", ".js") and page.name != "index.html":
            assert unbuilt(held_dir / page) == unbuilt(written_dir / page), page
    assert written.cells == len(held.cells) and written.counts == held.counts()
    assert written.probes == held.build["probes"] and written.index.endswith("index.html")
    # the index counts what the parts counted, as the held atlas counts itself
    index = (written_dir / "index.html").read_text()
    assert all(f"{k} {v}" in index for k, v in held.counts().items())


def test_a_collector_keeps_runs_compressed_and_gives_one_target_a_part(both):
    held, *_ = both
    plan = atlas_module._planned(held.targets, held.input_dtypes, tuple(QUESTION["policies"]), None)
    collector = AtlasCollector(plan)
    found = survey(**QUESTION, sink=collector.add)  # answered from the cache, streamed
    stored = [b for cells in collector._runs.values() for c in cells.values() for b in c.values()]
    assert len(stored) == collector.added == held.build["probes"]
    assert all(isinstance(b, bytes) for b in stored)
    assert all(json.loads(zlib.decompress(b))["status"] for b in stored)
    parts = list(collector.parts(found))
    assert [p.targets for p in parts] == [held.targets] * len(held.targets)  # the whole header
    assert [{c.target for c in p.cells} for p in parts] == [{t} for t in held.targets]
    assert sum(len(p.cells) for p in parts) == collector.cell_count == len(held.cells)
    assert all(p.build["cells"] == len(held.cells) for p in parts)
    assert collector.atlas(found).content() == held.content()


def test_a_failed_write_leaves_the_old_atlas(both, monkeypatch, tmp_path):
    held, *_ = both
    atlas_module.save_atlas(held, tmp_path)
    before = (tmp_path / "atlas.json").read_text()

    def broken():
        yield from held.parts()
        raise RuntimeError("the machine stopped")

    with pytest.raises(RuntimeError):
        atlas_module.write_parts(broken(), tmp_path)
    assert (tmp_path / "atlas.json").read_text() == before
    assert Atlas.load(tmp_path).content() == held.content()
    assert not [
        p for p in tmp_path.iterdir() if p.name.endswith(".tmp.parquet") or ".tmp" in p.name
    ]


def test_a_stored_atlas_is_rewritten_a_target_at_a_time_without_its_export(both, tmp_path):
    # the documentation site draws a stored map this way: read back by target, never whole
    held, held_dir, *_ = both
    parts = list(Atlas.load_parts(held_dir / "atlas.parquet"))
    assert [{c.target for c in p.cells} for p in parts] == [{t} for t in held.targets]
    assert all(p.build["cells"] == len(held.cells) for p in parts)
    written = atlas_module.write_parts(Atlas.load_parts(held_dir), tmp_path, export=False)
    assert not (tmp_path / "atlas.json").exists()
    assert Atlas.load(tmp_path).content() == held.content()
    assert written.cells == len(held.cells)
    for page in files(held_dir):
        if page.suffix in (".html", ".js") and page.name != "index.html":
            assert unbuilt(held_dir / page) == unbuilt(tmp_path / page), page
