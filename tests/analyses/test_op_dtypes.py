"""A layer takes arrays only: a survey of layers and ops probes the weak Python scalars
(``python_int``, ...) on its ops only, and every reader of the survey (cell, to_frame,
counts, the heatmap, diff, the summary, the atlas's grids, pages and map line) says "arrays
only" for a layer's weak-scalar rows, never "absent", never a failure. A survey of layers
alone still probes what it is asked. Real Keras on the numpy worker; the rules on hand-built
records."""

from __future__ import annotations

import json
import re

import pytest

import dtype_explorer as dx
from dtype_explorer.analyses import _survey
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import ARRAYS_ONLY, Atlas, Survey, op_dtypes
from dtype_explorer.records._survey import OPS_COLUMN, arrays_only, plan_text, target_dtypes
from dtype_explorer.views import atlas_site, target_href
from dtype_explorer.views._atlas_data import grid_data

LAYERS, OPS = ["Dense", "Flatten"], ["ops.add", "ops.abs"]
ARRAYS, WEAK = ["int8", "float16"], ["python_int", "python_float"]
DTYPES = ARRAYS + WEAK
POLICIES = ["float32", "mixed_float16"]
#: layers x arrays x policies + ops x every dtype x their one policy
PLANNED = len(LAYERS) * len(ARRAYS) * len(POLICIES) + len(OPS) * len(DTYPES)


@pytest.fixture(scope="module")
def mixed() -> dx.Survey:
    return dx.survey(LAYERS + OPS, DTYPES, POLICIES, backends="numpy", progress=False)


@pytest.fixture(scope="module")
def layers_alone() -> dx.Survey:
    return dx.survey(["Flatten"], DTYPES, POLICIES, backends="numpy", progress=False)


def test_a_mixed_survey_probes_the_weak_scalars_on_its_ops_only(mixed):
    assert mixed.op_dtypes == tuple(WEAK) and mixed.op_policy == "float32"
    assert len(mixed.results) == PLANNED == mixed.planned_cells() == 16
    layer_specs = [r.spec for r in mixed.results if not r.spec.target.startswith("ops.")]
    assert {s.input_dtypes[0] for s in layer_specs} == set(ARRAYS)  # asked explicitly: same rule
    op_specs = [r.spec for r in mixed.results if r.spec.target.startswith("ops.")]
    assert {s.input_dtypes[0] for s in op_specs} == set(DTYPES)
    assert mixed.dtypes_of("Dense") == tuple(ARRAYS) and mixed.dtypes_of("ops.add") == tuple(DTYPES)
    # the op answered on a Python scalar: Keras's own answer, probed
    weak = mixed.cell("ops.abs", "python_float").results["numpy"]
    assert weak.ok and weak.spec.input_dtypes == ("python_float",)


def test_a_survey_of_layers_alone_still_probes_what_it_is_asked(layers_alone):
    assert layers_alone.op_dtypes == ()
    assert len(layers_alone.results) == len(DTYPES) * len(POLICIES)
    refused = layers_alone.cell("Flatten", "python_int").results["numpy"]
    assert refused.error is not None and "inputs of ops, not of layers" in refused.error.message


def test_a_layers_weak_scalar_cell_is_refused_with_what_is_valid(mixed):
    with pytest.raises(InvalidSpecError, match="arrays only") as raised:
        mixed.cell("Dense", "python_int", "mixed_float16")
    assert "int8, float16" in str(raised.value) and "Received: input_dtype='python_int'" in str(
        raised.value
    )
    assert mixed.cell("Dense", "int8", "mixed_float16").results["numpy"].output_dtype == "float16"
    with pytest.raises(InvalidSpecError, match="dtype"):
        mixed.cell("Dense", "python_bool")  # not in this survey at all: the usual refusal


def test_the_frame_counts_heatmap_and_summary_say_arrays_only_for_a_layer(mixed):
    frame = mixed.to_frame()
    layers = frame[~frame["target"].str.startswith("ops.")]
    assert set(layers["input_dtype"]) == set(ARRAYS)
    ops = frame[frame["target"].str.startswith("ops.")]
    assert set(ops["input_dtype"]) == set(DTYPES) and "raises" not in set(layers["classification"])
    counts = mixed.counts()
    assert {counts[p].sum() for p in POLICIES} == {len(LAYERS) * len(ARRAYS)}
    assert counts[OPS_COLUMN].sum() == len(OPS) * len(DTYPES)
    figure = mixed.figure()
    rows, columns = list(figure.data[0].y), list(figure.data[0].x)
    dense, weak = rows.index("Dense"), columns.index("python_int")
    assert figure.data[0].text[dense][weak] == "arrays" and figure.data[0].z[dense][weak] is None
    assert ARRAYS_ONLY in figure.data[0].customdata[dense][weak]
    assert figure.data[0].z[rows.index("ops.add")][weak] is not None  # an op's: coloured
    summary = mixed._repr_html_()
    assert (
        "2 layers x 2 input dtypes x 2 policies + 2 ops x 4 input dtypes (2 weak Python scalars "
        "too: a layer takes arrays only; an op reads no policy: under float32 only) = 16 cells"
    ) in summary
    assert ARRAYS_ONLY in mixed.to_html()


