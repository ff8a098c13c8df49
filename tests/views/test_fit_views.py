"""A training run of several steps (``FitReport.steps``) as each medium lays it out, and the
rules on it: hand-built records, no Keras (the run itself is tested beside raw Keras in
tests/analyses/test_audit_fit_steps.py)."""

from __future__ import annotations

import pytest

from dtype_explorer.analyses.audit import _rules_across as across
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import AuditReport, FitReport, FitStep
from dtype_explorer.views import PALETTE
from dtype_explorer.views._figures import fit_figure
from dtype_explorer.views._fit import fit_steps_html, fit_steps_lines


def run(count: int, *, bad_from: int = 3, scaling: bool = True) -> FitReport:
    """``count`` steps; steps ``bad_from`` and ``bad_from + 1`` held inf/NaN (skipped, the
    scale halved, with loss scaling)."""
    scale, steps = 1024.0, []
    for i in range(1, count + 1):
        bad = i in (bad_from, bad_from + 1)
        scale = scale / 2 if bad and scaling else scale
        steps.append(
            FitStep(
                step=i,
                loss=1.0 / i,
                loss_scale=scale if scaling else None,
                skipped=bad and scaling,
                nonfinite={"dense/kernel": 4, "dense/bias": 1} if bad else {},
            )
        )
    return FitReport(
        loss="mse",
        optimizer="LossScaleOptimizer(SGD)" if scaling else "SGD",
        loss_scaling=scaling,
        loss_scale=1024.0 if scaling else None,
        steps=tuple(steps),
    )


def test_the_record_says_where_inf_first_appears_and_what_the_scale_did():
    fit = run(6)
    assert fit.first_nonfinite() == (3, "dense/kernel")
    assert fit.skipped_steps == (3, 4)
    assert fit.scale_changes() == [(3, 1024.0, 512.0), (4, 512.0, 256.0)]
    assert fit.steps_summary() == (
        "6 steps: loss 1 -> 0.1667; 2 skipped (3, 4); loss scale 1024 -> 256; "
        "first inf/NaN gradient at step 3 (dense/kernel)"
    )
    assert FitReport.from_json(fit.to_json()) == fit


def test_text_is_a_compact_table_with_its_head_and_tail():
    lines = fit_steps_lines(run(40))
    assert lines[0].strip().startswith("40 steps:")
    assert lines[1].split() == ["step", "loss", "loss", "scale", "skipped", "inf/NaN"]
    rows = [line.split()[0] for line in lines[2:-1]]
    assert rows == [*map(str, range(1, 11)), "...", *map(str, range(36, 41))]
    assert "(25 more)" in lines[12] and "report.figure()" in lines[-1]
    assert "5 in dense/kernel (+1 more)" in lines[4] and "skipped" in lines[4]
    assert fit_steps_lines(FitReport(loss="mse", optimizer="SGD")) == []


def test_html_flags_skipped_steps_and_inf_in_the_palettes_colours():
    html = fit_steps_html(run(5))
    assert html.startswith("<details open class='dx-fit-steps'>")
    assert html.count(PALETTE["training"]["skipped"]) == 2
    assert html.count(PALETTE["training"]["nonfinite"]) == 2


def test_the_figure_draws_loss_scale_and_skipped_steps_in_the_palettes_colours():
    figure = fit_figure(run(8))
    loss, scale, skipped = figure.data
    colours = PALETTE["training"]
    assert loss.line.color == colours["loss"] and list(loss.y) == [1.0 / i for i in range(1, 9)]
    assert scale.line.color == colours["loss_scale"] and scale.yaxis == "y2"
    assert list(skipped.x) == [3, 4] and skipped.marker.color == colours["skipped"]
    (note,) = figure.layout.annotations
    assert "step 3, dense/kernel" in note.text
    no_scaling = fit_figure(run(4, scaling=False))
    assert [t.name for t in no_scaling.data] == ["loss (mse)"]  # nothing skipped, no scale
    report = AuditReport(model="m", model_class="Functional", backend="jax", policy="float32")
    with pytest.raises(InvalidSpecError, match="this audit ran mode='call'"):
        report.figure()


def test_a_later_inf_is_its_own_finding_with_and_without_loss_scaling():
    (info,) = across.later_step_findings(run(6), "m")
    assert info.severity == "info" and info.details["step"] == 3
    assert "skipped 2 step(s) and lowered the loss scale to 256" in info.message
    (error,) = across.later_step_findings(run(6, scaling=False), "m")
    assert error.severity == "error" and "Training step 3 of 6" in error.message
    assert list(across.later_step_findings(run(6, bad_from=1), "m")) == []  # step 1: not later
    assert list(across.later_step_findings(run(6, bad_from=99), "m")) == []
