"""Losses and metrics as targets: the cast path of y_true/y_pred, the loss's output dtype, a
metric's variables through update_state/result/reset_state (real Keras, this process)."""

from __future__ import annotations

import keras
import pytest

from dtype_explorer.keras_run import make_spec, run_probe


def _probe(target, input_dtypes, policy=None):
    return run_probe(make_spec(target, input_dtypes, policy, backend=keras.backend.backend()))


def _steps(result, stage):
    return [s for s in result.cast_path if s.stage == stage]


def test_loss_converts_y_true_and_y_pred_to_its_dtype():
    r = _probe("losses.MeanSquaredError", ("int32", "float64"))
    assert r.status == "ok" and r.output_dtype == "float32" == r.documented_dtype
    received = [s.dtype for s in _steps(r, "autocast")]
    assert received == ["float32", "float32"]  # float64 predictions downcast, int labels cast
    assert all(s.changed for s in _steps(r, "autocast"))
    assert "Loss.__call__" in r.basis[0]


def test_loss_dtype_policy_is_the_conversion_target():
    r = _probe("losses.MeanSquaredError", ("float32", "float32"), "bfloat16")
    assert [s.dtype for s in _steps(r, "autocast")] == ["bfloat16", "bfloat16"]
    assert r.documented_dtype == "bfloat16"


def test_loss_function_has_no_documented_rule():
    r = _probe("losses.mean_squared_error", ("float32", "float64"))
    assert r.status == "ok" and r.verdict in {"undocumented", "declared-mismatch"}
    assert r.documented_dtype is None


def test_metric_variables_follow_the_compute_dtype():
    mean = _probe("metrics.Mean", ("float32",), "mixed_bfloat16")
    assert {v.stored for v in mean.variables.values()} == {"bfloat16"}
    assert mean.output_dtype == "bfloat16"
    after = [s for s in _steps(mean, "variables") if s.name.endswith("after reset_state")]
    assert after and all(s.note == "value 0.0" for s in after)


def test_integer_metric_state():
    total = _probe("metrics.Sum", ("float32",), "int32")
    assert total.variables["total"].stored == "int32"
    assert total.output_dtype == "int32"
    names = {s.name for s in _steps(total, "variables")}
    assert {"total after update_state", "total after reset_state"} <= names


def test_confusion_metrics_keep_float32_state_whatever_the_dtype():
    auc = _probe("metrics.AUC", ("float32", "float32"), "float64")
    assert {v.stored for v in auc.variables.values()} == {"float32"}
    assert auc.documented_dtype == "float64" and auc.output_dtype == "float32"
    assert auc.verdict == "deviates"


@pytest.mark.subprocess  # a string op's tensorflow reference (tnp) runs in a process of its own
def test_text_inputs_get_keras_own_answer_not_a_tool_failure():
    # the whole map found 2,876 of these made `invalid` by dtype-explorer's own sample (NumPy
    # has no 'string' dtype): text is now made as a user holds it, and Keras answers
    from dtype_explorer.runtime.pool import storable

    for target in ("ops.add", "ops.concatenate", "losses.MeanSquaredError", "metrics.AUC"):
        r = _probe(target, "string")
        assert r.error is None or r.error.where != "tool", (target, r.error)
        assert r.status in ("ok", "error"), (target, r.status, r.error)
        assert storable(r), target
        assert all(e.dtype is None or e.dtype != "object" for e in r.expectations), target
