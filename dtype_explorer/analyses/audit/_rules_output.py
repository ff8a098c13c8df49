"""The audit's rules on what a layer hands on in a dtype other than its compute dtype, worded
from what was measured, and the op a finding names. Pure functions of the
:class:`~dtype_explorer.records.LayerCall` records (and of the per-layer reference's
:class:`~dtype_explorer.records.LayerDamage`, once it ran).

* ``float16-output``: a model's output, or a softmax, in a 16-bit float. Its severity and
  words come from its values: a warning where the output holds inf/NaN or (once the float32
  reference ran, :func:`measured`) its error against float32 is beyond the dtype's tolerance
  (``dtypes.tolerance``); otherwise a note with the numbers. It names the op that made the
  inf, else the op that narrowed the data to 16 bits, else (the data arrived in 16 bits) the
  op that made the output. No fix is proposed here: a fix is shown once it was run and seen
  to work (the audit's proven fixes).
* ``float32-only-layer`` for a layer that returns float32 from a 16-bit compute dtype because
  its own call casts to float32 (a ``ReversibleEmbedding(reverse_dtype="float32")``'s logits):
  on purpose, a note, not a warning.

>>> from dtype_explorer.records import LayerCall, TensorInfo
>>> half = TensorInfo(dtype="float16", shape=(2, 3), finite=True)
>>> call = LayerCall(path="m/probs", layer_class="Softmax", depth=1, policy="mixed_float16",
...                  compute_dtype="float16", variable_dtype="float32", softmax=True,
...                  received=(half,), outputs=(half,))
>>> [(f.kind, f.severity, f.fix) for f in float16_outputs([call])]
[('float16-output', 'info', '')]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from dtype_explorer import dtypes
from dtype_explorer.analyses.audit._rules_exact import computes_on_values
from dtype_explorer.records import Finding, LayerCall, LayerDamage, TraceStep

#: The 16-bit floats (one owner: dtypes).
HALF = dtypes.HALF
#: Why a lookup's output holds inf/NaN from finite ids: it computes nothing that overflows.
LOOKUP_NAN = (
    "A lookup computes nothing that could overflow: an id beyond its table (jax's take fills "
    "it with NaN) or a row of the table that holds inf/NaN."
)
#: Why a lookup given inf/NaN ids returns inf/NaN: such an id has no row.
LOOKUP_GIVEN_NAN = (
    "It was given inf/NaN ids, which have no row (jax's take fills NaN): the step that made "
    "them is where the values were lost."
)


def float16_outputs(calls: list[LayerCall]) -> Iterator[Finding]:
    """A ``float16-output`` finding for each model output and each softmax returned in a
    16-bit float, at the severity its values support (see the module)."""
    for call in calls:
        half = [t for t in call.outputs if t.dtype in HALF]
        if not half or not (call.final_output or call.softmax):
            continue
        dtype = half[0].dtype
        what = "the model's output" if call.final_output else "this softmax's output"
        bad = any(t.finite is False for t in half)
        read = all(t.finite is not None for t in half)  # not read: a compiled function's pass
        if bad:
            step = overflow_step(call)
            given = all(t.finite is not False for t in (call.given or call.received))
            said = f"it holds inf/NaN{' from finite input' if given else ''}.{first_at(step)}"
            if not computes_on_values(call):
                said += f" {LOOKUP_NAN if given else LOOKUP_GIVEN_NAN}"
        else:
            step, narrowed = half_step(call, dtype)
            said = ("its values are finite." if read else "its values were not read.") + (
                _narrowed_at(step, dtype) if narrowed else _made_at(step)
            )
        yield Finding(
            kind="float16-output",
            severity="warning" if bad else "info",
            path=call.path,
            message=f"Under {call.policy}, {what} is {dtype} (from {call.layer_class}): {said}",
            step=step,
            details={
                "output": dtype,
                "final": call.final_output,
                "finite": None if not (read or bad) else not bad,
            },
        )


def measured(findings: list[Finding], damage: Iterable[LayerDamage]) -> list[Finding]:
    """``findings`` with each ``float16-output`` finding given its layer's error against the
    same model run in float32 (``check_model``'s per-layer reference): a warning where the
    output holds inf/NaN or its relative RMS error is beyond the dtype's tolerance, a note
    otherwise; the numbers in its message and details. Against a float64 reference (float64
    data narrowed to a float32 model), each ``silent-downcast`` from float64 is given the
    error of the model's last layer: what the narrowing cost at the output.

    Args:
        findings: the audit's findings so far.
        damage: the per-layer reference's comparisons (``AuditReport.damage``).

    Returns:
        The findings, the ``float16-output`` ones measured where their layer was compared.
    """
    damage = tuple(damage)
    first = {}
    for d in damage:
        first.setdefault(d.path, d)  # the layer's first call, its first output
    last = damage[-1] if damage and damage[-1].reference == "float64" else None
    out = []
    for f in findings:
        if f.kind == "float16-output" and f.path in first:
            f = _with_damage(f, first[f.path])
        elif (
            last is not None and f.kind == "silent-downcast" and f.details.get("from") == "float64"
        ):
            f = _with_damage(f, last, f", at its last layer's output ({last.path})")
        out.append(f)
    return out


def _with_damage(finding: Finding, d: LayerDamage, where: str = "") -> Finding:
    """The finding measured: with inf/NaN in the output, they say it, and the error is the
    one over the values finite in both (none: no error is measured). ``where``: which output
    was compared, where it is not the finding's layer's (float64 data narrowed: the model's
    last layer, against the model made again in float64)."""
    limit = dtypes.tolerance(d.dtype)
    beyond = d.nonfinite > 0 or d.rel_rms > limit
    sqnr = "exact" if d.sqnr_db is None else f"SQNR {d.sqnr_db:.1f} dB"
    error = f"relative RMS error {d.rel_rms:.3g}"
    numbers = f"{sqnr}, max |err| {d.max_abs_error:.3g}"
    against = f" Against the same model in {d.reference}{where}:"
    if not d.nonfinite:
        said = (
            f"{against} {error} ({'beyond' if beyond else 'within'} {d.dtype}'s tolerance "
            f"{limit:g}), {numbers}."
        )
    elif d.compared == 0:
        said = (
            f"{against} {d.nonfinite} of its values are inf/NaN and none is finite in both, so "
            "no error is measured."
        )
    else:
        over = "the values" if d.compared is None else f"the {d.compared} values"
        said = (
            f"{against} {d.nonfinite} of its values are inf/NaN; over {over} finite in both, "
            f"{error} (tolerance {limit:g}), {numbers}."
        )
    return finding.model_copy(
        update={
            "severity": "warning" if beyond else finding.severity,
            "message": finding.message + said,
            "details": {
                **finding.details,
                "rel_rms": d.rel_rms,
                "tolerance": limit,
                "within_tolerance": not beyond,
            },
        }
    )


def cast_on_purpose(call: LayerCall) -> TraceStep | None:
    """The explicit cast in ``call``'s own code that makes its output wider than its compute
    dtype (``ops.cast(logits, "float32")``), or ``None``: it did not cast itself."""
    wide = {t.dtype for t in call.outputs if dtypes.narrows(t.dtype, call.compute_dtype)}
    return next(
        (
            s
            for s in call.trace
            if s.phase == "call"
            and s.change == "cast"
            and s.cast_to in wide
            and any(t.dtype == call.compute_dtype for t in s.inputs)
        ),
        None,
    )


def kept_wide_on_purpose(call: LayerCall, step: TraceStep) -> Finding:
    """The ``float32-only-layer`` note of a layer whose own call casts its output up."""
    out = ", ".join(t.dtype for t in call.outputs)
    return Finding(
        kind="float32-only-layer",
        severity="info",
        path=call.path,
        message=(
            f"{call.layer_class} computes in {call.compute_dtype} under {call.policy} and "
            f"returns {out}: its own call casts to {step.cast_to} on purpose (a fact, no "
            f"fault).{first_at(step)}"
        ),
        step=step,
        details={"on_purpose": True},
    )


# --------------------------------------------------------------------------- steps


def first_at(step: TraceStep | None) -> str:
    """`` First at ops.exp (model.py:12: y = ops.exp(x)).`` from the call's op trace."""
    return "" if step is None else f" First at {_where(step)}."


def _narrowed_at(step: TraceStep | None, dtype: str) -> str:
    """`` Narrowed to float16 at backend.cast (...).``: the op that cast wider data down (not
    "First at", which names where inf/NaN first appeared)."""
    return "" if step is None else f" Narrowed to {dtype} at {_where(step)}."


def _made_at(step: TraceStep | None) -> str:
    """`` It arrived in float16; made by ops.softmax (...).``: the op that made the output."""
    if step is None:
        return ""
    return f" It arrived in {step.outputs[0].dtype}; made by {_where(step)}."


def _where(step: TraceStep) -> str:
    src = step.source
    if src is None:
        return step.op
    # A statement over several lines shows its first one: say that it goes on.
    text = src.text + ("…" if src.text.rstrip().endswith(("(", "[", "{", ",")) else "")
    return f"{step.op} ({src.short}: {text})"


def overflow_step(call: LayerCall) -> TraceStep | None:
    """The op of the call that first made inf/NaN from finite values, or whose read of a
    variable overflowed (the op is handed inf), or that left float16's range (even if a later
    op hid it)."""
    steps = [s for s in call.trace if s.phase == "call"]

    def read(s: TraceStep) -> bool:
        return any(x.read_overflow() is not None for x in (s, *s.children))

    return next((s for s in steps if s.first_nonfinite or read(s)), None) or next(
        (s for s in steps if s.float16_overflow or s.hidden_overflow()), None
    )


def half_step(call: LayerCall, half: str) -> tuple[TraceStep | None, bool]:
    """The op of the call that narrowed wider float (or integer) data to ``half``, and
    ``True``; else (the data arrived in ``half``) the last op that returned ``half`` data,
    and ``False``."""
    made = [s for s in call.trace if s.phase == "call" and any(t.dtype == half for t in s.outputs)]
    narrowed = next(
        (
            s
            for s in made
            if any(t.kind != "scalar" and t.dtype != half and t.dtype != "bool" for t in s.inputs)
            and ("downcast" in s.conversions or "int->float" in s.conversions)
        ),
        None,
    )
    if narrowed is not None:
        return narrowed, True
    return (made[-1] if made else None), False
