"""What ``model.quantize()`` did to a model (``check_model(..., quantize=)``), and what a save
and load did to it (``check_model(..., mode="save")``): per-layer rows, computed once here and
laid out by the views.
"""

from __future__ import annotations

from typing import Literal

from dtype_explorer.records._base import Record
from dtype_explorer.records._probe import ErrorInfo
from dtype_explorer.records._quantize_layer import StoredVariable

#: What quantize() did to one layer: quantized; skipped (Keras has no ``quantize`` for it, or
#: nothing to quantize); refused (Keras raised: int8 under a float16 compute dtype).
QuantizeStatus = Literal["quantized", "skipped", "refused"]


class QuantizedLayer(Record):
    """One layer's row: what quantize() did, what it stores, how it computes, what it costs.

    ``steps``: the compute path read from the op trace of its quantized call
    ("quantize inputs: float32 → int8", "integer matmul: int8 x int8 → int32", ...);
    ``float_bytes``: what the float layer stored; ``error``: the largest relative error of
    its outputs against the float model's same layer on the same sample.
    """

    path: str
    layer_class: str
    status: QuantizeStatus
    why: str = ""
    policy: str = ""
    float_policy: str = ""
    compute_dtype: str = ""
    has_weights: bool = False
    variables: tuple[StoredVariable, ...] = ()
    float_bytes: int = 0
    steps: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()
    float_output_dtypes: tuple[str, ...] = ()
    error: float | None = None

    @property
    def bytes(self) -> int:
        return sum(v.bytes for v in self.variables)

    def row(self) -> dict[str, str]:
        """The flat row tables show."""
        return {
            "path": self.path,
            "layer": self.layer_class,
            "status": self.status + (f" ({self.why})" if self.why else ""),
            "policy": self.policy,
            "stored": ", ".join(
                f"{v.name}: {v.dtype}{list(v.shape)}" + (" (int4 packed)" if v.packed else "")
                for v in self.variables
            ),
            "bytes": f"{self.bytes} (float {self.float_bytes})" if self.has_weights else "",
            "path_steps": " → ".join(self.steps),
            "output": ", ".join(self.output_dtypes),
            "error": "" if self.error is None else f"{self.error:.3g}",
        }


class QuantizationReport(Record):
    """What ``quantize(mode)`` did to a copy of the model (the model itself is untouched).

    ``modes``: the modes the installed Keras has; ``output_error``: the largest relative
    error of the model's outputs against the float model (same weights, same sample);
    ``threshold``: the error above which a ``quantization-error`` finding is raised.
    """

    mode: str
    asked: str
    modes: tuple[str, ...] = ()
    layers: tuple[QuantizedLayer, ...] = ()
    output_error: float | None = None
    threshold: float = 0.05
    refused: ErrorInfo | None = None
    keras_warnings: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(layer.bytes for layer in self.layers)

    @property
    def float_bytes(self) -> int:
        return sum(layer.float_bytes for layer in self.layers)

    @property
    def heading(self) -> str:
        """What an audit's heading says of it: ``quantized int8`` only when a layer was
        quantized; else ``quantize('gptq') refused`` or ``quantize('gptq'): nothing quantized``
        (a calibrated mode without data quantizes nothing).

        >>> QuantizationReport(mode="gptq", asked="gptq").heading
        "quantize('gptq'): nothing quantized"
        """
        if self.refused is not None:
            return f"quantize({self.asked!r}) refused"
        if not any(layer.status == "quantized" for layer in self.layers):
            return f"quantize({self.asked!r}): nothing quantized"
        return f"quantized {self.asked}"

    def text(self) -> str:
        """``quantize('int8'): 3 layers quantized, 1 skipped; 1234 bytes stored (float32:
        4321, 3087 saved); output error 0.0012``."""
        counts = {s: sum(x.status == s for x in self.layers) for s in ("quantized", "skipped")}
        if self.refused is not None:
            return f"quantize({self.asked!r}) refused: {self.refused.type}: {self.refused.message}"
        error = "" if self.output_error is None else f"; output error {self.output_error:.3g}"
        return (
            f"quantize({self.asked!r}): {counts['quantized']} layers quantized, "
            f"{counts['skipped']} skipped; {self.bytes} bytes stored (float: "
            f"{self.float_bytes}, {self.float_bytes - self.bytes} saved){error}"
        )


class RoundTrip(Record):
    """One format's save and load (``.keras``, ``.h5``, SavedModel through ``TFSMLayer``)."""

    format: str
    #: ``"compared"``, or ``"raised"`` (``error`` says what Keras said and where).
    outcome: Literal["compared", "raised", "not-applicable"] = "compared"
    stage: str = ""
    error: ErrorInfo | None = None
    why: str = ""
    #: ``path: what before → what after`` for each policy or variable dtype that changed.
    dtype_changes: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()
    loaded_output_dtypes: tuple[str, ...] = ()
    max_abs_difference: float | None = None
    layers_compared: int = 0

    def text(self) -> str:
        if self.outcome == "raised" and self.error is not None:
            return f"{self.format}: {self.stage} raised {self.error.type}: {self.error.message}"
        if self.outcome == "not-applicable":
            return f"{self.format}: not run ({self.why})"
        diff = "" if self.max_abs_difference is None else f", max |Δ| {self.max_abs_difference:g}"
        changes = f", {len(self.dtype_changes)} dtype changes" if self.dtype_changes else ""
        return (
            f"{self.format}: {self.layers_compared} layers compared; outputs "
            f"{', '.join(self.output_dtypes)} → {', '.join(self.loaded_output_dtypes)}"
            f"{diff}{changes}"
        )


class RoundTripReport(Record):
    """``check_model(..., mode="save")``: each format's round trip of a copy of the model."""

    trips: tuple[RoundTrip, ...] = ()

    def text(self) -> str:
        return "\n".join(trip.text() for trip in self.trips)
