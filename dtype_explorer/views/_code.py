"""The user's own code traced (``TraceResult``), drawn as text and as a notebook card: each step
with its dtypes and the user's line that caused it, the first inf/NaN, the narrowing steps (by
dtype) and those that lost values (measured), what the code returned, and the user's own
traceback where it raised. Laid out like the probe's trace (``views/_html.trace_html``); every
fact is the record's."""

from __future__ import annotations

from dtype_explorer.records import CodeComparison, TraceDivergence, TraceResult, TraceStep
from dtype_explorer.views._markup import ERROR, STYLE, clip, e, trace_step_item

#: How the text marks the step where the backends first part by dtype.
PART_MARK = "  <== the backends part here"


def code_trace_text(result: TraceResult, *, mark: int | None = None) -> str:
    """The trace as text: the headline, one step a line (``*`` a dtype change, ``!!`` its
    flags) with the user's line under it, then the summary and the user's traceback; the
    step numbered ``mark`` (where the backends part, in a comparison) marked ``>>`` and
    :data:`PART_MARK`."""
    env = result.environment
    lines = [
        result.headline(),
        f"  Keras {env.keras}, backend {env.backend} ({env.where}), {env.settings_text()}"
        + "".join(f", {said}" for said in env.set_for_run()),
    ]
    for step in result.steps:
        parts_here = mark is not None and step.index == mark
        lines.append(
            (">>" if parts_here else "  ") + step_line(step) + (PART_MARK if parts_here else "")
        )
        where = result.line_of(step)
        if where:
            src = result.user_line(step)
            lines.append(f"        at {where}: {src.text if src else ''}".rstrip())
    lines.extend(_summary_lines(result))
    if result.error is not None and result.error.traceback:
        lines.append("  the code's own traceback:")
        lines.extend("    " + line for line in result.error.traceback.rstrip().splitlines())
    return "\n".join(lines)


def step_line(step: TraceStep) -> str:
    """``#3 *ops.cast(float32[2]) -> float16  [explicit cast float32 -> float16 (downcast)]``."""
    parts = [t.text() for t in step.inputs]
    if step.cast_to:
        parts.append(f"dtype={step.cast_to}")
    ins = ", ".join(parts)
    mark = "*" if step.changes_dtype else " "
    said = f"RAISED {step.error}" if step.error else step.change_text()
    if step.conversions:
        said += f" ({', '.join(step.conversions)})"
    outs = ", ".join(t.text() for t in step.outputs) or step.outcome
    alarm = f"  !! {step.flag_text()}" if step.flags else ""
    return f"#{step.index:<3}{mark}{step.op}({ins}) -> {outs}  [{said}]{alarm}"


def _summary_lines(result: TraceResult) -> list[str]:
    lines = []
    if result.dropped:
        lines.append(
            f"  ... and {result.dropped} more step(s), not recorded (max {result.max_steps})"
        )
    changes = result.dtype_changes()
    if changes:
        first = changes[0]
        lines.append(f"  first dtype change: #{first.index} {first.op}: {first.change_text()}")
    lossy = result.lossy_steps()
    if lossy:
        lines.append(
            "  narrowing steps (by dtype): " + ", ".join(f"#{s.index} {s.op}" for s in lossy)
        )
    lost = result.lost_steps()
    if lost:
        lines.append("  values lost: " + ", ".join(f"#{s.index} {s.op}" for s in lost))
    bad = result.first_nonfinite_step()
    if bad is not None:
        lines.append(f"  first inf/NaN from finite values: #{bad.index} {bad.op}")
    for value in result.returned:
        lines.append(f"  returned {value.name}: {value.describe()}")
    if result.note:
        lines.append(f"  note: {result.note}")
    return lines


def code_trace_html(result: TraceResult) -> str:
    """The notebook card: the headline, the steps as the probe's trace list, the summary."""
    items = "".join(_item(result, step) for step in result.steps)
    env = result.environment
    meta = (
        f"Keras {e(env.keras)} · {e(env.backend)} ({e(env.where)}) · "
        + e(env.settings_text()).replace(", ", " · ")
        + "".join(f" · {e(said)}" for said in env.set_for_run())
    )
    summary = "".join(f"<li>{e(line.strip())}</li>" for line in _summary_lines(result))
    error = ""
    if result.error is not None:
        error = (
            f"<div style='color:{ERROR}'><b>{e(result.error.text())}</b></div>"
            f"<pre class='dx-traceback'>{e(result.error.traceback)}</pre>"
        )
    is_open = " open" if len(result.steps) <= 30 else ""
    return (
        f"{STYLE}<div class='dx-card dx-code-trace'><div><b>{e(result.headline())}</b></div>"
        f"<div class='dx-meta'>{meta}</div>{error}"
        f"<details class='dx-trace-box'{is_open}><summary>{len(result.steps)} step(s)</summary>"
        f"<ol class='dx-trace'>{items}</ol></details><ul class='dx-meta'>{summary}</ul></div>"
    )


def _item(result: TraceResult, step: TraceStep) -> str:
    src = result.user_line(step)
    where = (
        f"<span class='dx-src'>{e(result.line_of(step))} <code>{e(clip(src.text, 100))}</code>"
        "</span>"
        if src is not None
        else ""
    )
    return trace_step_item(step, where=where)


def comparison_text(comparison: CodeComparison) -> str:
    """The headline (where the backends first part, and the user's line that caused it),
    then each backend's trace with that step marked (``>>``)."""
    lines = [comparison.headline()]
    part = comparison.dtype_part()
    steps = comparison.part_steps()
    for backend, result in comparison.results.items():
        lines.append("")
        lines.append(f"== {backend} ==")
        step = steps.get(backend)
        if part is not None and step is None:
            lines.append(f"  (no {part.op} step here, where the other backends part)")
        lines.append(code_trace_text(result, mark=None if step is None else step.index))
    return "\n".join(lines)


def comparison_html(comparison: CodeComparison) -> str:
    """The backends side by side, one column each, under where they part."""
    part = comparison.dtype_part()
    cols = "".join(
        f"<td style='vertical-align:top'><b>{e(b)}</b>{_column(r, part)}</td>"
        for b, r in comparison.results.items()
    )
    return (
        f"{STYLE}<div class='dx-card dx-code-compare'><div><b>{e(comparison.headline())}</b>"
        f"</div><table><tr>{cols}</tr></table></div>"
    )


def _column(result: TraceResult, part: TraceDivergence | None) -> str:
    mark = part.steps.get(result.environment.backend) if part is not None else None
    items = "".join(
        _item(result, s).replace("<li", "<li class='dx-part'", 1) if s.index == mark else
        _item(result, s)
        for s in result.steps
    )  # fmt: skip
    error = (
        f"<pre class='dx-traceback'>{e(result.error.text())}\n{e(result.error.traceback)}</pre>"
        if result.error is not None
        else ""
    )
    returned = "".join(
        f"<div class='dx-meta'>returned {e(v.describe())}</div>" for v in result.returned
    )
    head = f"<div class='dx-meta'>{e(result.headline())}</div>{error}"
    return f"{head}<ol class='dx-trace'>{items}</ol>{returned}"
