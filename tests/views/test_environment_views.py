"""The settings that produced an answer's numbers, in the card's footer and the text view
(hand-built records: views compute nothing)."""

from __future__ import annotations

from dtype_explorer.records import ProbeResult, ProbeSpec
from dtype_explorer.views import format_result, result_html

ENV = {
    "device": "GPU NVIDIA H200 (compute capability 9.0)",
    "torch.float32_matmul_precision": "highest",
    "torch.backends.cuda.matmul.allow_tf32": "False",
}


def result(**fields) -> ProbeResult:
    spec = ProbeSpec(
        target="ops.matmul", input_dtypes=("int8",), backend="torch", precision="highest"
    )
    return ProbeResult(
        spec=spec,
        status="ok",
        backend="torch",
        device="cuda:0",
        output_dtype="int32",
        environment=ENV,
        **fields,
    )


def test_the_environment_is_one_line_on_the_record_device_first():
    text = result().environment_text
    assert text.startswith("GPU NVIDIA H200 (compute capability 9.0) · ")
    assert "torch.backends.cuda.matmul.allow_tf32 False" in text
    assert ProbeResult.from_json(result().to_json()).environment == ENV


def test_the_text_view_and_the_card_show_the_settings_the_precision_and_the_kernel():
    r = result(kernel="torch._int_mm")
    text = format_result(r)
    assert f"ran with: {r.environment_text} (precision=highest asked)" in text
    assert "kernel: torch._int_mm" in text
    html = result_html(r)
    assert "class='dx-meta dx-env'" in html and "GPU NVIDIA H200" in html
    assert "precision=highest asked" in html and "kernel torch._int_mm" in html


def test_an_answer_without_settings_read_shows_no_empty_footer():
    bare = ProbeResult(spec=ProbeSpec(target="Dense"), status="ok", backend="numpy")
    assert "dx-env" not in result_html(bare)
    assert "ran with" not in format_result(bare)
