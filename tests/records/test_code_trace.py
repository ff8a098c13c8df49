"""The facts of a traced run and of a cell on several backends, on hand-built records."""

from __future__ import annotations

from dtype_explorer.records import (
    CastLoss,
    CodeComparison,
    CodeEnvironment,
    CodeError,
    SourceLine,
    TracedValue,
    TraceResult,
    TraceStep,
    TraceTensor,
)


def _t(dtype, shape=(2,)):
    return TraceTensor(dtype=dtype, shape=shape)


def _step(i, op, din, dout, *, change="kept", conv=(), max_abs=1.0, line=1, **kw):
    return TraceStep(
        index=i, op=op, inputs=(_t(din),), outputs=(_t(dout),), change=change,
        conversions=conv, max_abs=max_abs,
        user=SourceLine(file="<dtype_trace cell>", line=line, text="..."), **kw,
    )  # fmt: skip


def _result(backend, steps, *, sample=(1.0, 2.0), digest="d", status="ok", error=None):
    return TraceResult(
        what="cell", kind="cell", steps=tuple(steps), status=status, error=error,
        cell_file="<dtype_trace cell>",
        returned=(TracedValue(type="Array", dtype=steps[-1].outputs[0].dtype if steps else None,
                              shape=(2,), digest=digest, sample=sample, text="[1. 2.]"),),
        environment=CodeEnvironment(keras="3.x", backend=backend),
    )  # fmt: skip


def test_lossy_changes_nonfinite_and_lines():
    steps = [
        _step(0, "ops.add", "float32", "float32"),
        _step(1, "ops.cast", "float32", "float16", change="cast", conv=("downcast",), line=2),
        _step(2, "ops.exp", "float16", "float16", nonfinite=True, first_nonfinite=True, line=3),
    ]
    r = _result("jax", steps)
    assert [s.index for s in r.lossy_steps()] == [1]
    assert [s.index for s in r.dtype_changes()] == [1]
    assert r.first_nonfinite_step().index == 2
    assert r.line_of(steps[2]) == "cell line 3"
    assert r.returned_dtype == "float16"
    assert "1 narrowing" in r.headline() and "lost" not in r.headline()
    back = TraceResult.from_json(r.to_json())
    assert back.to_dict() == r.to_dict()


def test_a_raise_is_the_headline():
    r = _result("jax", [_step(0, "ops.add", "float32", "float32")], status="raised",
                error=CodeError(type="KeyError", message="'k'"))  # fmt: skip
    assert r.headline().endswith("then KeyError: 'k'")


def test_backends_parting_by_dtype_name_the_step():
    a = _result("jax", [_step(0, "ops.add", "float64", "float32", change="promoted")])
    b = _result("torch", [_step(0, "ops.add", "float64", "float64")])
    c = CodeComparison(source="", results={"jax": a, "torch": b})
    part = c.dtype_part()
    assert part is not None and part.op == "ops.add" and part.steps == {"jax": 0, "torch": 0}
    assert c.value_part() is None and "first part by dtype at ops.add" in c.headline()


def test_backends_parting_by_value_beyond_the_tolerance():
    a = _result("jax", [_step(0, "ops.exp", "float32", "float32", max_abs=10.0)])
    near = _result("torch", [_step(0, "ops.exp", "float32", "float32", max_abs=10.001)])
    far = _result("torch", [_step(0, "ops.exp", "float32", "float32", max_abs=11.0)])
    assert CodeComparison(source="", results={"jax": a, "torch": near}).value_part() is None
    said = CodeComparison(source="", results={"jax": a, "torch": far}).value_part()
    assert said.startswith("The values first part at #0 ops.exp (cell line 1)")


def test_returned_values_compared_when_steps_agree():
    a = _result("jax", [_step(0, "ops.add", "float32", "float32")], digest="x")
    b = _result("torch", [_step(0, "ops.add", "float32", "float32")], digest="y",
                sample=(1.0, 2.5))  # fmt: skip
    c = CodeComparison(source="", results={"jax": a, "torch": b})
    assert c.value_part().startswith("The values the cell returned part")
    same = CodeComparison(source="", results={"jax": a, "torch": a})
    assert "agree" in same.headline()


