"""What an atlas target page and its data file carry (views/_atlas_data.py), from hand-built
records: every field of a run is in the data file but the one the page never shows, each
distinct text, step and run once, and the grids' cells point at the right classes and labels.
(js/test/atlas.test.js checks the script puts every cell back as the records dump it.)"""

from __future__ import annotations

from dtype_explorer.records import Atlas, AtlasCell, AtlasRun, CastStep
from dtype_explorer.views._atlas_data import (
    LEFT_OUT,
    RUN_FIELDS,
    STEP_FIELDS,
    grid_data,
    target_data,
)

STEPS = (
    CastStep(stage="input", dtype="uint8"),
    CastStep(stage="variables", dtype="float32", name="kernel", note="stored as float32"),
    CastStep(stage="output", dtype="float16", changed=True, note="cast to the compute dtype"),
)


def run(outcome: str = "float16", **fields) -> AtlasRun:
    ok = not outcome.startswith("raises")
    return AtlasRun(
        status="ok" if ok else "error",
        outcome=outcome,
        classification="casts-to-compute" if ok else "raises",
        output_dtype=outcome if ok else None,
        verdict="as-documented" if ok else "error",
        cast_path=STEPS if ok else STEPS[:1],
        path_text="uint8 -> float16",
        trace_ops=3,
        **fields,
    )


def atlas() -> Atlas:
    raises = run("raises TypeError", error_type="TypeError", error_message="no uint8")
    cells = [
        AtlasCell(
            target="Dense",
            input_dtype=dtype,
            policy=policy,
            compute_dtype="float16",
            classification="casts-to-compute" if dtype == "uint8" else "raises",
            runs={"jax": run(), **({"torch": raises} if dtype == "int8" else {"torch": run()})},
        )
        for dtype in ("uint8", "int8")
        for policy in ("mixed_float16",)
    ]
    cells.append(cells[0].model_copy(update={"policy": "float16", "runs": {"jax": run()}}))
    return Atlas(
        targets=("Dense",),
        input_dtypes=("uint8", "int8"),
        policies=("mixed_float16", "float16"),
        backends=("jax", "torch"),
        compute_dtypes={"mixed_float16": "float16", "float16": "float16"},
        cells=tuple(cells),
    )


def test_a_data_file_holds_every_field_but_the_one_never_shown():
    assert set(RUN_FIELDS) | LEFT_OUT == set(AtlasRun.model_fields)
    assert set(STEP_FIELDS) == set(CastStep.model_fields)


def test_a_data_file_keeps_each_text_step_and_run_once():
    data = target_data(atlas(), "Dense")
    assert len(data["strings"]) == len(set(data["strings"]))
    assert len(data["runs"]) == 2  # three cells, five runs: the float16 answer and the error
    assert len(data["steps"]) == 3
    assert data["run_names"] == ["jax", "torch"]
    strings = data["strings"]
    first, _, last = data["cells"]
    assert [strings[i] for i in first[:4]] == [
        "uint8",
        "mixed_float16",
        "float16",
        "casts-to-compute",
    ]
    assert first[4] == first[5] and last[5] == -1  # the same run once; no torch run there
    assert "uint8 -> float16" not in strings  # the path's text: the page draws its steps


def test_the_grids_point_each_cell_at_its_class_and_label():
    grid = grid_data(atlas(), "Dense")
    assert grid["runs"] == ["jax", "torch"]
    cells = {(grid["dtypes"][c[0]], grid["policies"][c[1]]): c for c in grid["cells"]}
    mixed = cells[("int8", "mixed_float16")]
    classes, labels = grid["classes"], grid["labels"]
    assert (classes[mixed[2]], labels[mixed[3]]) == ("raises", "≠")  # the runs differ
    assert (labels[mixed[5]], labels[mixed[7]]) == ("f16", "raises")  # as the grid says it
    assert classes[mixed[6]] == "raises"
    only_jax = cells[("uint8", "float16")]
    assert only_jax[6:] == [-1, -1] and labels[only_jax[3]] == "f16"
