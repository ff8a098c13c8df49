"""A single layer quantized for a probe (``ProbeSpec.quantize``), as ``Model.quantize`` does it:
the layer is built (a symbolic call on the probe's inputs), then ``layer.quantize(mode,
type_check=True[, config=])`` (before Keras 3.5.0, ``layer.quantize(mode)``, as its
``Model.quantize`` calls it); the probe then calls it as it calls any layer. A layer built
under a quantized policy (``"int8_from_float32"``) is described the same way, without the
``quantize`` call.

The modes are the answering release's (``QUANTIZATION_MODES``; 3.1.x-3.2.x: what their
``Model.quantize`` accepts): a mode it lacks is refused in its words, naming the release that
added the mode (:data:`ADDED_IN`, read from ``QUANTIZATION_MODES`` at each release tag of
keras-team/keras, 3.3.0 to 3.15.0, and int8 from 3.1.0; the release's own list decides, the
table only names where to go). Keras's refusal of the layer or the mode (no ``quantize``
method; int8 under float16) is the probe's answer, an ``error`` at ``"quantize"``, never a
crash.

>>> import keras
>>> layer = keras.layers.Dense(4)
>>> quantizer = LayerQuantizer("int8")
>>> built = quantizer.quantized(layer, lambda l: l.build((2, 4)))
>>> built.quantization_mode, [v.dtype for v in quantizer.float_variables]
('int8', ['float32', 'float32'])
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from dtype_explorer.errors import InvalidSpecError, keras_message, unknown
from dtype_explorer.keras_run._compat import layer_quantization_mode, quantize_kwargs
from dtype_explorer.keras_run._facts import quantization_modes
from dtype_explorer.keras_run.model import (
    ADDED_IN,
    check_int4_block,
    lacking_mode,
    stored_variables,
)
from dtype_explorer.records import (
    ErrorInfo,
    LayerQuantization,
    StoredVariable,
    TraceStep,
    compute_path,
)

_CALIBRATED = ("gptq", "awq")


def release_modes() -> tuple[str, ...]:
    """The quantization modes of the Keras release imported here (``QUANTIZATION_MODES``;
    3.1.x and 3.2.x: what their ``Model.quantize`` accepts)."""
    return quantization_modes()


class QuantizeRefused(Exception):
    """Keras refused to quantize the layer (its words kept): the probe's answer."""

    def __init__(self, error: BaseException, quantization: LayerQuantization, note: str = ""):
        super().__init__(str(error))
        said = keras_message(str(error), limit=600)
        self.info = ErrorInfo(
            type=type(error).__name__,
            message=f"{said} ({note})" if note else said,
            where="quantize",
        )
        self.quantization = quantization

    def fields(self) -> dict[str, Any]:
        """The result's fields: an error at ``"quantize"`` in Keras's words."""
        return {
            "status": "error",
            "verdict": "error",
            "error": self.info,
            "quantization": self.quantization,
            "basis": (f"layer.quantize({self.quantization.mode!r}) raised: Keras refused",),
        }


