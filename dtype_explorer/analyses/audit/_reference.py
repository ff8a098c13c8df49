"""The audit's per-layer reference (issue 38 item 2): whether it runs, against which dtype,
and what it measures. Each leaf layer's outputs from the traced pass are compared with the
same model run in a wider dtype (``keras_run.layer_damage``, ``records.LayerDamage``):

* float32, where a leaf layer computes in a 16-bit float (a mixed or 16-bit policy): the
  ``float16-output`` findings are then worded from their error (``_rules_output.measured``);
* float64, where float64 data was narrowed on its way into the model (a ``silent-downcast``
  from float64) and the backend holds float64: the model made again in float64, its float
  Inputs too, and the finding given the cost at the model's last layer. Where float64 itself
  was found missing (jax without ``jax_enable_x64``), or the float64 copy computes in float32
  anyway, there is no reference, and a note says why: a float32 run is never shown as one.

>>> reference_dtype([], []) is None
True
"""

from __future__ import annotations

import time
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.analyses.audit import _rules_output
from dtype_explorer.errors import as_sentence
from dtype_explorer.keras_run import layer_damage
from dtype_explorer.records import Finding, LayerCall
from dtype_explorer.timing import ms


def reference_dtype(calls: list[LayerCall], findings: list[Finding]) -> str | None:
    """The dtype of the per-layer reference worth running for an audited pass, or ``None``.

    Args:
        calls: the pass's layer calls.
        findings: the rules' findings on them.

    Returns:
        ``"float32"`` (a leaf computes in a 16-bit float), ``"float64"`` (float64 data
        narrowed, float64 not found missing), or ``None``.
    """
    if any(c.leaf and dtypes.bits(c.compute_dtype) == 16 for c in calls):
        return "float32"
    narrowed = any(
        f.kind == "silent-downcast"
        and f.details.get("from") == "float64"
        and f.details.get("kept") is not False
        for f in findings
    )
    return "float64" if narrowed else None


def damage_phase(audit: Any, reference: str = "float32") -> None:
    """Each leaf layer output of ``audit``'s pass against the same model in ``reference``
    (``keras_run.layer_damage``), kept as ``audit.ran["damage"]``, the findings measured; a
    model its copy cannot make or run, or a float64 copy that is not, is said in a note.

    Args:
        audit: the audit under way (``_check._Audit``): its model, sample, tracer, findings.
        reference: ``"float32"`` or ``"float64"`` (:func:`reference_dtype`).
    """
    t0 = time.perf_counter()
    # the traced pass's own leaf outputs: the same model, weights and sample (None where a
    # call raised and was re-run with a cast: the model then runs again here)
    outputs = audit.tracer.leaf_outputs() if audit.audited is audit.target else None
    try:
        # under policy=, the user's model (float32 throughout: the reference itself)
        args = (audit.target, audit.sample, audit.arguments, outputs, audit.model)
        traced: list[str] = []
        audit.ran["damage"] = layer_damage(
            *args, reference=reference, copies=audit.copies, traced=traced
        )
        audit.findings = _rules_output.measured(audit.findings, audit.ran["damage"])
        if traced:
            audit.notes.append(
                f"The per-layer {reference} reference leaves out the calls of "
                f"{', '.join(traced)}: Keras made them inside a jax transformation (an RNN's "
                "cell, in jax.lax.scan), where tensors are traced, with no values to compare."
            )
    except Exception as error:  # a model its copy cannot rebuild or run: said, not raised
        said = as_sentence(str(error))
        audit.notes.append(f"No per-layer {reference} reference: {type(error).__name__}: {said}")
    audit.timings["reference_ms"] = ms(t0)
