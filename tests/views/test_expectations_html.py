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
