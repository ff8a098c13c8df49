"""What ``model.quantize()`` did to a model (``check_model(..., quantize=)``), and what a save
and load did to it (``check_model(..., mode="save")``): per-layer rows, computed once here and
laid out by the views. Where the Keras that ran has ``Model.quantization_summary()`` (Keras's
main, keras-nightly), its own summary is kept beside the rows (``keras_summary``, verbatim),
read into rows (:func:`keras_summary_rows`) and compared with them (``summary_disagreements``).

>>> rows = keras_summary_rows(SUMMARY_EXAMPLE)
>>> [(r.path, r.policy, r.dtype, r.bytes, r.float_kept) for r in rows]
[('head', 'int8_from_float32', 'int8', 84, False)]
"""

from __future__ import annotations

import re
from typing import Literal

from dtype_explorer.errors import as_sentence
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


#: What ``Model.quantization_summary(verbose=False)`` returns (keras-nightly 3.16.0.dev), as the
#: doctests read it.
SUMMARY_EXAMPLE = """Quantization summary for 'net'
=================================================================
Layer: head
  dtype policy : int8_from_float32
  weight store : int8 (84 bytes)
-----------------------------------------------------------------
Quantized layers : 1"""
_SUMMARY_ROW = re.compile(
    r"^Layer: (?P<path>.+)\n\s+dtype policy : (?P<policy>\S+)\n"
    r"\s+weight store : (?P<dtype>\S+) \((?P<bytes>\d+) bytes(?P<kept>, float weight kept)?\)",
    flags=re.MULTILINE,
)


class KerasQuantizedLayer(Record):
    """One layer of Keras's own ``quantization_summary()``: its path, dtype policy, the
    storage dtype of its quantized weight and the bytes that weight stores (codes, scales,
    zero points; a mode that keeps the float weight, float8, counts that weight)."""

    path: str
    policy: str
    dtype: str
    bytes: int
    float_kept: bool = False


def keras_summary_rows(text: str) -> tuple[KerasQuantizedLayer, ...]:
    """The layers of a ``quantization_summary()`` text, in its order."""
    return tuple(
        KerasQuantizedLayer(
            path=m["path"].strip(),
            policy=m["policy"],
            dtype=m["dtype"],
            bytes=int(m["bytes"]),
            float_kept=m["kept"] is not None,
        )
        for m in _SUMMARY_ROW.finditer(text)
    )


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
    #: Keras's own ``model.quantization_summary(verbose=False)`` of the quantized copy,
    #: verbatim; ``None`` where the Keras that ran has none (releases up to 3.15).
    keras_summary: str | None = None

    def summary_disagreements(self) -> tuple[str, ...]:
        """Where Keras's ``quantization_summary()`` and the rows disagree: a layer one lists
        as quantized and the other not, another policy, another storage dtype of the weight
        (``kernel``/``embeddings``); ``()`` when they agree or Keras gave no summary.

        >>> row = QuantizedLayer(path="net/head", layer_class="Dense", status="quantized",
        ...     policy="int8_from_float32", has_weights=True,
        ...     variables=(StoredVariable(name="kernel", dtype="int8", shape=(21, 3)),))
        >>> report = QuantizationReport(mode="int8", asked="int8", layers=(row,),
        ...                             keras_summary=SUMMARY_EXAMPLE)
        >>> report.summary_disagreements()
        ()
        >>> report.model_copy(update={"layers": ()}).summary_disagreements()
        ("head: quantized in Keras's summary, not among the rows",)
        """
        if self.keras_summary is None:
            return ()
        ours = {r.path: r for r in self.layers if r.status == "quantized" and r.has_weights}
        said = []
        for keras_row in keras_summary_rows(self.keras_summary):
            match = [p for p in ours if p == keras_row.path or p.endswith("/" + keras_row.path)]
            if len(match) != 1:
                said.append(f"{keras_row.path}: quantized in Keras's summary, not among the rows")
                continue
            row = ours.pop(match[0])
            if row.policy != keras_row.policy:
                said.append(f"{row.path}: policy {row.policy}, Keras's summary {keras_row.policy}")
            weight = [v.dtype for v in row.variables if v.name in ("kernel", "embeddings")]
            if weight and weight[0] != keras_row.dtype:
                said.append(
                    f"{row.path}: weight stored {weight[0]}, Keras's summary {keras_row.dtype}"
                )
        said += [f"{path}: quantized in the rows, not in Keras's summary" for path in ours]
        return tuple(said)

    def summary_text(self) -> str:
        """One line on Keras's own summary: ``""`` without one; else whether it agrees."""
        if self.keras_summary is None:
            return ""
        count = len(keras_summary_rows(self.keras_summary))
        apart = self.summary_disagreements()
        if not apart:
            return f"Keras's quantization_summary(): {count} layers, agreeing with the rows"
        return "Keras's quantization_summary() disagrees: " + "; ".join(apart)

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
    #: The model's own call on the sample raised (Keras's error, where="call"): no format was
    #: saved, since a loaded model's outputs would have nothing to be compared with.
    call_error: ErrorInfo | None = None

    def lines(self) -> tuple[str, ...]:
        """One line per format, or the one line saying why none ran.

        >>> said = ErrorInfo(type="ValueError", message="bad input")
        >>> RoundTripReport(call_error=said).lines()[0][:78]
        "not run: the model's own call on the sample raised ValueError (Keras's error):"
        """
        if self.call_error is not None:
            said = self.call_error
            return (
                f"not run: the model's own call on the sample raised {said.type} (Keras's "
                f"error): {as_sentence(said.message)} Nothing was saved: a loaded model's "
                "outputs would have nothing to be compared with.",
            )
        return tuple(trip.text() for trip in self.trips)

    def text(self) -> str:
        return "\n".join(self.lines())
