"""Fixes that are proven: for each ``overflow`` finding, the audit keeps the layer that
overflowed in float32 on a copy of the model (``keras_run.float32_set``, growing the set by
the next layer that still overflows), runs it, and shows the set as the fix only when the
copy runs finite, with the counts before and after. Advice that did not clear the overflow
is not shown as a fix: the finding says what was tried instead.

>>> report = check_model(model, sample)                       # doctest: +SKIP
>>> report.by_kind("overflow")[0].details["proven"]           # doctest: +SKIP
True
"""

from __future__ import annotations

from typing import Any

from dtype_explorer.keras_run import declared_inputs, float32_set, nonfinite_outputs
from dtype_explorer.records import Finding, LayerCall


def prove(
    findings: list[Finding], model: Any, sample: Any, arguments: dict, calls: list[LayerCall]
) -> list[Finding]:
    """``findings`` with each ``overflow`` finding's fix run on a copy (see the module).

    Args:
        findings: the audit's findings so far.
        model: the audited model (Sequential or Functional; others are left as they are).
        sample: the audited sample.
        arguments: the call's keyword arguments.
        calls: the audited layer calls (to name each layer's class).

    Returns:
        The findings, the overflow ones with a proven fix or none.
    """
    overflows = [f for f in findings if f.kind == "overflow"]
    if not overflows or declared_inputs(model) is None:
        return findings
    try:
        before = sum(nonfinite_outputs(model, sample, arguments).values())
        fix = float32_set(model, sample, [f.path.rsplit("/", 1)[-1] for f in overflows], arguments)
    except Exception as error:  # a copy that cannot be made or run: the fix is not proven
        why = f"{type(error).__name__}: {error}"
        return [_untried(f, why) if f.kind == "overflow" else f for f in findings]
    classes = {name: layer_class(calls, name) for name in fix.layers}
    return [_proven(f, fix, before, classes) if f.kind == "overflow" else f for f in findings]


def _proven(finding: Finding, fix: Any, before: int, classes: dict[str, str]) -> Finding:
    names = ", ".join(fix.layers)
    if fix.works:
        said = (
            f" Proven: the audit re-ran a copy with {names} in float32, and its layers' "
            f"outputs hold no inf/NaN ({before} before, 0 after)."
        )
        code = "\n".join(
            f'{classes[name] or "layer"}(..., name="{name}", dtype="float32")   # proven on a copy'
            for name in fix.layers
        )
        code += "\n# or, all at once: keras.dtype_policies.DTypePolicyMap with these names"
        return finding.model_copy(
            update={
                "message": finding.message + said,
                "fix": code,
                "details": {
                    **finding.details,
                    "proven": True,
                    "float32_layers": list(fix.layers),
                    "nonfinite_before": before,
                    "nonfinite_after": 0,
                },
            }
        )
    tried = "; ".join(f"{', '.join(s)} in float32: {n} inf/NaN" for s, n in fix.tried)
    return finding.model_copy(
        update={
            "message": finding.message
            + f" No proven fix: the audit tried on a copy ({tried}), and it still overflows.",
            "fix": "",
            "details": {**finding.details, "proven": False, "tried": tried},
        }
    )


def _untried(finding: Finding, why: str) -> Finding:
    return finding.model_copy(
        update={
            "message": finding.message
            + f" The audit could not run the fix on a copy ({why}): it is not proven.",
            "details": {**finding.details, "proven": False, "not_tried": why},
        }
    )


def layer_class(calls: list[LayerCall], name: str) -> str:
    """The class of the layer named ``name`` among ``calls`` (``""``: not found)."""
    return next((c.spelled for c in calls if c.path.rsplit("/", 1)[-1] == name), "")
