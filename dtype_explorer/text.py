"""Plain-text views of results, for terminals, logs and ``print``."""

from __future__ import annotations

from dtype_explorer.model import ProbeResult


def format_result(result: ProbeResult) -> str:
    """A readable multi-line account of one probe: the cast path and the three views."""
    spec = result.spec
    lines = [
        f"{spec.target} on {result.backend} ({result.device}), policy {spec.policy}: "
        f"{result.status}, {result.verdict}"
    ]
    for step in result.cast_path:
        label = (
            step.name
            if step.name is not None
            else f"#{step.index}"
            if step.index is not None
            else ""
        )
        mark = "*" if step.changed else " "
        lines.append(f"  {step.stage:<10}{label:<24}{mark}{step.dtype:<14}{step.note}")
    lines.append(
        f"  documented {result.documented_dtype or '-'} | declared {result.declared_dtype or '-'}"
        f" | observed {result.output_dtype or '-'}"
    )
    lines.extend(f"  because: {line}" for line in result.basis)
    if result.error is not None:
        lines.append(f"  error ({result.error.where}): {result.error.type}: {result.error.message}")
    if result.numerics is not None:
        n = result.numerics
        err = (
            f"{n.max_rel_error:.3g} vs {n.reference_dtype}" if n.max_rel_error is not None else "-"
        )
        lines.append(
            f"  numerics: {n.nonfinite_from_finite} inf/NaN from finite input; rel. error {err}"
        )
    return "\n".join(lines)
