"""Which layers to keep in float32, chosen from the measured ranges (AutoCast's idea, issue 38
item 3): a pure function of the per-layer reference (``records.LayerDamage``, the model in
float32 run beside it) and the layer calls. A layer computing in a 16-bit float is chosen
when, in the float32 run, its output or its float inputs reach beyond that float's largest
finite value: in 16 bits it must overflow, whatever is done upstream. The layers an overflow
finding names (an op inside overflowed, where the input and output look finite) are chosen
too. Every layer chosen is needed, so the set is the smallest that can clear the overflows;
the audit then runs it on a copy (``keras_run.float32_fix``: grown only where a layer the
ranges did not name still overflows).

>>> from dtype_explorer.records import LayerCall, LayerDamage
>>> calls = [LayerCall(path="m/big", layer_class="Dense", depth=1, policy="mixed_float16",
...                    compute_dtype="float16", variable_dtype="float32"),
...          LayerCall(path="m/norm", layer_class="LayerNormalization", depth=1,
...                    policy="mixed_float16", compute_dtype="float16", variable_dtype="float32")]
>>> damage = [LayerDamage(path="m/big", layer_class="Dense", dtype="float16",
...                       reference="float32", rel_rms=1.0, max_abs_error=0.0,
...                       reference_amax=1e5, reference_input_amax=1e3),
...           LayerDamage(path="m/norm", layer_class="LayerNormalization", dtype="float16",
...                       reference="float32", rel_rms=1.0, max_abs_error=0.0,
...                       reference_amax=1.7, reference_input_amax=1e5)]
>>> for path, why in float32_candidates(damage, calls, []).items():
...     print(path, "-", why)
m/big - its output reaches 1e+05 in float32, beyond float16's 65504
m/norm - it receives values up to 1e+05 in float32, beyond float16's 65504
"""

from __future__ import annotations

from collections.abc import Iterable

from dtype_explorer import dtypes
from dtype_explorer.records import Finding, LayerCall, LayerDamage


def float32_candidates(
    damage: Iterable[LayerDamage], calls: list[LayerCall], overflows: list[Finding]
) -> dict[str, str]:
    """The layers to keep in float32, each with why, in forward order: the overflow
    findings' layers first, then each 16-bit leaf whose float32 output or input is beyond its
    dtype's largest finite value.

    Args:
        damage: the per-layer reference (``AuditReport.damage``).
        calls: the audited layer calls.
        overflows: the ``overflow`` findings.

    Returns:
        ``{audit path: why it is chosen}``.
    """
    chosen = {f.path: _overflow_why(f) for f in overflows}
    computes = {c.path: c.compute_dtype for c in calls if c.leaf}
    for d in damage:
        half = computes.get(d.path)
        if half not in dtypes.HALF or d.path in chosen:
            continue
        top = dtypes.float_limits(half)[0]
        if d.reference_amax is not None and d.reference_amax > top:
            chosen[d.path] = (
                f"its output reaches {d.reference_amax:.3g} in float32, beyond {half}'s {top:g}"
            )
        elif d.reference_input_amax is not None and d.reference_input_amax > top:
            chosen[d.path] = (
                f"it receives values up to {d.reference_input_amax:.3g} in float32, beyond "
                f"{half}'s {top:g}"
            )
    return chosen


def _overflow_why(finding: Finding) -> str:
    cause = finding.details.get("cause")
    if cause == "autocast":
        return "it overflowed casting its input on entry"
    if cause == "variable-read":
        return "reading a variable in 16 bits overflowed"
    return "an op inside it overflowed"