def test_a_diff_with_a_survey_of_layers_alone_finds_no_change_on_the_weak_scalars(
    mixed, layers_alone
):
    for before, after in ((layers_alone, mixed), (mixed, layers_alone)):
        diff = before.diff(after)
        flatten = diff[diff["target"] == "Flatten"]
        assert flatten.empty  # the same arrays' answers; its weak rows left out by plan
    atlas, alone = Atlas.from_survey(mixed), Atlas.from_survey(layers_alone)
    assert not [c for c in atlas.diff(alone).changes if c.target == "Flatten"]
    assert not [c for c in alone.diff(atlas).changes if c.target == "Flatten"]


def test_an_atlas_page_of_a_layer_has_no_weak_rows_and_of_an_op_has_them(mixed, tmp_path):
    atlas = Atlas.from_survey(mixed)
    assert atlas.op_dtypes == tuple(WEAK) and len(atlas.cells) == PLANNED
    with pytest.raises(InvalidSpecError, match="arrays only"):
        atlas.cell("Flatten", "python_float")
    layer, op = grid_data(atlas, "Dense"), grid_data(atlas, "ops.add")
    assert layer["dtypes"] == ARRAYS and ARRAYS_ONLY in layer["dtype_note"]
    assert "python_int, python_float" in layer["dtype_note"]
    assert op["dtypes"] == DTYPES and op["dtype_note"] is None
    site = atlas_site(atlas)
    for target, dtypes in (("Flatten", ARRAYS), ("ops.abs", DTYPES)):
        page = site[target_href(target)]
        found = re.search(r"id='ax-data' type='application/json'>(.*?)</script>", page)[1]
        assert json.loads(found)["grid"]["dtypes"] == dtypes
    line = re.search(r"<th>map</th><td>(.*?)</td>", site[target_href("Dense")])[1]
    assert line == (
        "2 layers x 2 input dtypes x 2 policies + 2 ops x 4 input dtypes (2 weak Python scalars "
        "too: a layer takes arrays only; an op reads no policy: under float32 only) = 16 cells, "
        "each on 1 backend"
    )
    for path in (tmp_path / "atlas.json", tmp_path / "atlas.parquet"):
        assert Atlas.load(atlas.save(path)).op_dtypes == tuple(WEAK)


def test_the_default_dtypes_of_a_mixed_survey_plan_the_weak_scalars_for_ops_only():
    names, dtypes, policies = _survey.resolve(["Dense", "ops.add"], None, None)
    ops_only = op_dtypes(names, dtypes)
    assert ops_only == ("python_int", "python_float", "python_bool")
    plan = Survey(
        targets=names,
        input_dtypes=dtypes,
        policies=policies,
        backends=(),
        compute_dtypes={},
        results=(),
        op_policy="float32",
        op_dtypes=ops_only,
    )
    keras = len(dtypes) - len(ops_only)
    assert plan.planned_cells() == keras * len(policies) + len(dtypes) == 18 * 4 + 21


def test_the_rules_of_an_ops_dtypes_on_hand_built_axes():
    assert op_dtypes(["Dense", "ops.add"], ["int8", "python_bool"]) == ("python_bool",)
    assert op_dtypes(["ops.add", "ops.abs"], ["int8", "python_int"]) == ()  # ops alone
    assert op_dtypes(["Dense", "losses.MeanSquaredError"], ["python_int"]) == ()  # no op
    assert target_dtypes("losses.MeanSquaredError", DTYPES, WEAK) == tuple(ARRAYS)
    assert target_dtypes("ops.add", DTYPES, WEAK) == tuple(DTYPES)
    assert arrays_only(("Dense", "python_int", "float32"), WEAK)
    assert not arrays_only(("Dense", "int8", "float32"), WEAK)
    assert not arrays_only(("Dense", "python_int", "float32"), ())  # a survey of layers alone
    # one policy, the weak scalars only apart: still a true equation
    assert plan_text(["Dense", "ops.add"], DTYPES, ["float32"], None, WEAK) == (
        "1 layer x 2 input dtypes x 1 policy + 1 op x 4 input dtypes x 1 policy "
        "(2 weak Python scalars too: a layer takes arrays only) = 6 cells"
    )
    assert plan_text(["Dense"], DTYPES, ["float32"], None, ()) == (
        "1 target x 4 input dtypes x 1 policy = 4 cells"
    )
