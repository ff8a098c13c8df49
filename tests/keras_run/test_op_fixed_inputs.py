"""An op's fixed inputs given as values (issue 39 item 11), beside raw Keras: ``values`` may
carry every array input of an op as the user passes them (``ops.take(table, indices)``:
the user's int32 indices, not the catalog's), and when the tool picks them itself,
``supplied`` says so."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import dtype_explorer as dx


def std(x) -> str:
    return keras.backend.standardize_dtype(x.dtype)


def out_values(result) -> tuple[tuple[int, ...], list[float]]:
    (first,) = result.numerics.outputs
    return first.shape, list(first.head)


TABLE = np.arange(12, dtype="float32").reshape(4, 3)
INDICES = np.array([0, 2], "int32")


@pytest.mark.parametrize("kwargs", [{"axis": None}, {"axis": 0}, {"axis": 1}])
def test_take_runs_on_the_users_own_indices(kwargs):
    raw = keras.ops.take(TABLE, INDICES, **kwargs)
    r = dx.probe("ops.take", values=[TABLE, INDICES], kwargs=kwargs)
    assert r.status == "ok", r.error
    assert r.output_dtype == std(raw)
    shape, head = out_values(r)
    expected = keras.ops.convert_to_numpy(raw)
    assert shape == expected.shape
    assert head == expected.reshape(-1)[: len(head)].tolist()
    # the indices are the user's: their own dtype in the cast path, nothing picked for them
    assert [s.dtype for s in r.cast_path if s.stage == "input"] == ["float32", "int32"]
    assert "fixed inputs" not in [s.part for s in r.supplied]


def test_user_indices_of_another_dtype_reach_keras_as_given():
    indices = np.array([[3], [1]], "int64")
    raw = keras.ops.take(TABLE.astype("float16"), indices, axis=0)
    r = dx.probe("ops.take", values=[TABLE.astype("float16"), indices], kwargs={"axis": 0})
    assert r.status == "ok", r.error
    assert r.output_dtype == std(raw)
    shape, head = out_values(r)
    assert shape == tuple(raw.shape)
    assert head == keras.ops.convert_to_numpy(raw).astype("float32").reshape(-1).tolist()


def test_segment_sum_takes_the_users_segment_ids():
    data = np.array([1.0, 2.0, 3.0, 4.0], "float32")
    ids = np.array([0, 0, 1, 1], "int32")
    raw = keras.ops.segment_sum(data, ids, num_segments=2)
    r = dx.probe("ops.segment_sum", values=[data, ids], kwargs={"num_segments": 2})
    assert r.status == "ok", r.error
    assert r.output_dtype == std(raw)
    assert out_values(r)[1] == keras.ops.convert_to_numpy(raw).tolist()


def test_indices_the_tool_picks_are_listed_as_supplied():
    r = dx.probe("ops.take", values=[TABLE])
    assert r.status == "ok", r.error
    picked = [s for s in r.supplied if s.part == "fixed inputs"]
    assert len(picked) == 1 and "indices" in picked[0].value
    # what was listed is what Keras got: the same call by hand with the catalog's indices
    listed = [2, 0]
    assert str(listed) in picked[0].value
    raw = keras.ops.take(TABLE, np.array(listed, "int32"), axis=1)
    shape, head = out_values(r)
    assert shape == tuple(raw.shape)
    assert head == keras.ops.convert_to_numpy(raw).reshape(-1)[: len(head)].tolist()
    # an op without fixed arrays lists none
    assert "fixed inputs" not in [s.part for s in dx.probe("ops.add").supplied]


def test_a_wrong_count_of_values_names_both_forms():
    with pytest.raises(ValueError, match=r"all 2 of its arrays in call order \(x, indices\)"):
        dx.probe("ops.take", values=[TABLE, INDICES, INDICES])
