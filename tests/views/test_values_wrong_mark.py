"""Issue 38, item 5: no ✓ next to values found wrong (``ProbeResult.shown_verdict``)."""

import io

import numpy as np
import pytest
from rich.console import Console

import dtype_explorer as dx
from dtype_explorer.records import ProbeResult, ProbeSet
from dtype_explorer.views._terminal import probe_set_table
from dtype_explorer.views._text import format_result

keras = pytest.importorskip("keras")


def test_a_power_whose_values_wrap_shows_no_check_mark():
    """Old code: ``probe ops.power --values`` said "✓ as-documented" in the summary while the
    details said the values were wrong."""
    base, exponent = np.array([100, 2], "int8"), np.array([3, 2], "int8")
    raw = keras.ops.convert_to_numpy(keras.ops.power(base, exponent))  # raw Keras, untraced
    assert int(raw[0]) != 100**3  # int8 wrapped: the case is real
    r = dx.probe("ops.power", values=[base, exponent], backend=None)
    assert r.value_findings() and r.verdict == "as-documented"
    assert r.shown_verdict == "values-wrong"
    assert "values are wrong" in r.headline
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(probe_set_table(ProbeSet(results=(r,))))
    assert "✓" not in console.file.getvalue() and "values-wrong" in console.file.getvalue()
    assert "✓" not in r._repr_html_()


def test_across_backends_no_medium_shows_a_check_next_to_wrong_values():
    """Old code: the multi-backend card's badge (``ProbeSet.verdict``) said "✓ as-documented",
    the terminal caption "across backends: as-documented", ``summary()`` and the text view
    the plain verdict, while every backend found the values wrong."""
    base, exponent = np.array([100, 2], "int8"), np.array([3, 2], "int8")
    raw = keras.ops.convert_to_numpy(keras.ops.power(base, exponent))  # raw Keras, untraced
    assert int(raw[0]) != 100**3  # int8 wrapped: the case is real
    rs = dx.probe("ops.power", values=[base, exponent], backend=["jax", "numpy"])
    assert all(r.value_findings() and r.verdict == "as-documented" for r in rs)
    assert rs.verdict == "as-documented" and rs.shown_verdict == "values-wrong"
    # text: each line, the line across them, the full text of one result
    assert "across backends: values-wrong" in rs.summary().splitlines()
    assert all(r.summary().endswith("(values-wrong)") for r in rs)
    assert format_result(rs.results[0]).splitlines()[0].endswith("ok, values-wrong")
    console = Console(file=io.StringIO(), width=140, color_system=None)
    console.print(probe_set_table(rs))
    table = console.file.getvalue()
    assert "across backends: values-wrong" in table and "✓" not in table
    # HTML: the card's badge across backends and each backend's row
    html = rs._repr_html_()
    assert "✓" not in html and html.count("values-wrong") >= 3
    # the widget's JSON: computed once on the record, read back as it was
    said = rs.results[0].to_dict()
    assert said["shown_verdict"] == "values-wrong" and said["verdict"] == "as-documented"
    assert ProbeResult.from_dict(said) == rs.results[0]


def test_an_undocumented_op_whose_values_overflow_says_values_wrong_in_its_summary():
    """``ops.sum`` of ten thousand float16 tens is inf (float16 holds at most 65504). Keras
    documents no dtype rule for it, and old code's summary said only "(undocumented)": the
    inf was in the details alone, as "nonfinite at output 0 []"."""
    tens = np.full((10000,), 10.0, "float16")
    raw = keras.ops.convert_to_numpy(keras.ops.sum(tens))  # raw Keras, untraced
    assert np.isinf(raw)  # the case is real
    r = dx.probe("ops.sum", values=[tens], backend=None, use_cache=False)
    assert r.verdict == "undocumented" and r.shown_verdict == "values-wrong"
    assert r.summary().endswith("(values-wrong)")
    [finding] = r.value_findings()
    assert finding.text() == "nonfinite at output 0: inf in float16 from finite input"
    rs = ProbeSet(results=(r,))
    assert rs.verdict == "undocumented" and rs.shown_verdict == "values-wrong"
    # a dtype against the docs keeps its verdict: the summary's word is the dtype's
    deviates = r.model_copy(update={"verdict": "deviates"})
    assert deviates.shown_verdict == "deviates"
