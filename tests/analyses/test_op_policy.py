"""An op takes no dtype policy: a survey of layers and ops probes each op once per input dtype
and backend, under the first policy asked, and every reader of the survey (cell, counts, the
heatmap, diff, the atlas's grids and map line) says "any policy" for an op's other policies,
never "absent" and never a copied answer. Real Keras on the numpy worker."""

from __future__ import annotations

import json
import re

import pytest

import dtype_explorer as dx
from dtype_explorer.records import ANY_POLICY, Atlas, op_policy
from dtype_explorer.records._survey import OPS_COLUMN, plan_text
from dtype_explorer.views import atlas_site, target_href
from dtype_explorer.views._atlas_data import grid_data

LAYERS, OPS = ["Dense", "Flatten"], ["ops.add", "ops.abs"]
DTYPES = ["int32", "float16"]
POLICIES = ["float32", "mixed_float16", "float64"]


@pytest.fixture(scope="module")
def mixed() -> dx.Survey:
    return dx.survey(LAYERS + OPS, DTYPES, POLICIES, backends="numpy", progress=False)


def test_a_mixed_survey_probes_each_op_once_per_dtype_under_the_first_policy(mixed):
    assert mixed.op_policy == "float32"
    assert len(mixed.results) == len(LAYERS) * len(DTYPES) * len(POLICIES) + len(OPS) * len(DTYPES)
    op_specs = [r.spec for r in mixed.results if r.spec.target.startswith("ops.")]
    assert {s.policy for s in op_specs} == {"float32"}  # probed under it, and it says so
    layer_specs = [r.spec for r in mixed.results if not r.spec.target.startswith("ops.")]
    assert {s.policy for s in layer_specs} == set(POLICIES)
    assert mixed.policies_of("ops.add") == ("float32",) and mixed.policies_of("Dense") == tuple(
        POLICIES
    )


def test_an_op_asked_under_another_policy_answers_its_one_cell_which_says_where_it_ran(mixed):
    cell = mixed.cell("ops.add", "int32", "mixed_float16")
    assert cell is mixed.cell("ops.add", "int32", "float32")
    assert cell.policy == "float32" and cell.compute_dtype == "float32"
    assert cell.results["numpy"].spec.policy == "float32"
    assert cell.results["numpy"].output_dtype == "int32"
    # a layer's policy still decides: Dense casts int32 to each policy's compute dtype
    assert mixed.cell("Dense", "int32", "mixed_float16").results["numpy"].output_dtype == "float16"
    with pytest.raises(ValueError, match="policy"):
        mixed.cell("ops.add", "int32", "bfloat16")  # not in this survey: still refused


def test_the_frame_counts_and_heatmap_say_any_policy_for_an_op(mixed):
    frame = mixed.to_frame()
    ops = frame[frame["target"].str.startswith("ops.")]
    assert len(ops) == len(OPS) * len(DTYPES) and set(ops["policy"]) == {"float32"}
    counts = mixed.counts()
    assert list(counts.columns) == [*POLICIES, OPS_COLUMN]
    assert counts[OPS_COLUMN].sum() == len(OPS) * len(DTYPES)
    per_policy = {p: counts[p].sum() for p in POLICIES}
    assert set(per_policy.values()) == {len(LAYERS) * len(DTYPES)}  # each counts the same cells
    figure = mixed.figure()
    rows = list(figure.data[1].y)  # the mixed_float16 tab
    add = rows.index("ops.add")
    assert figure.data[1].z[add] == [None, None] and figure.data[1].text[add] == ["any", "any"]
    assert ANY_POLICY in figure.data[1].customdata[add][0]
    assert "policy float32" in figure.data[1].customdata[add][0]
    assert figure.data[0].z[add][0] is not None  # coloured in its own tab
    assert "ops under float32 only" in figure.layout.title.text
    summary = mixed._repr_html_()
    assert "2 layers x 2 input dtypes x 3 policies + 2 ops x 2 input dtypes" in summary
    assert f"= 16 cells, each on 1 backend (numpy): {len(mixed.results)} probes" in summary


def test_a_diff_with_a_survey_of_ops_under_every_policy_finds_no_missing_cell(mixed):
    ops_alone = dx.survey(OPS, DTYPES, POLICIES, backends="numpy", progress=False)
    assert ops_alone.op_policy is None and len(ops_alone.results) == 2 * 2 * 3  # as asked
    layers = [t for t in mixed.targets if not t.startswith("ops.")]
    only_ops = mixed.model_copy(
        update={
            "targets": tuple(OPS),
            "results": tuple(r for r in mixed.results if r.spec.target not in layers),
        }
    )
    diff = only_ops.diff(ops_alone)
    assert "absent" not in set(diff["before"]) | set(diff["after"])
    assert diff.empty  # the same answers under every policy: nothing changed


def test_the_atlas_of_a_mixed_survey_shows_one_policy_column_for_an_op(mixed, tmp_path):
    atlas = Atlas.from_survey(mixed)
    assert atlas.op_policy == "float32"
    assert len(atlas.cells) == 16
    assert atlas.cell("ops.abs", "float16", "float64").policy == "float32"
    op = grid_data(atlas, "ops.abs")
    assert op["policies"] == ["float32"] and op["policy_note"] == ANY_POLICY
    assert {cell[1] for cell in op["cells"]} == {0}
    layer = grid_data(atlas, "Dense")
    assert layer["policies"] == POLICIES and layer["policy_note"] is None
    site = atlas_site(atlas)
    page = site[target_href("ops.abs")]
    data = json.loads(re.search(r"id='ax-data' type='application/json'>(.*?)</script>", page)[1])
    assert data["grid"]["policies"] == ["float32"]
    line = re.search(r"<th>map</th><td>(.*?)</td>", page)[1]
    assert line == (
        "2 layers x 2 input dtypes x 3 policies + 2 ops x 2 input dtypes (an op reads no policy: "
        "under float32 only) = 16 cells, each on 1 backend"
    )
    other = Atlas.from_survey(dx.survey(OPS, DTYPES, POLICIES, backends="numpy", progress=False))
    changes = atlas.diff(other).changes
    assert not [c for c in changes if c.target.startswith("ops.")]  # none absent, none changed
    assert atlas.content() == Atlas.model_validate_json(atlas.to_json()).content()


def test_the_rules_of_an_ops_policy_on_hand_built_axes():
    assert op_policy(["Dense", "ops.add"], ["mixed_bfloat16", "float32"]) == "mixed_bfloat16"
    assert op_policy(["Dense", "ops.add"], ["float32"]) is None  # one policy: nothing to skip
    assert op_policy(["Dense", "Flatten"], POLICIES) is None
    assert plan_text(["Dense"], DTYPES, POLICIES, None) == (
        "1 target x 2 input dtypes x 3 policies = 6 cells"
    )
    quantized = ["float32", "float32+quantize=int8"]
    assert plan_text(["Dense", "ops.add"], DTYPES, quantized, None) == (
        "1 layer x 2 input dtypes x 2 policies + 1 op x 2 input dtypes x 1 policy "
        "(an op is not quantized) = 6 cells"
    )
