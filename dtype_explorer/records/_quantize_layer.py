"""One quantized layer in a probe (``probe(..., quantize="int8")`` or a quantized policy such
as ``"int8_from_float32"``): what it stores and how it computes, read from its op trace, computed
once here and laid out by the views (text, card, widget).

The compute path is read from the trace's steps: quantize inputs → (integer) product →
accumulate dtype → descale → bias; a weight-only layer (its product in a float dtype while its
kernel is stored low) says "dequantized to <dtype> on every call".

>>> from dtype_explorer.records._trace import TraceStep, TraceTensor
>>> t = lambda d, kind="tensor", shape=(2, 4): TraceTensor(dtype=d, kind=kind, shape=shape)
>>> trace = [
...     TraceStep(index=0, op="ops.cast", inputs=(t("float32"),), outputs=(t("int8"),)),
...     TraceStep(index=1, op="ops.matmul", inputs=(t("int8"), t("int8", "variable")),
...               outputs=(t("int32"),)),
...     TraceStep(index=2, op="ops.cast", inputs=(t("int32"),), outputs=(t("float32"),)),
...     TraceStep(index=3, op="ops.divide", inputs=(t("float32"), t("float32")),
...               outputs=(t("float32"),)),
...     TraceStep(index=4, op="ops.add", inputs=(t("float32"), t("float32", "variable")),
...               outputs=(t("float32"),)),
... ]
>>> for step in compute_path(trace, ["int8", "float32"]):
...     print(step)
quantize inputs: float32 → int8
integer matmul: int8 x int8 → int32 (accumulated in int32)
descale: int32 → float32, cast/divide by the scale
bias: add in float32
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import computed_field

from dtype_explorer.records._base import ComputedRecord, Record
from dtype_explorer.records._trace import TraceStep

#: The ops that do a quantized layer's core product.
_CORE = ("ops.matmul", "ops.einsum", "ops.take", "ops.conv")
_INT = ("int4", "int8", "uint8", "int16", "int32")
_LOW = ("int4", "int8", "float8_e4m3fn", "float8_e5m2")


class StoredVariable(Record):
    """One variable of a layer as stored after quantization."""

    name: str
    dtype: str
    shape: tuple[int, ...] = ()
    trainable: bool = False
    autocast: bool = True
    bytes: int = 0
    #: int4 values held two to an int8 byte.
    packed: bool = False

    def text(self) -> str:
        """``kernel: int8[4x4], 16 bytes`` (``, int4 packed``, ``, trainable``)."""
        shape = "x".join(map(str, self.shape))
        extra = (", int4 packed" if self.packed else "") + (", trainable" if self.trainable else "")
        return f"{self.name}: {self.dtype}[{shape}], {self.bytes} bytes{extra}"


class LayerQuantization(ComputedRecord):
    """What quantization did to the probed layer (``ProbeResult.quantization``).

    ``via``: ``"quantize"`` (the probe called ``layer.quantize(mode)`` as ``Model.quantize``
    does) or ``"policy"`` (the layer was built under a quantized policy); ``status``:
    ``"refused"`` when Keras raised (its words are the result's ``error``); ``modes``: the
    quantization modes of the Keras release that answered; ``float_bytes``: what the float
    layer stored; ``steps``: the compute path, read from the op trace (:func:`compute_path`).
    """

    mode: str
    asked: str
    via: Literal["quantize", "policy"] = "quantize"
    status: Literal["quantized", "refused"] = "quantized"
    policy: str = ""
    compute_dtype: str = ""
    modes: tuple[str, ...] = ()
    variables: tuple[StoredVariable, ...] = ()
    float_bytes: int = 0
    steps: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(v.bytes for v in self.variables)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> str:
        """:meth:`text`, in the JSON (the widget's heading)."""
        return self.text()

    def text(self) -> str:
        """``quantize('int8'): policy int8_from_float32, 84 bytes stored (float: 96)``."""
        how = f"quantize({self.asked!r})" if self.via == "quantize" else f"policy {self.asked!r}"
        if self.status == "refused":
            return f"{how}: refused by Keras"
        was = f" (float: {self.float_bytes})" if self.float_bytes else ""
        return f"{how}: policy {self.policy}, {self.bytes} bytes stored{was}"


def compute_path(
    trace: Sequence[TraceStep], stored: Iterable[str] = (), *, low_stored: Iterable[str] = _LOW
) -> tuple[str, ...]:
    """The steps of a quantized layer's call, read from its op trace's ``trace`` steps;
    ``stored``: the dtypes the layer stores its variables in; ``low_stored``: those of them
    that make a float product "dequantized on every call" (the audit adds gptq/awq's
    ``uint8``). ``()`` when no core product (matmul, einsum, take, conv) ran."""
    steps = list(trace)
    cores = [i for i, s in enumerate(steps) if s.op in _CORE and s.outputs]
    if not cores:
        return ()
    takes = [i for i in cores if steps[i].op == "ops.take"]
    low_takes = [i for i in takes if steps[i].inputs and steps[i].inputs[0].dtype in _LOW]
    at = cores[-1] if len(takes) < len(cores) else (low_takes or takes)[0]
    core = steps[at]
    ins = [t.dtype for t in core.inputs if not t.dtype.startswith("python")]
    out = core.outputs[0].dtype
    path = _quantized_inputs(steps, at)
    name = core.op.removeprefix("ops.")
    low = sorted(set(stored) & set(low_stored))
    if name == "take":
        path.append(f"look up rows: {ins[0]} table by {ins[-1]} indices → {out}")
    elif all(d in _INT for d in ins):
        path.append(f"integer {name}: {' x '.join(ins)} → {out} (accumulated in {out})")
    else:
        if low:
            path.append(f"kernel stored {'/'.join(low)}, dequantized to {out} on every call")
        path.append(f"{name}: {' x '.join(ins)} → {out}")
    return (*path, *_after_core(steps[at + 1 :], core))


def _quantized_inputs(steps: list[TraceStep], at: int) -> list[str]:
    """``quantize inputs: float32 → int8`` where a float tensor was cast to a low dtype
    before the product (``→ float32 (quantize-dequantize)`` where it was cast back)."""
    cast_low = [
        i
        for i, s in enumerate(steps[:at])
        if s.op == "ops.cast"
        and s.inputs
        and s.inputs[0].kind == "tensor"
        and s.outputs
        and s.outputs[0].dtype in _LOW
        and not s.inputs[0].dtype.startswith(("int", "python"))
    ]
    if not cast_low:
        return []
    first = steps[cast_low[0]]
    back = next(
        (
            s
            for s in steps[cast_low[0] + 1 : at]
            if s.op == "ops.cast" and s.inputs and s.inputs[0].dtype == first.outputs[0].dtype
        ),
        None,
    )
    then = f" → {back.outputs[0].dtype} (quantize-dequantize)" if back is not None else ""
    return [f"quantize inputs: {first.inputs[0].dtype} → {first.outputs[0].dtype}{then}"]


def _after_core(after: list[TraceStep], core: TraceStep) -> list[str]:
    """The descale (ops on the product's shape: cast, divide, multiply) and the bias."""
    path = []
    shape = core.outputs[0].shape
    descale = [
        s
        for s in after
        if s.op in ("ops.cast", "ops.divide", "ops.multiply")
        and s.inputs
        and s.inputs[0].kind == "tensor"
        and s.inputs[0].shape == shape
    ]
    if descale:
        cast = next((s for s in descale if s.op == "ops.cast" and s.outputs), None)
        how = "/".join(dict.fromkeys(s.op.removeprefix("ops.") for s in descale))
        into = f" {cast.inputs[0].dtype} → {cast.outputs[0].dtype}," if cast else ""
        path.append(f"descale:{into} {how} by the scale")
    bias = [s for s in after if s.op == "ops.add" and any(t.kind == "variable" for t in s.inputs)]
    if bias:
        path.append(f"bias: add in {bias[-1].outputs[0].dtype}")
    return path
