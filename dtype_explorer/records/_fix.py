"""What the audit did with a finding's fix (``FixProof``): the change, in the user's terms,
run on a copy of the model, and what was measured before and after it (``FixMeasure``); or
why no fix was run. A fix is shown (``Finding.fix``) only when its proof says ``proven``: the
copy ran, and the audit's own rule, re-run on it, no longer finds the finding (for loss
scaling: one training step of the copy recovered the gradients that underflowed without it).

>>> before = FixMeasure(finding=True, nonfinite=12, headroom_bits=-0.4, dtype="float16",
...                     at="m/big")
>>> after = FixMeasure(finding=False, nonfinite=0, headroom_bits=110.9, dtype="float32",
...                    at="m/big")
>>> proof = FixProof(how="layer-dtype", change='Dense(..., name="big", dtype="float32")',
...                  layers=("m/big",), proven=True, before=before, after=after)
>>> print("\\n".join(proof.lines()))
proven on a copy: m/big in float32 (dtype= on the named layers)
  before: the finding is there; 12 inf/NaN in the layers' outputs; headroom at m/big: -0.4 bits \
(float16)
  after:  the finding is gone; 0 inf/NaN in the layers' outputs; headroom at m/big: 110.9 bits \
(float32)
>>> FixProof(not_tried="a subclassed model: clone_model cannot copy it").summary()
'no fix shown: not tried, because a subclassed model: clone_model cannot copy it'
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dtype_explorer.records._base import Record
from dtype_explorer.records._exactness import LayerDamage

#: How a fix changes the copy: ``dtype="float32"`` on the named layers (the copy cloned with
#: it), a ``keras.dtype_policies.DTypePolicyMap`` keyed by layer paths (the copy made again
#: from its config with it), the dtype of a ``keras.Input``, every layer and Input under
#: another policy (``model-dtype``: the model rebuilt under ``float64``), the optimizer
#: wrapped in a ``keras.optimizers.LossScaleOptimizer`` (``loss-scale``); a layer's input cast
#: before it, on a copy of the layer (``input-cast``), or re-probed so on each backend
#: (``backend-cast``); ``model.quantize(mode, filters=...)`` leaving layers float
#: (``quantize-filters``), the model rebuilt under another policy and then quantized
#: (``quantize-policy``); the training step compiled without XLA (``jit-off``); the model
#: saved and loaded through another format (``save-format``).
FixHow = Literal[
    "layer-dtype",
    "policy-map",
    "input-dtype",
    "model-dtype",
    "loss-scale",
    "input-cast",
    "backend-cast",
    "quantize-filters",
    "quantize-policy",
    "jit-off",
    "save-format",
]
#: Each way in words (:meth:`FixProof.lines`).
HOW_WORDS: dict[str, str] = {
    "layer-dtype": "dtype= on the named layers",
    "policy-map": "a DTypePolicyMap keyed by layer paths",
    "input-dtype": "the keras.Input's dtype",
    "model-dtype": "every layer and float keras.Input made again in that dtype",
    "loss-scale": "the optimizer wrapped in a LossScaleOptimizer, one model.fit step",
    "input-cast": "keras.ops.cast before it, the layer copied with its weights",
    "backend-cast": "the layer re-probed so on each backend",
    "quantize-filters": "model.quantize(..., filters=...)",
    "quantize-policy": "the model rebuilt under that policy, then quantized",
    "jit-off": "the copy compiled with jit_compile=False, one model.fit step",
    "save-format": "saved and loaded through that format, compared layer by layer",
}


class FixMeasure(Record):
    """The model (before) or its fixed copy (after), measured on the audited sample.

    ``finding``: the audit's rule finds the finding (before: it did). ``nonfinite``: inf/NaN
    in the leaf layers' outputs. ``output``: the model's output against the same model in
    float32 (``None``: not measured). ``headroom_bits``: at the finding's layer, the least
    ``LayerDamage.top_bits`` of its outputs (``log2(largest finite / amax)``), in ``dtype``.
    ``ids_changed`` of ``ids``: the integer ids the layers taking them as indices
    (``readers``) received changed from those given; ``raised``: what those layers raised.
    ``received``/``computes``: what the layer at ``at`` received and computes in.
    ``underflowed`` of ``gradient_values``: the gradient values of one training step that
    were zero where the same step of the model in float32 gave non-zero ones;
    ``nonfinite_gradients``: inf/NaN among them. ``findings``: how many of the findings a
    combined fix covers are there. ``wrong``: the first wrong number of a layer's output
    against its wide reference (a value finding's message). ``output_error`` against
    ``threshold``: a quantized model's output error, relative to its largest value.
    ``outcomes``: what each backend answered. ``error``: what the run raised (the model, or
    its copy, did not run).
    """

    finding: bool
    at: str = ""
    nonfinite: int | None = None
    output: LayerDamage | None = None
    headroom_bits: float | None = None
    dtype: str = ""
    readers: tuple[str, ...] = ()
    ids: int | None = None
    ids_changed: int | None = None
    raised: str = ""
    received: str = ""
    computes: str = ""
    gradient_values: int | None = None
    underflowed: int | None = None
    nonfinite_gradients: int | None = None
    #: Of ``of_values`` values of the variables a training run left unchanged, how many the
    #: run (the model's, or its fixed copy's) still left so (``update-lost``).
    frozen_values: int | None = None
    of_values: int | None = None
    findings: int | None = None
    wrong: str = ""
    output_error: float | None = None
    threshold: float | None = None
    outcomes: dict[str, str] = Field(default_factory=dict)
    error: str = ""

    def text(self) -> str:
        """One line: the finding there or gone, then what was measured."""
        if self.error:
            return f"the run raised {self.error}"
        if self.findings is not None:
            parts = [f"{self.findings} of the findings there"]
        elif self.gradient_values is not None or self.frozen_values is not None:
            parts = []  # a training step: its gradients, or what it changed, say
        else:
            parts = ["the finding is " + ("there" if self.finding else "gone")]
        if self.received or self.computes:
            said = [f"receives {self.received}"] if self.received else []
            said += [f"computes in {self.computes}"] if self.computes else []
            parts.append(f"{self.at} {' and '.join(said)}")
        if self.gradient_values is not None and self.underflowed is not None:
            parts.append(
                f"{self.underflowed} of {self.gradient_values} gradient values zero where "
                "float32's are not"
                + (f", {self.nonfinite_gradients} inf/NaN" if self.nonfinite_gradients else "")
            )
        if self.frozen_values is not None and self.of_values is not None:
            parts.append(
                f"{self.frozen_values} of {self.of_values} values of those variables unchanged "
                "by the training steps"
                + (
                    f", {self.nonfinite_gradients} inf/NaN gradients"
                    if self.nonfinite_gradients
                    else ""
                )
            )
        if self.ids is not None and self.ids_changed is not None:
            readers = ", ".join(self.readers)
            parts.append(
                f"{readers} received {self.ids_changed} of {self.ids} ids changed"
                if self.ids_changed
                else f"{readers} received all {self.ids} ids as given"
                + ("" if self.raised else " (their own rows)")
            )
        if self.raised:
            parts.append(f"{', '.join(self.readers)} raised {self.raised}")
        if self.wrong:
            parts.append(self.wrong)
        if self.output_error is not None:
            limit = "" if self.threshold is None else f" (threshold {self.threshold:g})"
            parts.append(f"output error {self.output_error:.3g} of the largest float value{limit}")
        if self.outcomes:
            parts.append("; ".join(f"{b} {o}" for b, o in self.outcomes.items()))
        if self.nonfinite is not None:
            parts.append(f"{self.nonfinite} inf/NaN in the layers' outputs")
        if self.output is not None:
            o = self.output
            sqnr = "exact" if o.sqnr_db is None else f"SQNR {o.sqnr_db:.1f} dB"
            error = f"{o.nonfinite} inf/NaN" if o.nonfinite else f"rel RMS {o.rel_rms:.3g}, {sqnr}"
            parts.append(f"output against {o.reference}: {error}")
        if self.headroom_bits is not None:
            parts.append(f"headroom at {self.at}: {self.headroom_bits:.1f} bits ({self.dtype})")
        return "; ".join(parts)


class FixProof(Record):
    """A finding's fix, run on a copy (``how``, ``change``, ``layers``), and what it did; or,
    with ``not_tried``, why the audit ran none.

    ``change``: the code, in the user's terms (``Finding.fix`` when ``proven``);
    ``policy_map``/``default_policy``: a ``DTypePolicyMap``'s keys (layer paths, as
    ``Layer.path`` names them) and policies, and its default; ``input_index``/``input_dtype``:
    the ``keras.Input`` changed (``input_dtype`` is also the dtype of ``model-dtype``).
    ``chosen_by``: why each layer of the set is in it, from the measured ranges (a combined
    float32 set); ``covers``: the findings (``"kind at path"``) the fix was run for.
    ``mode``: the quantization mode a ``quantize-*`` fix ran; ``format``: the format a
    ``save-format`` fix went through. ``tried``: every change run, in order, with what it
    left.
    """

    how: FixHow | None = None
    change: str = ""
    layers: tuple[str, ...] = ()
    policy_map: dict[str, str] = Field(default_factory=dict)
    default_policy: str = ""
    input_index: int | None = None
    input_dtype: str = ""
    chosen_by: dict[str, str] = Field(default_factory=dict)
    covers: tuple[str, ...] = ()
    mode: str = ""
    format: str = ""
    proven: bool = False
    before: FixMeasure | None = None
    after: FixMeasure | None = None
    tried: tuple[str, ...] = ()
    not_tried: str = ""

    def summary(self) -> str:
        """One line: what was proven, or why no fix is shown."""
        if self.not_tried:
            return f"no fix shown: not tried, because {self.not_tried}"
        what = self._what()
        if self.proven:
            return f"proven on a copy: {what}"
        if self.how == "loss-scale" and self.before is not None and not self.before.underflowed:
            return (
                f"no fix shown: the audit ran {what} on a copy, and no gradient underflowed "
                "without it on this sample: it was not seen to work"
            )
        if self.after is not None and not self.after.finding:
            return (
                f"no fix shown: the audit ran {what} on a copy; the finding went, but the copy "
                "did not run right either (after, below)"
            )
        return f"no fix shown: the audit ran {what} on a copy, and it did not clear the finding"

    def lines(self) -> list[str]:
        """The summary, then why each layer was chosen, before and after, then what else was
        tried."""
        lines = [self.summary()]
        if self.covers:
            lines.append(f"  for: {'; '.join(self.covers)}")
        lines += [f"  chose {path}: {why}" for path, why in self.chosen_by.items()]
        if self.before is not None:
            lines.append(f"  before: {self.before.text()}")
        if self.after is not None:
            lines.append(f"  after:  {self.after.text()}")
        if self.tried and not (self.proven and len(self.tried) == 1):
            lines.append("  tried, in order: " + "; ".join(self.tried))
        return lines

    def _what(self) -> str:
        if self.how == "input-dtype":
            return f"input {self.input_index} as keras.Input(dtype={self.input_dtype!r})"
        if self.how == "model-dtype":
            return f"the model in {self.input_dtype} ({HOW_WORDS['model-dtype']})"
        if self.how in ("loss-scale", "jit-off"):
            return HOW_WORDS[self.how]
        layers = ", ".join(self.layers)
        if self.how == "input-cast":
            return (
                f"{layers} with its inputs cast to {self.input_dtype} ({HOW_WORDS['input-cast']})"
            )
        if self.how == "backend-cast":
            return (
                f"{layers} with its inputs cast to {self.input_dtype} ({HOW_WORDS['backend-cast']})"
            )
        if self.how == "quantize-filters":
            return (
                f"quantize({self.mode!r}) with {layers} left float "
                f"({HOW_WORDS['quantize-filters']})"
            )
        if self.how == "quantize-policy":
            return (
                f"quantize({self.mode!r}) under {self.default_policy} "
                f"({HOW_WORDS['quantize-policy']})"
            )
        if self.how == "save-format":
            return f"the {self.format} format ({HOW_WORDS['save-format']})"
        return f"{', '.join(self.layers)} in float32 ({HOW_WORDS.get(self.how or '', '')})"
