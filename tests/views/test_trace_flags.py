"""A trace step's flags are computed once on the record (``TraceStep.flags``): the text, the
card and the widget's JSON show the same ones, worded the same."""

from __future__ import annotations

import html
import re

from dtype_explorer.records import ProbeResult, ProbeSpec, TraceStep, TraceTensor
from dtype_explorer.views import format_trace, result_html

F16 = TraceTensor(dtype="float16", shape=(2,))
F32 = TraceTensor(dtype="float32", shape=(2,))


def _steps() -> tuple[TraceStep, ...]:
    overflowing = TraceStep(
        index=0, op="ops.multiply", inputs=(F16,), outputs=(F16,), float16_overflow=True
    )
    return (
        TraceStep(
            index=0,
            op="ops.cast",
            inputs=(F32,),
            outputs=(F16,),
            change="cast",
            conversions=("downcast",),
            cast_to="float16",
        ),
        # tanh(inf) = 1: the overflow inside is hidden by this op's finite output
        TraceStep(
            index=1,
            op="ops.tanh",
            inputs=(F16,),
            outputs=(F16,),
            change="kept",
            children=(overflowing,),
        ),
        TraceStep(
            index=2,
            op="ops.exp",
            inputs=(F16,),
            outputs=(F16,),
            change="kept",
            nonfinite=True,
            first_nonfinite=True,
            float16_overflow=True,
        ),
        TraceStep(
            index=3, op="ops.log", inputs=(F16,), outputs=(F16,), change="kept", nonfinite=True
        ),
    )


def _result() -> ProbeResult:
    return ProbeResult(
        spec=ProbeSpec(target="ops.exp", input_dtypes=("float32",), backend="jax"),
        status="ok",
        backend="jax",
        output_dtype="float16",
        verdict="as-documented",
        trace=_steps(),
    )


def test_flags_are_computed_on_the_record_and_travel_in_the_json():
    cast, tanh, exp, log = _steps()
    assert cast.flags == ()
    assert [f.kind for f in tanh.flags] == ["hidden-overflow"]
    assert [f.kind for f in exp.flags] == ["first-nonfinite", "float16-overflow"]
    assert [f.kind for f in log.flags] == ["nonfinite"]  # a later inf/NaN is flagged too
    dumped = exp.to_dict()["flags"]
    assert dumped == [{"kind": f.kind, "text": f.text} for f in exp.flags]
    assert TraceStep.from_dict(exp.to_dict()) == exp  # the computed field is recomputed


def test_text_and_html_show_the_same_flags_for_each_step():
    result = _result()
    text = format_trace(result)
    card = html.unescape(result_html(result))
    items = re.findall(r"<li[^>]*data-step='(\d+)'.*?</li>", card, flags=re.S)
    assert items == ["0", "1", "2", "3"]
    for step in result.trace:
        (line,) = [t for t in text if re.match(rf"\s*#{step.index}\s", t)]
        item = re.search(rf"<li[^>]*data-step='{step.index}'.*?</li>", card, flags=re.S)[0]
        text_flags = line.split("!! ", 1)[1] if "!! " in line else ""
        shown = re.search(r"class='dx-flag'[^>]*>([^<]*)<", item)
        html_flags = shown[1] if shown else ""
        assert text_flags == html_flags == step.flag_text(), (step.op, line, item)
    assert "hidden" in result.trace[1].flag_text()
    assert "inf/NaN" in result.trace[3].flag_text()