def test_a_backend_that_did_not_end_is_said_first():
    a = _result("jax", [_step(0, "ops.add", "float32", "float32")])
    b = _result("torch", [], status="timeout", error=CodeError(type="Timeout"))
    assert (
        "torch: timeout (Timeout)"
        in CodeComparison(source="", results={"jax": a, "torch": b}).headline()
    )


def test_text_and_card_lay_out_the_records_facts():
    steps = [_step(0, "ops.cast", "float32", "float16", change="cast", conv=("downcast",))]
    r = _result("jax", steps)
    text = str(r)
    assert "#0  *ops.cast(float32[2]) -> float16[2]" in text and "at cell line 1" in text
    assert "narrowing steps (by dtype): #0 ops.cast" in text and "values lost" not in text
    loss = CastLoss(step="cast", where="x", source="float32", target="float16", count=2,
                    overflowed=1, first_index=(0,), examples=((7e4, float("inf")),))  # fmt: skip
    lost = _result("jax", [steps[0].model_copy(update={"losses": (loss,)})])
    assert "values lost: #0 ops.cast" in str(lost)
    assert "values lost at 1 step(s) (first: ops.cast, overflow)" in lost.headline()
    card = r._repr_html_()
    assert "dx-card" in card and "cell line 1" in card
    c = CodeComparison(source="", results={"jax": r, "torch": _result("torch", steps)})
    assert "== torch ==" in str(c) and c._repr_html_().count("<td") == 2


def test_a_cast_that_lost_values_is_flagged_with_its_counts_and_in_the_headline():
    from dtype_explorer.records import CastLoss

    loss = CastLoss(step="cast", where="x", source="int32", target="float16", count=3,
                    rounded=2, first_index=(0, 0),
                    examples=((19999, 20000), (2049, 2048)))  # fmt: skip
    steps = [_step(0, "ops.cast", "int32", "float16", change="cast", conv=("int->float",),
                   losses=(loss,))]  # fmt: skip
    r = _result("jax", steps)
    assert [f.kind for f in steps[0].flags] == ["lost-values"]
    assert "19999 -> 20000" in steps[0].flag_text()
    assert [s.index for s in r.lost_steps()] == [0]
    assert "values lost at 1 step(s) (first: ops.cast, rounding)" in r.headline()
    assert TraceResult.from_json(r.to_json()).steps[0].losses == (loss,)


def test_where_backends_part_names_the_users_line_and_the_text_marks_the_step():
    a = _result(
        "jax",
        [
            _step(0, "ops.ones", "float32", "float32"),
            _step(1, "ops.add", "float64", "float32", change="promoted", line=2),
        ],
    )
    b = _result("torch", [_step(0, "ops.ones", "float32", "float32"),
                          _step(1, "ops.add", "float64", "float64", line=2)])  # fmt: skip
    c = CodeComparison(source="", results={"jax": a, "torch": b})
    assert c.part_lines() == {"jax": "cell line 2", "torch": "cell line 2"}
    assert c.headline() == (
        "The backends first part by dtype at ops.add, caused by cell line 2 (`...`): "
        "on jax it gives float32; on torch it gives float64."
    )
    text = str(c)
    marked = [line for line in text.splitlines() if line.startswith(">>")]
    assert len(marked) == 2 and all(
        m.startswith(">>#1  ")
        and "ops.add(float64[2])" in m
        and m.endswith("the backends part here")
        for m in marked
    )
    assert c._repr_html_().count("<li class='dx-part'") == 2


def test_a_backend_without_the_step_says_what_it_ran_on_that_line():
    a = _result("jax", [_step(0, "ops.add", "float64", "float32", change="promoted")])
    b = _result("numpy", [
        _step(0, "backend.nn.one_hot", "int64", "float32", change="changed"),
        _step(1, "ops.add", "float64", "float32", change="promoted", line=2)])  # fmt: skip
    c = CodeComparison(source="", results={"jax": a, "numpy": b})
    assert c.part_lines() == {"numpy": "cell line 1"}
    head = c.headline()
    assert "at backend.nn.one_hot, caused by cell line 1" in head
    assert "jax runs no backend.nn.one_hot there (on that line: ops.add -> float32)" in head
    text = str(c)
    assert "(no backend.nn.one_hot step here, where the other backends part)" in text
    assert sum(line.startswith(">>") for line in text.splitlines()) == 1
