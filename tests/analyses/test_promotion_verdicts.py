"""Issue 23.11: one judgement per cell. A promotion table's kind derives from the verdict the
probe computes for the same ``(op, dtypes, backend)`` (``records/_promotion.verdict_disagrees``):
the table calls a cell ``keras-disagrees`` exactly where a probe says ``deviates`` or
``declared-mismatch`` (or the op raised where Keras documents a dtype). Real workers on jax and
numpy."""

import keras
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.records._promotion import verdict_disagrees

DTYPES = ["int8", "uint8", "float16", "float64"]
BACKENDS = ["jax", "numpy"]


@pytest.fixture(scope="module", params=["add", "maximum", "hypot"])
def table(request):
    return dx.promotion_table(request.param, dtypes=DTYPES, backends=BACKENDS, progress=False)


def test_the_tables_judgement_is_the_probes_verdict(table):
    """The old code judged maximum/hypot cells ``references-differ`` where the probe says
    ``deviates`` (its own result_type rule, not the probe's chosen expectation)."""
    for lhs in table.dtypes:
        for rhs in table.dtypes:
            cell = table.cell(lhs, rhs)
            probed = {
                b: dx.probe(table.op, [lhs, rhs], backend=b, use_cache=False) for b in BACKENDS
            }
            for b, result in probed.items():
                assert cell.results[b].verdict == result.verdict, (table.op, lhs, rhs, b)
            says = any(
                r.verdict in ("deviates", "declared-mismatch") or verdict_disagrees(r)
                for r in probed.values()
            )
            assert (cell.kind == "keras-disagrees") == says, (table.op, lhs, rhs, cell.kind)


def test_maximum_of_float64_on_numpy_is_a_disagreement_in_both():
    """Raw Keras on numpy narrows ``maximum(float64, float64)`` to float32 where NumPy keeps
    float64: the probe says ``deviates``; the old table said ``references-differ``."""
    x = np.ones(2, "float64")
    raw = pool.call("numpy", keras.ops.maximum, x, x).result()
    assert raw.dtype.name != np.maximum(x, x).dtype.name
    probe = dx.probe("ops.maximum", "float64", backend="numpy")
    assert probe.verdict == "deviates"
    table = dx.promotion_table("maximum", dtypes=["float64"], backends=["numpy"], progress=False)
    assert table.cell("float64", "float64").kind == "keras-disagrees"
