"""The atlas's columnar store (issue 27): an atlas written as Parquet and read back is the
same atlas, DuckDB and pandas read the file as it is, the diff works on it, and a collector fed
results one at a time keeps their atlas runs only. Hand-built records: no Keras."""

from __future__ import annotations

import json
import random

import duckdb
import pyarrow.parquet as pq
import pytest

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import (
    Atlas,
    AtlasCollector,
    CastStep,
    ErrorInfo,
    ProbeResult,
    ProbeSpec,
    Survey,
)

TARGETS = ("Dense", "Flatten", "ops.sqrt")
DTYPES = ("float32", "uint8", "int32")
POLICIES = ("float32", "mixed_float16")
BACKENDS = ("numpy", "jax")
COMPUTE = {"float32": "float32", "mixed_float16": "float16"}


def _result(target, dtype, policy, backend):
    spec = ProbeSpec(target=target, input_dtypes=(dtype,), policy=policy, backend=backend)
    if target == "ops.sqrt" and dtype == "uint8" and backend == "jax":  # one error, one backend
        error = ErrorInfo(type="TypeError", message="sqrt of 'lstm_3' refused", where="call")
        return ProbeResult(spec=spec, status="error", backend=backend, error=error)
    out = COMPUTE[policy] if target == "Dense" else dtype
    path = (CastStep(stage="input", dtype=dtype), CastStep(stage="output", dtype=out))
    return ProbeResult(
        spec=spec,
        status="ok",
        backend=backend,
        output_dtype=out,
        verdict="as-documented",
        cast_path=path,
        versions={"keras": "3.15.1", backend: "1.0"},
        cached=backend == "jax",
    )


def _survey(results):
    return Survey(
        targets=TARGETS,
        input_dtypes=DTYPES,
        policies=POLICIES,
        backends=BACKENDS,
        compute_dtypes=COMPUTE,
        results=tuple(results),
    )


@pytest.fixture
def atlas():
    results = [
        _result(t, d, p, b) for t in TARGETS for d in DTYPES for p in POLICIES for b in BACKENDS
    ]
    return Atlas.from_survey(_survey(results))


def test_an_atlas_written_as_parquet_reads_back_the_same(atlas, tmp_path):
    path = atlas.save(tmp_path / "atlas.parquet")
    assert Atlas.load(path) == atlas
    assert Atlas.load(tmp_path) == atlas  # the directory: its store
    assert pq.ParquetFile(path).metadata.num_rows == len(TARGETS) * 3 * 2 * 2  # a row a run
    (tmp_path / "atlas.json").write_text(atlas.to_json())
    assert Atlas.load(tmp_path / "atlas.json") == atlas  # JSON stays an export
    assert Atlas.load(tmp_path / "atlas.json").fingerprint() == Atlas.load(path).fingerprint()


def test_duckdb_and_pandas_read_the_store_as_it_is(atlas, tmp_path):
    path = atlas.save(tmp_path / "atlas.parquet")
    raised = duckdb.sql(
        f"SELECT target, input_dtype, run, error_message FROM '{path}' "
        "WHERE status != 'ok' AND policy = 'float32'"
    ).fetchall()
    assert raised == [("ops.sqrt", "uint8", "jax", "sqrt of 'lstm' refused")]  # unnumbered
    frame = atlas.to_frame()
    assert len(frame) == 36 and frame.columns[0] == "target"
    dense = frame[(frame.target == "Dense") & (frame.policy == "mixed_float16")]
    assert set(dense.output_dtype) == {"float16"}
    assert json.loads(json.dumps(frame.cast_path.iloc[0]))[0]["stage"] == "input"


def test_the_diff_works_on_the_store(atlas, tmp_path):
    before = Atlas.load(atlas.save(tmp_path / "before.parquet"))
    changed = atlas.cell("Dense", "uint8", "mixed_float16")
    run = changed.runs["numpy"].model_copy(update={"output_dtype": "float32"})
    run = run.model_copy(update={"outcome": "float32"})
    cells = tuple(
        c.model_copy(update={"runs": {**c.runs, "numpy": run}}) if c is changed else c
        for c in atlas.cells
    )
    after = Atlas.load(atlas.model_copy(update={"cells": cells}).save(tmp_path / "after.parquet"))
    diff = before.diff(after)
    assert [(c.target, c.input_dtype, c.run, c.kind) for c in diff.changes] == [
        ("Dense", "uint8", "numpy", "dtype-changed")
    ]


def test_results_collected_one_at_a_time_in_any_order_make_the_same_atlas(atlas):
    results = [
        _result(t, d, p, b) for t in TARGETS for d in DTYPES for p in POLICIES for b in BACKENDS
    ]
    random.Random(0).shuffle(results)
    collector = AtlasCollector(_survey(()))
    for r in results:
        collector.add(r)
    streamed = collector.atlas(_survey(()))
    assert streamed.content() == atlas.content()
    assert (collector.added, collector.from_cache) == (36, 16)  # the 2 errors are not cached
    assert not any(isinstance(v, ProbeResult) for v in vars(collector).values())


def test_a_file_that_is_not_an_atlas_store_is_refused_clearly(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    with pytest.raises(InvalidSpecError, match="is not a Parquet file"):
        Atlas.load(tmp_path / "x.parquet")
    duckdb.sql(f"COPY (SELECT 1 AS a) TO '{tmp_path / 'y.parquet'}'")
    with pytest.raises(InvalidSpecError, match="is not an atlas"):
        Atlas.load(tmp_path / "y.parquet")
    with pytest.raises(InvalidSpecError, match=r"\.parquet or \.json"):
        Atlas(
            targets=(), input_dtypes=(), policies=(), backends=(), compute_dtypes={}, cells=()
        ).save(tmp_path / "a.csv")


# Issue 43: a damaged store is an InvalidSpecError naming the file, never a raw library error.


def _rewritten(path, tmp_path, *, header=None, drop=None):
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    if header is not None:
        meta[b"dtype_explorer.atlas"] = header
    if drop is not None:
        table = table.drop_columns([drop])
    out = tmp_path / "damaged.parquet"
    pq.write_table(table.replace_schema_metadata(meta), out)
    return out


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ({"header": b"{not json"}, "JSONDecodeError"),
        ({"header": b"[" * 200_000 + b"]" * 200_000}, "RecursionError"),
        ({"header": b"[1, 2]"}, "damaged"),
        ({"header": b'{"targets": 5}'}, "damaged"),
        ({"drop": "target"}, "damaged"),
    ],
)
def test_a_damaged_store_names_the_file(atlas, tmp_path, damage, said):
    damaged = _rewritten(atlas.save(tmp_path / "atlas.parquet"), tmp_path, **damage)
    for read in (lambda: list(Atlas.load_parts(damaged)), lambda: Atlas.load(damaged)):
        with pytest.raises(InvalidSpecError) as raised:
            read()
        assert "damaged.parquet" in str(raised.value) and said in str(raised.value)


def test_two_targets_never_share_a_page():
    """On main the targets "a b" and "a_b" wrote the same page, one over the other."""
    from dtype_explorer.views import target_data_href, target_href

    assert target_href("a b") != target_href("a_b")
    assert target_data_href("a b") != target_data_href("a_b")
    assert target_href("Dense") == "targets/Dense.html"  # a safe name keeps its page
