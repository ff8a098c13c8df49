"""Promotion tables with real workers and real reference libraries."""

from __future__ import annotations

import keras
import pytest
from swept import SWEPT

import dtype_explorer as dx
from dtype_explorer import dtypes, pool
from dtype_explorer.analyses._promotion import OPS
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import PromotionTable


@pytest.fixture(scope="module")
def add_table() -> PromotionTable:
    """``ops.add`` on every default dtype pair, the swept backends (``tests/swept.py``), every
    reference."""
    return dx.promotion_table("add", backends=SWEPT, progress=False)


def _keras_result_type(lhs: str, rhs: str) -> str:
    weak = dtypes.PYTHON_SCALARS
    return keras.backend.result_type(weak.get(lhs, lhs), weak.get(rhs, rhs))


def test_documented_grid_is_result_type_on_every_backend(add_table: PromotionTable) -> None:
    """Every pair, every backend: the grid holds what ``keras.backend.result_type`` returns
    in that backend's worker (where it raises, the grid says so)."""
    pairs = [(lhs, rhs) for lhs in add_table.dtypes for rhs in add_table.dtypes]
    assert len(add_table.backends) == len(SWEPT)
    for backend in add_table.backends:
        futures = [pool.call(backend, keras.backend.result_type, *_weak(p)) for p in pairs]
        grid = add_table.documented_grid(backend)
        for (lhs, rhs), future in zip(pairs, futures):
            expected = "raises" if future.exception() else future.result()
            assert grid.loc[lhs, rhs] == expected, (backend, lhs, rhs)


def _weak(pair: tuple[str, str]) -> tuple:
    return tuple(dtypes.PYTHON_SCALARS.get(name, name) for name in pair)


def test_known_disagreements(add_table: PromotionTable) -> None:
    cell = add_table.cell("uint64", "int64")
    # Keras's lattice (JAX's, resolved by floatx) says float32 on every backend ...
    assert set(cell.documented.values()) == {"float32"}
    # ... but JAX itself, with x64 off, first makes the inputs uint32 and int32
    assert cell.references["jax"].dtype == "int32"
    assert cell.references["numpy"].dtype == "float64"
    # and so does Keras on jax: its eager result is int32, not the documented float32
    assert cell.observed["jax"] == "int32"
    assert cell.kind == "keras-disagrees"
    listed = add_table.disagreements()
    assert ((listed.lhs == "uint64") & (listed.rhs == "int64")).any()
    # result_type keeps 64-bit results on TensorFlow only
    wide = add_table.cell("int64", "int64").documented
    assert wide["jax"] == "int32"
    if "tensorflow" in wide:
        assert wide["tensorflow"] == "int64"
    # a weak Python float takes floatx in Keras, float64 in NumPy
    weak = add_table.cell("int8", "python_float")
    assert weak.shown == "float32" and weak.references["numpy"].dtype == "float64"
    assert weak.kind != "agrees"
    # int8 + uint8 is int16 everywhere
    agreed = add_table.cell("int8", "uint8")
    assert agreed.shown == "int16" and agreed.kind == "agrees"


def test_figure_marks_disagreements(add_table: PromotionTable) -> None:
    figure = add_table.figure()
    heat = figure.data[0]
    names = list(add_table.dtypes)
    assert list(heat.x) == names and list(heat.y) == names
    i, j = names.index("uint64"), names.index("int64")
    assert heat.text[i][j].endswith("*")
    assert "jnp.add" in heat.customdata[i][j] and "int32" in heat.customdata[i][j]
    i, j = names.index("int8"), names.index("uint8")
    assert heat.text[i][j] == "i16"


def test_json_round_trip(add_table: PromotionTable) -> None:
    again = PromotionTable.from_json(add_table.to_json())
    assert again.disagreements().equals(add_table.disagreements())
    assert "promotion table" in add_table._repr_html_()


