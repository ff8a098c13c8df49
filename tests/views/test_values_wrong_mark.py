"""Issue 38, item 5: no ✓ next to values found wrong (``ProbeResult.shown_verdict``)."""

import io

import numpy as np
import pytest
from rich.console import Console

import dtype_explorer as dx
from dtype_explorer.records import ProbeSet
from dtype_explorer.views._terminal import probe_set_table

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
