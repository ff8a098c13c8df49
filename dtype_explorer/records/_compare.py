"""Answers side by side: :func:`compare` lays several results out as one grid, a column per
backend (or mode), a row per cast-path stage, output and training-step fact, each row marked
``same`` when every column that ran says the same. Computed once, here, on the records: the
widget's compact view and any other medium lay the grid out and compare nothing themselves.

>>> from dtype_explorer.records import ProbeResult, ProbeSpec
>>> spec = ProbeSpec(target="ops.add", input_dtypes=("int8",))
>>> grid = compare([ProbeResult(spec=spec.model_copy(update={"backend": b}), status="ok",
...     backend=b, output_dtype=d, verdict="as-documented") for b, d in
...     [("jax", "int8"), ("torch", "int16")]])
>>> [(row.label, row.same) for row in grid.rows]
[('output', False), ('verdict', True)]
>>> grid.summary
'1 of 2 rows differ across jax and torch: output'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from dtype_explorer.records._base import Record
from dtype_explorer.records._fit import FitReport
from dtype_explorer.records._probe import (
    UNSUPPORTED,
    VERDICT_WORDS,
    CastStep,
    ProbeResult,
)

#: How a cell is drawn: a dtype chip (``changed``: this stage changed the dtype), an error, a
#: backend that cannot run the request, a probe not answered yet, a stage this column lacks,
#: or plain words.
Tone = Literal["dtype", "changed", "error", "unsupported", "pending", "absent", "text"]
Group = Literal["cast path", "outcome", "training step", "numerics"]


class CompareCell(Record):
    """What one column says in one row: ``text`` (a dtype name or a sentence), the ``dtype``
    its chip is coloured by, how it is drawn (``tone``) and the longer story (``note``)."""

    text: str
    tone: Tone = "text"
    dtype: str | None = None
    note: str = ""


class CompareRow(Record):
    """One stage or fact across the columns; ``same`` when every column that ran says it alike
    (the compact view folds those rows into one)."""

    key: str
    group: Group
    label: str
    cells: dict[str, CompareCell]
    same: bool
    #: What every column says when ``same`` (the folded row shows it once), else ``None``.
    shared: CompareCell | None = None


class CompareColumn(Record):
    """One answer: its label (backend, mode or both), status, and ``headline``: what it came
    to in a sentence (``float32, as documented``; ``not supported here: ...``)."""

    label: str
    backend: str
    mode: str
    status: str
    headline: str


class Comparison(Record):
    """Every answer side by side (:func:`compare`)."""

    columns: tuple[CompareColumn, ...]
    rows: tuple[CompareRow, ...] = ()
    #: The labels of the rows that differ, in order; ``summary`` says it in a sentence.
    differing: tuple[str, ...] = ()
    summary: str = ""
    #: What the columns differ by: ``backends``, ``modes`` or ``backends and modes``.
    axis: str = "backends"


def compare(
    results: Sequence[ProbeResult], pending: Sequence[str] = (), labels: Sequence[str] = ()
) -> Comparison:
    """The grid of ``results`` side by side: a column each (then one per ``pending`` backend,
    not answered yet), a row per stage and fact, ``same`` where the columns that ran agree.

    Args:
        results: The answers, one per backend or mode.
        pending: Backends still probing (their cells are ``pending``; they count for no row).
        labels: How to name each result's column (default: its backend).

    Returns:
        A :class:`Comparison`: ``columns``, ``rows`` (stages in cast-path order, then the
        outputs, the verdict, numerics and the training step), ``differing`` and ``summary``.

    >>> compare([]).summary
    'nothing answered yet'
    """
    names = list(labels) or [r.backend for r in results]
    facts = {name: _facts(r) for name, r in zip(names, results)}
    ran = [n for n, r in zip(names, results) if not _unsupported(r)]
    keys: dict[str, tuple[Group, str]] = {}
    for found in facts.values():
        for key, (group, label, _) in found.items():
            keys.setdefault(key, (group, label))
    order = sorted(keys, key=lambda k: _GROUPS.index(keys[k][0]))
    rows = []
    for key in order:
        group, label = keys[key]
        cells = {
            n: facts[n][key][2] if key in facts[n] else _absent(r) for n, r in zip(names, results)
        }
        cells.update({b: CompareCell(text="probing…", tone="pending") for b in pending})
        said = {cells[n].text for n in ran}
        same = len(said) <= 1
        shared = cells[ran[0]] if same and ran else None
        rows.append(
            CompareRow(key=key, group=group, label=label, cells=cells, same=same, shared=shared)
        )
    columns = [_column(n, r) for n, r in zip(names, results)]
    columns += [
        CompareColumn(label=b, backend=b, mode="", status="pending", headline="probing…")
        for b in pending
    ]
    differing = tuple(row.label for row in rows if not row.same)
    return Comparison(
        columns=tuple(columns),
        rows=tuple(rows),
        differing=differing,
        summary=_summary(rows, ran, differing, bool(pending)),
        axis=_axis(results),
    )


_GROUPS: tuple[Group, ...] = ("cast path", "outcome", "numerics", "training step")


def _axis(results: Sequence[ProbeResult]) -> str:
    backends = len({r.backend for r in results}) > 1
    modes = len({r.spec.mode for r in results}) > 1
    return "backends and modes" if backends and modes else "modes" if modes else "backends"


def _unsupported(result: ProbeResult) -> bool:
    return result.unsupported


def _absent(result: ProbeResult) -> CompareCell:
    if _unsupported(result):
        return CompareCell(text=UNSUPPORTED, tone="unsupported")
    if not result.ok:  # why the stage has no dtype: the call, the tool, or the worker
        if result.tool_failed:
            why = "dtype-explorer failed"
        elif result.status in ("timeout", "crashed"):
            why = "the probe timed out" if result.status == "timeout" else "the worker crashed"
        else:
            why = "the call raised"
        return CompareCell(text=f"not reached: {why}", tone="absent")
    return CompareCell(text="no such stage here", tone="absent")


def _summary(
    rows: list[CompareRow], ran: list[str], differing: tuple[str, ...], pending: bool
) -> str:
    if not ran:
        return "probing…" if pending else "nothing answered yet"
    who = " and ".join(ran) if len(ran) <= 2 else f"{', '.join(ran[:-1])} and {ran[-1]}"
    if len(ran) == 1:
        return f"only {who} ran" + (", the others are still probing" if pending else "")
    if not differing:
        return f"{who} agree on all {len(rows)} rows"
    return f"{len(differing)} of {len(rows)} rows differ across {who}: {', '.join(differing)}"


def _column(label: str, result: ProbeResult) -> CompareColumn:
    return CompareColumn(
        label=label,
        backend=result.backend,
        mode=result.spec.mode,
        status="unsupported" if _unsupported(result) else result.status,
        headline=result.headline,
    )


Fact = tuple[Group, str, CompareCell]


def _facts(result: ProbeResult) -> dict[str, Fact]:
    """Every row one result fills: key -> (group, label, cell)."""
    if _unsupported(result):
        return {}
    facts: dict[str, Fact] = {}
    inputs = {s.index or 0 for s in result.cast_path if s.stage not in ("variables", "output")}
    by_var: dict[str, list[CastStep]] = {}
    for step in result.cast_path:
        if step.stage == "variables":
            by_var.setdefault(step.name or "variable", []).append(step)
        elif step.stage != "output":
            lane = f"input {step.index or 0} " if len(inputs) > 1 else ""
            label = f"{lane}{'input' if step.stage == 'input' else step.stage}".strip()
            facts[f"in{step.index or 0}:{step.stage}"] = ("cast path", label, _dtype(step))
    for name, steps in by_var.items():
        # One step is the read in call (the stored dtype is ``variables``'); two are both.
        known = result.variables.get(name)
        stored = _dtype(steps[0]) if len(steps) > 1 or known is None else _chip(known.stored)
        facts[f"var:{name}:stored"] = ("cast path", f"{name} stored", stored)
        if len(steps) > 1 or known is not None:
            facts[f"var:{name}:read"] = ("cast path", f"{name} read in call", _dtype(steps[-1]))
    outputs = result.steps("output")
    if result.ok:
        for step in outputs:
            label = f"output {step.index or 0}" if len(outputs) > 1 else "output"
            facts[f"out{step.index or 0}"] = ("outcome", label, _dtype(step))
        if not outputs:
            facts["out0"] = ("outcome", "output", _chip(result.output_dtype))
    else:
        # The column's headline says the error in Keras's words; the row says only its kind
        # (``raises NotImplementedError``), so no column prints the error twice.
        facts["out0"] = (
            "outcome",
            "output",
            CompareCell(
                text=result.outcome,
                tone="error",
                note=result.error.message if result.error else "",
            ),
        )
    facts["verdict"] = (
        "outcome",
        "verdict",
        CompareCell(text=VERDICT_WORDS.get(result.verdict, result.verdict)),
    )
    if result.ok:
        facts.update(_numerics(result))
    if result.fit is not None:
        facts.update(_fit(result.fit))
    return facts


def _chip(dtype: str | None, changed: bool = False, note: str = "") -> CompareCell:
    if dtype is None:
        return CompareCell(text="none", tone="absent")
    return CompareCell(text=dtype, tone="changed" if changed else "dtype", dtype=dtype, note=note)


def _dtype(step: CastStep) -> CompareCell:
    return _chip(step.dtype, step.changed, step.note)


def _numerics(result: ProbeResult) -> dict[str, Fact]:
    n = result.numerics
    if n is None or not n.output_count:
        return {}
    facts: dict[str, Fact] = {}
    if n.nonfinite_from_finite:
        text = (
            f"{n.nonfinite_from_finite} of {n.output_count} values became inf/NaN "
            "from finite inputs"
        )
        facts["nonfinite"] = ("numerics", "inf/NaN", CompareCell(text=text, tone="error"))
    else:
        facts["nonfinite"] = ("numerics", "inf/NaN", CompareCell(text="every value finite"))
    finding = next(iter(n.findings), None)
    if finding is not None:
        facts["finding"] = (
            "numerics",
            "wrong numbers",
            CompareCell(text=finding.text(), tone="error"),
        )
    return facts


def _fit(fit: FitReport) -> dict[str, Fact]:
    """The training step's rows: loss, optimizer, loss scaling, each gradient, warnings."""
    loss = fit.loss if fit.loss_value is None else f"{fit.loss}, {fit.loss_value:.4g}"
    if not fit.loss_scaling:
        scaling = "off"
    elif fit.loss_scale is not None and fit.loss_scale_after is not None:
        scaling = f"on: {fit.loss_scale:g} before the step, {fit.loss_scale_after:g} after"
    else:
        scaling = "on"
    facts: dict[str, Fact] = {
        "fit:loss": ("training step", "loss", CompareCell(text=loss)),
        "fit:optimizer": ("training step", "optimizer", CompareCell(text=fit.optimizer)),
        "fit:scaling": ("training step", "loss scaling", CompareCell(text=scaling)),
    }
    for grad in fit.gradients:
        bad = f", {grad.nonfinite} inf/NaN" if grad.nonfinite else ""
        cell = CompareCell(
            text=f"{grad.dtype}{bad}",
            tone="error" if grad.nonfinite else "dtype",
            dtype=grad.dtype,
            note=f"gradient of {grad.name} ({grad.variable_dtype} variable)",
        )
        facts[f"fit:grad:{grad.name}"] = ("training step", f"gradient of {grad.name}", cell)
    warned = "; ".join(fit.warnings) if fit.warnings else "none"
    facts["fit:warnings"] = ("training step", "warnings", CompareCell(text=warned, tone="text"))
    return facts