def test_floatx_is_a_parameter() -> None:
    """The table is made under the floatx asked for, and shows what Keras does with it."""
    names = ["int8", "python_float", "float16"]
    weak = {}
    for floatx in ("float32", "bfloat16"):
        table = dx.promotion_table(
            "add", names, ["jax", "numpy"], floatx=floatx, references=[], progress=False
        )
        assert table.floatx == floatx
        assert all(r.spec.floatx == floatx for r in table.results)
        cell = table.cell("int8", "python_float")
        assert len(set(cell.documented.values())) == 1
        weak[floatx] = cell.shown
        if cell.observed != cell.documented:  # jax returns float32 under bfloat16
            listed = table.disagreements()
            assert cell.kind == "keras-disagrees"
            assert ((listed.lhs == "int8") & (listed.rhs == "python_float")).any()
        assert table.cell("int8", "float16").shown == "float16"
    # Keras resolves a weak float by floatx's bit width only: bfloat16 gives float16
    assert weak == {"float32": "float32", "bfloat16": "float16"}


@pytest.mark.parametrize("op", OPS)
def test_every_op(op: str) -> None:
    names = ["int8", "float16", "python_int"]
    table = dx.promotion_table(op, names, ["jax", "numpy"], references=["numpy"], progress=False)
    assert len(table.cells()) == len(names) ** 2
    frame = table.to_frame()
    assert {"jax observed", "numpy documented", f"np.{op}"} <= set(frame.columns)
    if op == "where":
        assert all(r.spec.input_dtypes[0] == "bool" for r in table.results)
    if op == "divide":
        assert table.cell("int8", "int8").shown.startswith("float")


def test_bad_arguments() -> None:
    with pytest.raises(InvalidSpecError, match=r"ops\.add"):
        dx.promotion_table("addd")  # every op is a target now: "ad" is closest to "pad"
    with pytest.raises(InvalidSpecError, match="float16"):
        dx.promotion_table("add", ["flaot16"])
    with pytest.raises(InvalidSpecError, match="floatx"):
        dx.promotion_table("add", ["int8"], floatx="float8_e4m3fn")
    with pytest.raises(InvalidSpecError, match="numpy"):
        dx.promotion_table("add", ["int8"], references=["numpyy"])


def test_any_binary_op_with_references_found_by_table() -> None:
    """Not only the lessons' ops: ``mod`` is compared with ``torch.remainder`` (the name
    differs), beside ``np.mod``; weak Python scalars are rows and columns of their own."""
    names = ["int8", "float16", "python_int"]
    table = dx.promotion_table("mod", names, "numpy", references=["numpy", "torch"], progress=False)
    frame = table.to_frame()
    assert {"np.mod", "torch.remainder"} <= set(frame.columns)
    assert table.cell("int8", "python_int").shown == "int8"
    assert table.cell("python_int", "python_int").results["numpy"].ok
    assert table.cell("int8", "float16").references["torch"].dtype == "float16"


def test_unary_op_has_one_row_per_dtype_and_respects_floatx() -> None:
    names = ["int8", "float16", "bfloat16", "python_int", "python_float"]
    shown = {}
    for floatx in ("float32", "bfloat16"):
        table = dx.promotion_table(
            "sqrt", names, "numpy", floatx=floatx, references=["numpy"], progress=False
        )
        assert table.arity == 1 and len(table.cells()) == len(names)
        assert table.rhs_dtypes == ("x",)
        shown[floatx] = {name: table.cell(name).shown for name in names}
        assert table.cell("python_int").results["numpy"].ok  # a weak scalar is a row
        assert "sqrt(int8)" in table.figure().data[0].customdata[0][0]
    # Keras's rule result_type(int8, float) takes floatx's bit width: float16 under bfloat16
    assert shown["float32"]["int8"] == "float32" and shown["bfloat16"]["int8"] == "float16"
    assert shown["bfloat16"]["bfloat16"] == "bfloat16"


def test_no_counterpart_is_said_and_not_counted() -> None:
    table = dx.promotion_table(
        "ops.nn.relu", ["int8", "float32"], "numpy", references=["numpy"], progress=False
    )
    cell = table.cell("float32")
    assert cell.references["numpy"].missing and cell.sources()["np.relu"] == "no counterpart"
    assert cell.kind == "agrees"  # numpy has no relu: that is no disagreement


def test_ops_without_one_or_two_probed_inputs_are_refused() -> None:
    with pytest.raises(InvalidSpecError, match="one or two"):
        dx.promotion_table("zeros", ["int8"], "numpy", references=[], progress=False)
