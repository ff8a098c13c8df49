"""The layer survey on a small real subset (jax and numpy workers): classes, table, JSON,
diff, heatmap and HTML export, cached rerun."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import Survey, classify_cell, classify_result
from dtype_explorer.versions import library_version

TARGETS = ["Dense", "Conv1D", "Flatten", "BatchNormalization"]
DTYPES = ["uint8", "float64", "float16"]
POLICIES = ["float32", "mixed_float16"]
BACKENDS = ["jax", "numpy"]


@pytest.fixture(scope="module")
def small() -> Survey:
    return dx.survey(TARGETS, DTYPES, POLICIES, BACKENDS, progress=False)


def test_every_cell_answered_once_per_backend(small: Survey) -> None:
    assert small.targets == tuple(TARGETS)
    assert small.compute_dtypes == {"float32": "float32", "mixed_float16": "float16"}
    assert len(small.results) == len(TARGETS) * len(DTYPES) * len(POLICIES) * len(BACKENDS)
    cells = small.cells()
    assert len(cells) == len(TARGETS) * len(DTYPES) * len(POLICIES)
    assert all(set(c.results) == set(BACKENDS) for c in cells)


def test_known_cells(small: Survey) -> None:
    # scenario 1: Conv1D on uint8 returns float32 on jax and raises on numpy
    conv = small.cell("Conv1D", "uint8", "float32")
    assert conv.results["jax"].output_dtype == "float32"
    assert not conv.results["numpy"].ok
    assert conv.classification == "diverges"
    assert conv.backend_classification("jax") == "casts-to-compute"
    assert conv.backend_classification("numpy") == "raises"
    # reshaping layers pass ints through; float inputs are autocast to the compute dtype
    assert small.cell("Flatten", "uint8", "float32").classification == "keeps-input"
    assert small.cell("Flatten", "float64", "mixed_float16").classification == "casts-to-compute"
    assert small.cell("Dense", "float64", "float32").classification == "casts-to-compute"
    dense16 = small.cell("Dense", "float16", "mixed_float16")
    assert {r.output_dtype for r in dense16.results.values()} == {"float16"}


def test_classification_rules_on_real_results(small: Survey) -> None:
    jax_conv = small.cell("Conv1D", "uint8", "float32").results["jax"]
    assert classify_result(jax_conv, "float32") == "casts-to-compute"
    assert classify_result(jax_conv, "float16") == "other-dtype"
    flatten = small.cell("Flatten", "uint8", "float32").results["jax"]
    assert classify_result(flatten, "float32") == "keeps-input"
    mismatched = jax_conv.model_copy(update={"declared_dtype": "float16"})
    assert classify_result(mismatched, "float32") == "declared-mismatch"
    assert classify_cell([mismatched, jax_conv], "float32") == "declared-mismatch"
    numpy_conv = small.cell("Conv1D", "uint8", "float32").results["numpy"]
    assert classify_cell([numpy_conv, numpy_conv], "float32") == "raises"
    assert classify_cell([jax_conv, flatten], "float32") == "diverges"


def test_frames(small: Survey) -> None:
    cells = small.to_frame()
    assert len(cells) == len(small.cells())
    assert {"target", "input_dtype", "policy", "classification", *BACKENDS} <= set(cells.columns)
    row = cells[(cells.target == "Conv1D") & (cells.input_dtype == "uint8")].iloc[0]
    assert row["jax"] == "float32" and row["numpy"].startswith("raises")
    probes = small.to_frame(per="probe")
    assert len(probes) == len(small.results)
    assert probes["cast_path"].str.len().min() > 0
    counts = small.counts()
    assert counts.to_numpy().sum() == len(small.cells())
    # each cell keeps its op trace: the first op that changed a dtype, per backend and probe
    traced = small.to_frame(first_change=True)
    conv = traced[(traced.target == "Conv1D") & (traced.input_dtype == "uint8")].iloc[0]
    assert conv["jax first change"] == "ops.nn.conv"
    per_probe = small.to_frame(per="probe", first_change=True)
    dense = per_probe[
        (per_probe.target == "Dense")
        & (per_probe.input_dtype == "float64")
        & (per_probe.policy == "mixed_float16")
    ]
    first = dict(zip(dense["backend"], dense["first_change"], strict=True))
    # jax (x64 off) converts float64 to float32 on the way in; numpy's first change is the cast
    assert first == {"jax": "backend.convert_to_tensor", "numpy": "backend.cast"}
    assert all(at.startswith("keras/src/dtype_policies/") for at in dense["first_change_at"])
    assert list(counts.columns) == POLICIES


def test_json_round_trip_and_save(small: Survey, tmp_path) -> None:
    again = Survey.from_json(small.to_json())
    assert again.results == small.results
    assert again.to_frame().equals(small.to_frame())
    path = small.save(tmp_path / "s.json")
    assert Survey.load(path).cells()[0].classification == small.cells()[0].classification
    page = small.save(tmp_path / "s.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "Plotly" in page and "Conv1D" in page
    assert "var(--jp-" in page
    with pytest.raises(InvalidSpecError, match=r"\.html or \.json"):
        small.save(tmp_path / "s.txt")


def test_diff(small: Survey) -> None:
    assert small.diff(small).empty
    first = small.results[0]
    failed = first.model_copy(update={"status": "timeout", "output_dtype": None})
    changed = small.model_copy(update={"results": (failed, *small.results[1:])})
    diff = small.diff(changed)
    assert len(diff) == 1
    row = diff.iloc[0]
    assert (row.target, row.backend) == (first.spec.target, first.backend)
    assert row.before == first.output_dtype and row.after == "timeout"
    assert row.after_class == "raises"
    fewer = Survey.from_json(small.to_json()).model_copy(
        update={"results": tuple(r for r in small.results if r.spec.policy == "float32")}
    )
    removed = fewer.diff(small)
    assert set(removed.before) == {"absent"} and set(removed.policy) == {"mixed_float16"}
    keras = library_version("keras")
    assert diff.attrs == {"before": f"keras {keras}", "after": f"keras {keras}"}


def test_diff_outcomes_only_leaves_out_a_change_of_class_alone(small: Survey) -> None:
    first = small.results[0]
    assert first.ok and first.declared_dtype == first.output_dtype
    odd = "int8" if first.output_dtype != "int8" else "int16"
    mismatch = first.model_copy(update={"declared_dtype": odd})  # same outcome, other class
    changed = small.model_copy(update={"results": (mismatch, *small.results[1:])})
    (row,) = small.diff(changed).itertuples()
    assert row.before == row.after and row.after_class == "declared-mismatch"
    assert small.diff(changed, outcomes_only=True).empty


def test_figure_axes_and_hover(small: Survey) -> None:
    figure = small.figure()
    assert len(figure.data) == len(POLICIES)
    heat = figure.data[0]
    assert list(heat.x) == DTYPES and list(heat.y) == TARGETS
    conv_hover = heat.customdata[TARGETS.index("Conv1D")][DTYPES.index("uint8")]
    assert "diverges" in conv_hover and "numpy: error" in conv_hover and "jax:" in conv_hover
    assert len(figure.layout.updatemenus[0].buttons) == len(POLICIES)
    single = small.figure(policy="mixed_float16")
    assert len(single.data) == 1 and "float16" in single.layout.title.text
    with pytest.raises(InvalidSpecError, match="mixed_float16"):
        small.figure(policy="mixed_flaot16")


def test_a_rerun_is_answered_from_the_cache(small: Survey) -> None:
    again = dx.survey(TARGETS, DTYPES, POLICIES, BACKENDS, progress=False)
    assert all(r.cached for r in again.results)
    assert small.diff(again).empty


def test_bad_arguments_name_the_closest_valid_value() -> None:
    with pytest.raises(InvalidSpecError, match="float32"):
        dx.survey(["Dense"], ["flaot32"], backends=["numpy"])
    with pytest.raises(InvalidSpecError, match="Dense"):
        dx.survey(["Dnese"], backends=["numpy"])
    with pytest.raises(InvalidSpecError, match="empty"):
        dx.survey([], backends=["numpy"])


def test_a_survey_streamed_to_a_sink_holds_only_the_answers_in_flight(tmp_path) -> None:
    """Each answer goes to the sink as it arrives and is let go: counted by which of them are
    still alive (weak references) each time the sink is called, and once it has finished."""
    import gc
    import weakref

    from dtype_explorer.analyses import _run
    from dtype_explorer.runtime import pool

    seen: list[weakref.ref] = []
    most_alive = 0

    def sink(result) -> None:
        nonlocal most_alive
        seen.append(weakref.ref(result))
        gc.collect()  # what is still reachable, not garbage not yet collected
        most_alive = max(most_alive, sum(r() is not None for r in seen))

    targets = ["Dense", "Flatten", "ReLU", "ops.sqrt"]
    dtypes = ["float32", "int32", "uint8", "float16", "int8", "bfloat16"]
    found = dx.survey(targets, dtypes, ["float32", "mixed_float16"], backends="numpy",
                      progress=False, sink=sink)  # fmt: skip
    gc.collect()
    assert found.results == () and len(seen) == 3 * 6 * 2 + 6  # ops.sqrt: one policy
    # nothing kept once handed on (the worker pool's result thread may still hold its last)
    assert sum(r() is not None for r in seen) <= 1
    in_flight = _run.WINDOW * pool.workers_per_backend()
    assert most_alive <= in_flight + 1 < len(seen)  # never the whole survey at once


def test_the_front_asks_a_worker_for_a_policy_s_compute_dtype_and_never_imports_keras(tmp_path):
    """On the old code a survey's front imported Keras (TensorFlow, its default backend:
    ~800 MB) to ask each policy's compute dtype. Now a worker answers it, Keras's own."""
    code = (
        "import sys; from dtype_explorer.analyses import _survey; "
        "print(_survey.compute_dtype('mixed_bfloat16'), 'keras' in sys.modules)"
    )
    env = {**os.environ, "DTYPE_EXPLORER_CACHE_DIR": str(tmp_path)}
    env.pop("KERAS_BACKEND", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.split() == ["bfloat16", "False"], done.stderr[-2000:]
