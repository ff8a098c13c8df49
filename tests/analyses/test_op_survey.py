"""Ops as survey targets: names, groups and glob patterns over the catalog."""

from __future__ import annotations

import pytest

import dtype_explorer as dx
from dtype_explorer import catalog
from dtype_explorer.analyses import expand_targets
from dtype_explorer.errors import InvalidSpecError


def test_target_patterns_expand_over_the_catalog() -> None:
    every = expand_targets("ops")
    assert len(every) == len(catalog.ops()) > 340 and len(set(every)) == len(every)
    nn = expand_targets("ops.nn.*")
    assert {"ops.relu", "ops.softmax", "ops.silu"} <= set(nn)  # canonical names, once each
    assert "ops.add" not in nn
    assert expand_targets("ops.nn.swish") == ("ops.silu",)  # an alias is its entry
    assert set(expand_targets("ops.linalg")) == set(catalog.groups()["ops.linalg"])
    assert set(expand_targets("ops.image.*")) == set(catalog.groups()["ops.image"])
    assert "Conv2D" in expand_targets("Conv*D")
    with pytest.raises(InvalidSpecError, match="matches no target"):
        expand_targets("ops.nope*")
    with pytest.raises(InvalidSpecError, match=r"did you mean 'ops\.add'"):
        expand_targets("ops.addd")


def test_survey_of_an_op_pattern() -> None:
    survey = dx.survey(
        targets=["ops.nn.sw*", "ops.linalg.inv", "ops.size"],
        input_dtypes=["float32", "int8"],
        backends="numpy",
        progress=False,
    )
    assert survey.targets == ("ops.silu", "ops.inv", "ops.size")
    assert survey.policies == ("float32",)  # ops take no policy: one column, not four
    assert survey.cell("ops.silu", "float32").results["numpy"].output_dtype == "float32"
    size = survey.cell("ops.size", "float32").results["numpy"]
    assert size.output_dtype == "python_int"  # a Python int, named as such
    assert survey.cell("ops.size", "float32").classification == "declared-mismatch"
    assert survey.figure().data
