"""The card and the text of a result show every expectation side by side, the one the verdict
used, the rules disagreeing, a verdict per output and wrong numbers (records built here: the
views compute nothing)."""

from __future__ import annotations

from dtype_explorer.records import (
    Expectation,
    Numerics,
    ProbeResult,
    ProbeSpec,
    ValueFinding,
)


def torch_dense() -> ProbeResult:
    return ProbeResult(
        spec=ProbeSpec(target="Dense", input_dtypes=("float64",), policy="float64"),
        status="ok",
        backend="torch",
        output_dtype="float64",
        output_dtypes=("float64", "int64"),
        output_verdicts=("as-documented", "declared-mismatch"),
        verdict="declared-mismatch",
        documented_dtype="float64",
        expected_by="policy",
        expectations=(
            Expectation(source="policy", dtype="float64", basis="the compute dtype"),
            Expectation(
                source="result_type", dtype="float32", basis="result_type(float64, float64)"
            ),
            Expectation(source="torch", error="RuntimeError: no", basis="torch.x"),
        ),
        numerics=Numerics(
            findings=(
                ValueFinding(
                    kind="wraparound",
                    element=(0, 1),
                    value=44.0,
                    expected=300.0,
                    message="44 where 300",
                ),
            )
        ),
    )


def test_the_card_shows_the_expectations_and_the_wrong_numbers():
    html = torch_dense()._repr_html_()
    assert "Expectations" in html and "policy <b>(verdict)</b>" in html
    assert "dx-odd" in html  # result_type's float32 names another dtype
    assert "Keras&#x27;s rules disagree here" in html or "Keras's rules disagree here" in html
    assert "wraparound at output 0 [0, 1]" in html
    assert html.count("declared-mismatch") >= 2  # the card's badge and output #1's


def test_the_text_marks_the_verdicts_expectation_and_the_odd_ones():
    text = str(torch_dense())
    assert "expected: *policy float64  !result_type float32  torch raises" in text
    assert "per output: #0 float64 as-documented, #1 int64 declared-mismatch" in text
    assert "!! wrong numbers: wraparound at output 0 [0, 1]: 44 where 300" in text


def _no_counterpart() -> ProbeResult:
    op = ProbeResult(
        spec=ProbeSpec(target="ops.vectorized_map", input_dtypes=("float32",)),
        status="ok",
        backend="torch",
        output_dtype="float32",
        output_dtypes=("float32",),
        verdict="undocumented",
        expectations=(
            Expectation(source="numpy", dtype="float32", basis="numpy.x"),
            Expectation(
                source="torch",
                basis="torch.vmap: no counterpart: takes a Python function",
                no_counterpart="takes a Python function",
            ),
        ),
    )
    return op


def test_a_reference_with_no_counterpart_says_so_and_why_in_the_text():
    text = str(_no_counterpart())
    assert "torch no counterpart" in text and "torch raises" not in text
    assert "torch -" not in text
    assert "torch: no counterpart: takes a Python function" in text


def test_a_reference_with_no_counterpart_says_so_and_why_in_the_card():
    html = _no_counterpart()._repr_html_()
    assert "<span title='no counterpart: takes a Python function'>no counterpart</span>" in html
    assert "<td>raises</td>" not in html and "<td>-</td>" not in html


def test_what_an_expectation_shows_is_computed_once_on_the_record():
    said = [x.shown for x in _no_counterpart().expectations]
    assert said == ["float32", "no counterpart"]
    assert Expectation(source="torch", error="TypeError: x").shown == "raises"
    assert Expectation(source="torch").shown == "-"
    dumped = _no_counterpart().model_dump()["expectations"][1]
    assert dumped["shown"] == "no counterpart" and dumped["why"].endswith("a Python function")
