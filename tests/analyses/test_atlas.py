"""The dtype atlas (issue 17): built from real probes on the numpy worker, written as one JSON
and a self-contained static site, resumed after being killed mid-build (the same atlas as an
uninterrupted build), and diffed (every changed run, grouped by kind, as HTML and JSON)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dtype_explorer.analyses import _atlas as atlas_module
from dtype_explorer.analyses import build_atlas
from dtype_explorer.records import Atlas, AtlasDiff
from dtype_explorer.views import target_data_href, target_href

ROOT = Path(__file__).resolve().parents[2]
SMALL = {
    "targets": ["Dense", "LSTM", "ops.sqrt", "ops.divide"],
    "input_dtypes": ["float32", "int32", "uint8", "float16"],
    "policies": ["float32", "mixed_float16"],
    "backends": "numpy",
    "progress": False,
}


def cli(*args: str, cache_dir: Path, **options) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "DTYPE_EXPLORER_CACHE_DIR": str(cache_dir),
        "DTYPE_EXPLORER_BACKENDS": "numpy",
        "KERAS_BACKEND": "numpy",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "dtype_explorer", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # killed with its workers, as a build stopped by the machine
        **options,
    )


def cached_answers(cache_dir: Path) -> int:
    try:
        with sqlite3.connect(cache_dir / "cache.db", timeout=30) as db:
            return db.execute("SELECT COUNT(*) FROM Cache").fetchone()[0]
    except sqlite3.Error:  # not made yet
        return 0


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Atlas, Path]:
    out = tmp_path_factory.mktemp("atlas")
    return build_atlas(**SMALL, out=out), out


def test_an_atlas_is_one_json_and_a_static_site_without_traces(small):
    atlas, out = small
    assert Atlas.load(out / "atlas.json") == atlas == Atlas.load(out)
    assert len(atlas.cells) == (2 * 2 + 2) * 4  # each op under float32 only: it reads no policy
    assert atlas.op_policy == "float32" and atlas.policies_of("ops.sqrt") == ("float32",)
    for target in SMALL["targets"]:
        page = (out / target_href(target)).read_text()
        assert f"data-testid='target'>{target}</h1>" in page
        # nothing from outside: the site's own files, relative to the page
        assert re.findall(r"<(?:script src|link rel='stylesheet' href)='([^']*)'", page) == [
            "../assets/atlas.css",
            "../assets/atlas.js",
        ]
        assert (out / "assets" / "atlas.js").exists() and (out / target_data_href(target)).exists()
    lstm = atlas.cell("LSTM", "float32", "float32").runs["numpy"]
    assert lstm.trace_ops > 0 and lstm.cast_path  # summarised, the cast path whole
    text = (out / "atlas.json").read_text()
    assert '"trace"' not in text
    runs = sum(len(c.runs) for c in atlas.cells)
    assert len(text) / runs < 2500  # bytes per run, bounded whatever the trace's length
    dense = atlas.cell("Dense", "uint8", "mixed_float16")
    assert dense.runs["numpy"].output_dtype == "float16"
    assert atlas.versions["numpy"]["keras"] and atlas.devices["numpy"] == ("cpu",)


def test_an_atlas_streamed_from_the_survey_is_the_one_of_the_whole_survey(small):
    streamed, out = small  # built through a sink: answers made atlas runs as they arrived
    whole = Atlas.from_survey(atlas_module.survey(**SMALL))  # every result held, then made
    assert streamed.content() == whole.content()
    assert streamed.build["probes"] == len(whole.cells)
    assert Atlas.load(out / "atlas.parquet") == streamed  # the store, beside the export
    # smaller than the export, its fixed schema and metadata included (24 cells: ~half)
    assert (out / "atlas.parquet").stat().st_size < (out / "atlas.json").stat().st_size * 0.6


def test_atlas_query_runs_sql_over_the_store(small, tmp_path):
    _, out = small
    sql = "SELECT target, count(*) AS runs FROM runs WHERE status = 'ok' GROUP BY 1 ORDER BY 1"
    done = cli("atlas", "query", sql, "--atlas", str(out), "--json", cache_dir=tmp_path)
    stdout, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    found = {row["target"]: row["runs"] for row in json.loads(stdout)}
    atlas = Atlas.load(out)
    assert found == {t: n for t in SMALL["targets"] for n in [expected_ok(atlas, t)] if n}
    bad = cli("atlas", "query", "SELECT nope FROM runs", "--atlas", str(out), cache_dir=tmp_path)
    _, err = bad.communicate(timeout=120)
    assert bad.returncode == 2 and "the query failed" in err and "nope" in err


def expected_ok(atlas: Atlas, target: str) -> int:
    return sum(r.status == "ok" for c in atlas.cells_of(target) for r in c.runs.values())


def test_a_build_killed_mid_way_and_resumed_is_the_same_atlas(small, tmp_path):
    uninterrupted, _ = small
    args = ["atlas", "build", "--targets", ",".join(SMALL["targets"]), "--backends", "numpy"]
    args += ["--input-dtypes", ",".join(SMALL["input_dtypes"]), "--no-progress"]
    args += ["--policies", ",".join(SMALL["policies"]), "--out", str(tmp_path / "atlas")]
    cache_dir = tmp_path / "cache"
    build = cli(*args, cache_dir=cache_dir)
    deadline = time.monotonic() + 240
    while cached_answers(cache_dir) < 5 and build.poll() is None:
        assert time.monotonic() < deadline, "the build never stored an answer"
        time.sleep(0.05)
    os.killpg(build.pid, signal.SIGKILL)  # the build and its worker, at once
    build.wait()
    answered = cached_answers(cache_dir)
    assert 5 <= answered < 24, "killed after all was done: nothing to resume"
    assert not (tmp_path / "atlas" / "atlas.json").exists()
    again = cli(*args, cache_dir=cache_dir)
    out, err = again.communicate(timeout=400)
    assert again.returncode == 0, err[-3000:]
    assert "wrote" in out
    resumed = Atlas.load(tmp_path / "atlas")
    assert resumed.build["from_cache"] >= answered - 1  # the last one may not have committed
    assert resumed.content() == uninterrupted.content()
    assert resumed.fingerprint() == uninterrupted.fingerprint()


def test_the_diff_of_two_atlases_groups_every_changed_run(small, tmp_path):
    _, before_dir = small
    after = build_atlas(**{**SMALL, "targets": ["Dense", "ops.sqrt", "Flatten"]}, floatx="float16")
    after_dir = tmp_path / "after"
    from dtype_explorer.analyses import save_atlas

    after_dir.mkdir()
    save_atlas(after, after_dir)
    done = cli(
        "atlas",
        "diff",
        str(before_dir / "atlas.json"),  # the export on one side, the store on the other
        str(after_dir / "atlas.parquet"),
        "--out",
        str(tmp_path / "review"),
        "--fail-on-change",
        cache_dir=tmp_path / "cache",
    )
    out, err = done.communicate(timeout=120)
    assert done.returncode == 1, err  # --fail-on-change: changes were found
    diff = AtlasDiff.from_json((tmp_path / "review" / "diff.json").read_text())
    kinds = diff.counts()
    # floatx float16: sqrt of an int is floatx (float16), not float32, under Keras's rule
    sqrt = [c for c in diff.changes if c.target == "ops.sqrt"]
    assert {(c.input_dtype, c.before, c.after) for c in sqrt} >= {("int32", "float32", "float16")}
    assert all(c.kind == "dtype-changed" for c in sqrt)
    assert kinds["removed"] == 4 * 2 + 4  # LSTM and ops.divide (one policy): only before
    assert kinds["added"] == 4 * 2  # Flatten: only after
    assert not [c for c in diff.changes if c.target == "Dense"]  # Dense's policy decides
    html = (tmp_path / "review" / "diff.html").read_text()
    for kind in kinds:
        assert f"data-testid='kind-{kind}'" in html
    assert f"{len(diff.changes)} changed runs" in out
    assert json.loads((tmp_path / "review" / "diff.json").read_text())["before"]["fingerprint"]


def test_atlas_commands_refuse_bad_input_in_one_line(tmp_path):
    not_atlas = tmp_path / "survey.json"
    not_atlas.write_text(json.dumps({"targets": []}))
    a_file = tmp_path / "file"
    a_file.write_text("")
    for args, said in [
        (["atlas", "diff", str(not_atlas), str(not_atlas)], "is not an atlas"),
        (["atlas", "diff", str(tmp_path / "none.json"), str(not_atlas)], "cannot read"),
        (["atlas", "build", "--out", str(a_file), "--targets", "Dense"], "not a file"),
        (["atlas", "build", "--targets", "Dens", "--out", str(tmp_path)], "Dense"),
        (["atlas", "build", "--workers-per-backend", "0", "--out", str(tmp_path)], "from 1 to"),
    ]:
        done = cli(*args, cache_dir=tmp_path / "cache")
        out, err = done.communicate(timeout=120)
        assert done.returncode == 2, (args, out, err)
        assert said in err and len(err.strip().splitlines()) == 1, err


def test_a_name_that_opens_a_script_comment_is_escaped_for_the_script_context(small, tmp_path):
    """``<!--<script>`` inside a name in ``atlas.json`` put the page's data script in its
    double-escaped state: the site's script stopped on every page (issue 31). Written as
    ``\\u003c`` escapes, the data is JSON that reads back the same name."""
    from dtype_explorer.views import atlas_site
    from dtype_explorer.views._atlas import site_script

    _, out = small
    hostile = "Dense<!--<script>&\u2028"
    text = (out / "atlas.json").read_text().replace('"Dense"', json.dumps(hostile))
    (tmp_path / "atlas.json").write_text(text)
    atlas = Atlas.load(tmp_path / "atlas.json")
    assert hostile in {cell.target for cell in atlas.cells}
    pages = atlas_site(atlas)
    for name, page in pages.items():
        if name.startswith("data/"):  # a target's runs: a script that hands over its JSON
            inner = page.removeprefix("dxAtlasTarget(").removesuffix(");\n")
            assert not set(inner) & set("<>&\u2028\u2029"), name
            assert json.loads(inner)["target"] in {hostile, *atlas.targets}, name
        if name == "assets/targets.js":  # the search's targets, once for the site
            inner = page.removeprefix("dxAtlasTargets(").removesuffix(");\n")
            assert not set(inner) & set("<>&\u2028\u2029"), name
            assert hostile in [t["name"] for t in json.loads(inner)], name
        if not name.endswith(".html"):
            continue
        assert page.count("<script") == 2, name  # the data and the site's script, no other
        assert site_script() not in page, name  # written once, assets/atlas.js
        data = page.split("<script id='ax-data' type='application/json'>")[1]
        data = data.split("</script>")[0]
        assert not set(data) & set("<>&\u2028\u2029"), name
        if name == target_href(hostile):  # its page names it (the others: assets/targets.js)
            assert json.loads(data)["target"] == hostile, name