class LayerQuantizer:
    """``asked`` (``ProbeSpec.quantize``) checked against this release's modes, and the
    quantization of each layer the probe builds (:meth:`quantized`).

    Attributes:
        mode, block_size: Keras's mode and int4's block size (``None``: Keras's default).
        float_variables: the last layer's variables before ``quantize`` (its float bytes).
    """

    def __init__(self, asked: str):
        self.asked = asked
        self.modes = release_modes()
        mode, _, block = asked.partition("/")
        self.mode = mode
        self.block_size = int(block) if block else None
        self.float_variables: tuple[StoredVariable, ...] = ()
        #: Where this release lacks the mode: what to say after Keras's refusal.
        self.lacking = ""
        self._check()

    def _check(self) -> None:
        import keras

        if self.mode not in self.modes:
            if self.mode not in ADDED_IN:
                raise unknown("quantization mode", self.asked, [*self.modes, "int4/<block size>"])
            # Keras answers: its quantize() refuses a mode it lacks (QuantizeRefused)
            self.lacking = lacking_mode(self.mode, self.modes)
            return
        if self.mode in _CALIBRATED:
            raise InvalidSpecError(
                f"quantize={self.asked!r} calibrates on data (a dataset and a tokenizer) over a "
                "model's blocks: ask it of a model, dx.check_model(model, sample, quantize="
                f"keras.quantizers.{'GPTQ' if self.mode == 'gptq' else 'AWQ'}Config(...)); a "
                "single layer takes " + ", ".join(m for m in self.modes if m not in _CALIBRATED)
            )
        if self.block_size is not None and self.mode != "int4":
            raise InvalidSpecError(
                "quantize: a block size is int4's, and positive (int4/32). "
                f"Received: {self.asked!r}"
            )
        if self.block_size is not None:
            check_int4_block(self.block_size, self.asked)
        if self.block_size is not None and not hasattr(keras.quantizers, "Int4QuantizationConfig"):
            raise InvalidSpecError(
                f"quantize={self.asked!r}: Keras {keras.__version__} has no "
                "keras.quantizers.Int4QuantizationConfig, so no block size: ask 'int4'"
            )

    def _config(self) -> dict[str, Any]:
        import keras

        if self.block_size is None:
            return {}
        return {"config": keras.quantizers.Int4QuantizationConfig(block_size=self.block_size)}

    def quantized(self, layer: Any, build: Callable[[Any], Any]) -> Any:
        """``layer`` built by ``build(layer)``, then quantized as ``Model.quantize`` does;
        Keras's refusal raises :class:`QuantizeRefused`."""
        if not layer.built:
            build(layer)
        self.float_variables = stored_variables(layer)
        quantize = getattr(layer, "quantize", None)
        try:
            if quantize is None:
                raise AttributeError(f"{type(layer).__name__} has no quantize method")
            kwargs = self._config()
            if "config" in kwargs and "config" not in inspect.signature(quantize).parameters:
                kwargs = {}
            quantize(self.mode, **quantize_kwargs(), **kwargs)
        except Exception as error:
            record = self.record(layer, (), refused=True)
            raise QuantizeRefused(error, record, self.lacking) from error
        return layer

    def record(
        self, layer: Any, trace: Sequence[TraceStep], refused: bool = False
    ) -> LayerQuantization:
        """What quantization did to ``layer``, its compute path read from ``trace``."""
        return describe(layer, trace, self.asked, "quantize", self.float_variables, refused)


def describe(
    layer: Any,
    trace: Sequence[TraceStep],
    asked: str,
    via: str,
    float_variables: Sequence[StoredVariable] = (),
    refused: bool = False,
) -> LayerQuantization:
    """``layer``'s quantization record: its policy, stored variables and compute path."""
    mode = str(layer_quantization_mode(layer) or asked.partition("/")[0])
    variables = stored_variables(layer, packed=mode.startswith("int4"))
    return LayerQuantization(
        mode=mode,
        asked=asked,
        via=via,
        status="refused" if refused else "quantized",
        policy=layer.dtype_policy.name,
        compute_dtype=str(layer.compute_dtype),
        modes=release_modes(),
        variables=() if refused else variables,
        float_bytes=sum(v.bytes for v in float_variables),
        steps=() if refused else compute_path(trace, [v.dtype for v in variables]),
    )


def quantization_of(
    layer: Any, quantizer: LayerQuantizer | None, trace: Sequence[TraceStep]
) -> LayerQuantization | None:
    """The probed layer's record: quantized by the probe, or built under a quantized policy
    (``None`` for a float layer)."""
    if quantizer is not None:
        return quantizer.record(layer, trace)
    if layer_quantization_mode(layer):
        return describe(layer, trace, layer.dtype_policy.name, "policy")
    return None
