"""A bisection drawn: the question, the change found with both answers, and every probed
release's answer in release order (text for terminals and the CLI, a card for notebooks).

>>> from dtype_explorer.records import BisectProbe, BisectResult, ProbeResult, ProbeSpec
>>> spec = ProbeSpec(target="Discretization")
>>> def answer(version, dtype):
...     result = ProbeResult(spec=spec, status="ok", backend="numpy", output_dtype=dtype)
...     return BisectProbe(version=version, engine=f"keras=={version}", result=result)
>>> b = BisectResult(spec=spec, versions=("3.11.3", "3.12.0"),
...                  probes=(answer("3.11.3", "float32"), answer("3.12.0", "int32")))
>>> print(bisect_text(b).splitlines()[1])
  first changed in Keras 3.12.0: float32 (3.11.3) -> int32 (3.12.0)
"""

from __future__ import annotations

from dtype_explorer.records import AnswerChange, BisectResult, engine_label, release_label
from dtype_explorer.views._markup import ACCENT, STYLE, chip, e, floatx_text


def _question(result: BisectResult) -> str:
    spec = result.spec
    parts = [
        f"{spec.target} on {', '.join(spec.input_dtypes)}",
        f"policy {spec.policy}",
        f"backend {spec.backend}",
    ]
    if spec.kwargs:
        parts.append("kwargs " + ", ".join(f"{k}={v!r}" for k, v in spec.kwargs.items()))
    if spec.mode != "call":
        parts.append(f"mode {spec.mode}")
    if spec.floatx:
        parts.append(f"floatx {spec.floatx}")
    return ", ".join(parts)


def _change_text(change: AnswerChange) -> str:
    said = f"{change.before} ({change.before_version}) -> {change.after} ({change.after_version})"
    before, after = release_label(change.before_version), release_label(change.after_version)
    if change.exact:  # a nightly build named with its date
        return f"first changed in Keras {after}: {said}"
    return (
        f"changed after {before}, by {after} "
        f"({change.unprobed} releases between not probed): {said}"
    )


def bisect_text(result: BisectResult) -> str:
    """The bisection in a few lines: the question, the change (or none), each probed
    release's answer, and the caveat."""
    n = len(result.versions)
    lines = [
        f"bisect {_question(result)}: {result.probed_count} of {n} releases probed "
        f"({result.versions[0]}..{result.versions[-1]}, {result.elapsed_s:g} s)"
    ]
    first = result.first_change
    if first is not None:
        lines.append(f"  {_change_text(first)}")
    else:
        answers = sorted(set(result.answers().values()))
        lines.append(f"  no change found: every probed release answers {' / '.join(answers)}")
    for change in result.changes:
        if change != first:
            lines.append(f"  also {_change_text(change)}")
    width = max(10, *(len(v) + 2 for v in result.answers()))
    for probe in result.ordered():
        keras = probe.result.versions.get("keras", "?")
        engine = engine_label(probe.engine) if probe.engine else "installed"
        lines.append(
            f"    {probe.version:<{width}}{probe.outcome:<24}(engine {engine}, keras {keras})"
        )
    lines.append(f"  note: {result.caveat}")
    return "\n".join(lines)


def bisect_html(result: BisectResult) -> str:
    """The notebook card: the change found with both answers as chips, a row per probed
    release (the release with the new answer marked), the caveat."""
    spec = result.spec
    n = len(result.versions)
    head = (
        "<div class='dx-head'>"
        f"<span class='dx-title'>bisect {e(spec.target)}</span>"
        f"<span class='dx-meta'>{e(', '.join(spec.input_dtypes))} · policy {e(spec.policy)}"
        f"{floatx_text(spec.floatx)} · {e(spec.backend)} · {result.probed_count} of {n} "
        f"releases probed ({e(result.versions[0])}..{e(result.versions[-1])})</span></div>"
    )
    first = result.first_change
    if first is not None:
        banner = (
            f"<div class='dx-banner'>First changed in <b>Keras "
            f"{e(release_label(first.after_version))}</b>: {_answer_chip(first.before)} in "
            f"{e(first.before_version)} → {_answer_chip(first.after)} in "
            f"{e(first.after_version)}</div>"
        )
    else:
        banner = "<div class='dx-banner'>No change found between the probed releases</div>"
    for change in result.changes:
        if change != first:
            banner += f"<div class='dx-banner'>Also {e(_change_text(change))}</div>"
    marked = {first.after_version} if first is not None else set()
    rows = []
    for probe in result.ordered():
        style = f" style='border-left:3px solid {ACCENT}'" if probe.version in marked else ""
        rows.append(
            f"<tr{style}><td><b>{e(probe.version)}</b></td>"
            f"<td>{_answer_chip(probe.outcome)}</td>"
            f"<td>{e(probe.result.verdict)}</td>"
            f"<td class='dx-meta'>{e(engine_label(probe.engine) if probe.engine else 'installed')}"
            " · keras "
            f"{e(probe.result.versions.get('keras', '?'))}</td></tr>"
        )
    table = (
        "<table><tr><th>release</th><th>answer</th><th>verdict</th><th>engine</th></tr>"
        f"{''.join(rows)}</table>"
    )
    kwargs = f"<div class='dx-meta'>kwargs {e(spec.kwargs)}</div>" if spec.kwargs else ""
    note = f"<div class='dx-meta'>{e(result.caveat)}</div>"
    return f"{STYLE}<div class='dx-card'>{head}{banner}{kwargs}{table}{note}</div>"


def _answer_chip(outcome: str) -> str:
    """A dtype answer as a dtype chip, an error or a failure as plain words."""
    if outcome.startswith("raises") or outcome in ("timeout", "crashed"):
        return f"<b>{e(outcome)}</b>"
    return chip(outcome)
