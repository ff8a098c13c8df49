"""Quantization as Keras does it, on copies of a user's model (``check_model(..., quantize=)``).

The copy is the model in Keras's own format (a ``.keras`` archive written in memory and loaded
back, :mod:`._instance`), so that subclassed and keras-hub models copy as Keras saves them; the
model itself is never called, built or changed. Each leaf layer of the copy is quantized as
``Model.quantize`` does it (``layer.quantize(mode, type_check=True, config=config)``; before
Keras 3.5.0 ``layer.quantize(mode)``), one at a time, so that each layer's outcome is known:
quantized, skipped with what Keras said (it only warns once per class), or refused (int8 under
float16 raises for the whole model).

``gptq`` and ``awq`` (a ``keras.quantizers.GPTQConfig``/``AWQConfig``) run as Keras runs them,
``copy.quantize(mode, config=config)``: every leaf's ``quantize`` and then the calibration,
block by block, over the blocks the model's ``get_quantization_layer_structure(mode)`` names
(keras-hub's ``CausalLM`` and ``MaskedLM`` do: the token embedding, then
``backbone.transformer_layers``), or the config's ``quantization_layer_structure`` (mapped by
path onto the copy's layers). The calibration data is token ids, or text with the tokenizer
that makes them; Keras needs a tokenizer (any) even for token ids. A model without a structure
is refused in Keras's words. The config's ``dataset`` is read once: a generator is spent.

>>> import keras, numpy as np
>>> inputs = keras.Input((4,))
>>> model = keras.Model(inputs, keras.layers.Dense(2, name="d")(inputs), name="m")
>>> request = quantize_request("int8")
>>> copy = model_copy(model)
>>> rows, refused = quantize_layers(copy, request)
>>> [(r.path, r.status, r.policy) for r in rows if r.has_weights], refused
([('m/d', 'quantized', 'int8_from_float32')], None)
>>> model.layers[1].dtype_policy.name
'float32'
"""

from __future__ import annotations

import contextlib
import copy as copy_module
import dataclasses
import inspect
import re
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from dtype_explorer import keras_facts
from dtype_explorer.errors import InvalidSpecError, keras_message
from dtype_explorer.keras_run import _facts as facts
from dtype_explorer.keras_run._arrays import abstract, numpy_values
from dtype_explorer.keras_run._compat import layer_quantization_mode, quantize_kwargs
from dtype_explorer.keras_run.model._instance import pack
from dtype_explorer.keras_run.model._model_trace import layer_paths
from dtype_explorer.keras_run.model._samples import keras_flatten
from dtype_explorer.keras_run.trace import wrapped_entry_points
from dtype_explorer.records import ErrorInfo, QuantizedLayer, StoredVariable

#: The modes that need a calibration config (``keras.quantizers.GPTQConfig`` / ``AWQConfig``).
_CALIBRATED = ("gptq", "awq")

#: The Keras release that first had each quantization mode (``keras_facts``).
ADDED_IN = keras_facts.QUANTIZATION_ADDED_IN


@dataclasses.dataclass(frozen=True)
class QuantizeRequest:
    """A checked ``quantize=``: Keras's mode, the config to pass (``None``: Keras's default),
    and the label reports show (``"int4/32"``)."""

    mode: str
    config: Any
    label: str
    #: Where this release lacks the mode: what to say after Keras's own refusal.
    lacking: str = ""


#: The largest int4 block size asked: Keras pads each block's input dimension to the block
#: size, so a block of 10**9 asks NumPy for gigabytes ("Maximum allowed dimension exceeded").
MAX_INT4_BLOCK = 65536


def check_int4_block(size: int, asked: str) -> None:
    """Refuse an int4 block size outside 1..:data:`MAX_INT4_BLOCK`, naming it."""
    if not 0 < size <= MAX_INT4_BLOCK:
        raise InvalidSpecError(
            f"quantize: int4's block size must be 1 to {MAX_INT4_BLOCK} (int4/32, int4/128); "
            f"received: {asked!r} (block size {size})"
        )


def quantization_modes() -> tuple[str, ...]:
    """The quantization modes the installed Keras has (``QUANTIZATION_MODES``; 3.1.x and 3.2.x:
    what their ``Model.quantize`` accepts, ``keras_run._facts``)."""
    return facts.quantization_modes()


def uncalibrated_modes() -> tuple[str, ...]:
    """The installed Keras's modes that need no calibration data (``int8``, ``float8``,
    ``int4``): the ones a single layer takes (the explorer widget's quantize picker).

    >>> "int8" in uncalibrated_modes() and "gptq" not in uncalibrated_modes()
    True
    """
    return tuple(mode for mode in quantization_modes() if mode not in _CALIBRATED)


def lacking_mode(mode: str, modes: tuple[str, ...]) -> str:
    """What to say after Keras's refusal of ``mode``, a mode this release lacks (``""`` when
    it has it): the release's modes and the release that added ``mode`` (:data:`ADDED_IN`).

    >>> lacking_mode("int8", ("int8",))
    ''
    """
    import keras

    if mode in modes or mode not in ADDED_IN:
        return ""
    return (
        f"Keras {keras.__version__} has no {mode!r} quantization mode (its modes: "
        f"{', '.join(modes) or 'none'}); Keras added {mode} in {ADDED_IN[mode]}: ask that "
        f"release or a later one (engine='keras=={ADDED_IN[mode]}.0')"
    )


def quantize_request(asked: Any) -> QuantizeRequest:
    """``asked`` checked: a mode of the installed Keras (``"int8"``, ``"float8"``, ``"int4"``,
    ``"int4/<block size>"``), or a ``keras.quantizers.QuantizationConfig`` instance (the way
    to ask ``gptq``/``awq``, which need a dataset and a tokenizer). A mode this release lacks
    but a later one has is asked of Keras anyway: its ``quantize()`` refuses in its words, and
    the request's ``lacking`` names the release that added it."""
    import keras

    modes = quantization_modes()
    config_class = getattr(keras.quantizers, "QuantizationConfig", None)  # 3.12 on
    if config_class is not None and isinstance(asked, config_class):
        mode = getattr(asked, "mode", None)
        return QuantizeRequest(mode=mode, config=asked, label=str(mode))
    if not isinstance(asked, str):
        raise InvalidSpecError(
            f"quantize takes a mode name ({', '.join(modes)}) or a "
            f"keras.quantizers.QuantizationConfig; received: {asked!r}"
        )
    block = re.fullmatch(r"int4/(\d+)", asked)
    if block and "int4" in modes:
        size = int(block.group(1))
        check_int4_block(size, asked)
        if not hasattr(keras.quantizers, "Int4QuantizationConfig"):
            raise InvalidSpecError(
                f"quantize={asked!r}: Keras {keras.__version__} has no "
                "keras.quantizers.Int4QuantizationConfig, so no block size: ask 'int4'"
            )
        config = keras.quantizers.Int4QuantizationConfig(block_size=size)
        return QuantizeRequest(mode="int4", config=config, label=asked)
    if asked in _CALIBRATED and asked in modes:
        name = "GPTQConfig" if asked == "gptq" else "AWQConfig"
        raise InvalidSpecError(
            f"quantize={asked!r} calibrates on data: pass "
            f"quantize=keras.quantizers.{name}(dataset=..., tokenizer=...) (token sequences "
            "and the tokenizer that made them), on a model whose "
            "get_quantization_layer_structure() names its blocks (keras-hub CausalLM models "
            "do); the other modes need no data: "
            + ", ".join(m for m in modes if m not in _CALIBRATED)
        )
    refused = keras_facts.unknown_quantization_mode(asked, modes)
    if refused is not None:
        raise InvalidSpecError(refused)
    return QuantizeRequest(mode=asked, config=None, label=asked, lacking=lacking_mode(asked, modes))


def keras_quantization_summary(model: Any) -> tuple[str | None, str]:
    """Keras's own ``model.quantization_summary(verbose=False)`` of a quantized model, and what
    Keras raised instead (``""``: nothing); ``None`` where this Keras has no such method
    (Keras's main has it, keras-nightly 3.16.0.dev; 3.15.1 does not)."""
    summary = getattr(model, "quantization_summary", None)
    if summary is None:
        return None, ""
    try:
        return str(summary(verbose=False)), ""
    except Exception as error:  # Keras's answer: said beside the rows, never as the rows
        return None, f"Model.quantization_summary() raised {type(error).__name__}: {error}"


def model_copy(model: Any) -> Any:
    """A copy of ``model`` through Keras's format: a ``.keras`` archive in memory, loaded back
    (config, weights, policies, a quantized model's kernels and scales)."""
    return pack(model).load()


def quantized_leaving_float(model: Any, request: QuantizeRequest, names: set[str]) -> Any:
    """A copy of ``model`` (:func:`model_copy`) quantized as a user writes it, by Keras's own
    ``Model.quantize(mode, config=..., filters=...)``, the layers named in ``names`` left
    float (Keras's warnings for the layers it skips silenced); ``None`` where this Keras's
    ``quantize`` takes no ``filters``."""
    if "filters" not in inspect.signature(type(model).quantize).parameters:
        return None
    copy = model_copy(model)
    config = request.config
    if request.mode in _CALIBRATED:  # a structure given names the model's layers
        config = _config_for_copy(config, model, copy)
    kwargs = {} if config is None else {"config": config}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        copy.quantize(request.mode, filters=lambda layer: layer.name not in names, **kwargs)
    return copy


def stored_variables(layer: Any, packed: bool = False) -> tuple[StoredVariable, ...]:
    """``layer``'s own variables as stored: name, dtype, shape, trainable, autocast, bytes;
    ``packed``: 4-bit values held two to a byte (an int4 kernel or table in int8, a gptq or
    awq kernel in uint8)."""
    import keras

    out = []
    for v in layer.weights:
        dtype = keras.backend.standardize_dtype(v.dtype)
        shape = tuple(int(d) for d in v.shape)
        size = int(np.prod(shape)) if shape else 1
        out.append(
            StoredVariable(
                name=v.name,
                dtype=dtype,
                shape=shape,
                trainable=bool(v.trainable),
                autocast=bool(getattr(v, "_autocast", True)),
                bytes=size * _itemsize(dtype),
                packed=packed and dtype in ("int8", "uint8") and v.name in ("kernel", "embeddings"),
            )
        )
    return tuple(out)


def _itemsize(dtype: str) -> int:
    if dtype in ("int4", "uint4"):
        return 1
    if dtype.startswith("float8"):
        return 1
    if dtype == "bfloat16":
        return 2
    return int(np.dtype(dtype).itemsize)


def quantize_layers(
    copy: Any, request: QuantizeRequest, source: Any = None
) -> tuple[list[QuantizedLayer], Any]:
    """Quantize each leaf layer of ``copy`` as ``Model.quantize`` does, recording each outcome;
    a refusal (Keras raised) stops there, as ``quantize()`` does. ``source``: the model
    ``copy`` was copied from (a calibrated config's ``quantization_layer_structure`` names its
    layers). Returns the rows and the refusal (``ErrorInfo``) or ``None``."""
    import keras

    if request.mode in _CALIBRATED and not request.lacking:  # calibrated over the model's blocks
        return _quantize_calibrated(copy, request, source)
    rows: list[QuantizedLayer] = []
    refused = None
    for layer, path in _leaf_paths(copy):
        before = stored_variables(layer)
        said = "not reached: quantize() raised at an earlier layer" if refused else ""
        if refused is None:
            try:
                layer.quantize(request.mode, **quantize_kwargs(), **_config(request))
            except NotImplementedError as error:
                said = keras_message(str(error), limit=300)
            except AttributeError:
                said = f"{type(layer).__name__} has no quantize method"
            except Exception as error:  # Keras refuses the mode: quantize() raises
                refused = _error(error, request.lacking)
                rows.append(_row(layer, path, before, "", error=refused))
                continue
        rows.append(_row(layer, path, before, said))
    if isinstance(copy, keras.Model):
        copy.train_function = copy.test_function = copy.predict_function = None
        if hasattr(copy, "_post_quantize"):  # 3.12 on
            copy._post_quantize(request.mode)
    return rows, refused


def _quantize_calibrated(
    copy: Any, request: QuantizeRequest, source: Any
) -> tuple[list[QuantizedLayer], Any]:
    """gptq/awq: Keras's own ``copy.quantize(mode, config=...)`` (each leaf's ``quantize``,
    then the calibration over the blocks), each leaf's ``quantize`` watched for what Keras
    said when it skipped it (it only warns, once per class)."""
    # 1. The config for the copy: a structure the user gave names the model's layers
    config = _config_for_copy(request.config, source, copy)
    # 2. Keras's quantize, each leaf's outcome recorded
    leaves = _leaf_paths(copy)
    before = {id(layer): stored_variables(layer) for layer, _ in leaves}
    said: dict[int, str] = {}
    refused = None
    with warnings.catch_warnings(), _watched(leaves, said):
        warnings.simplefilter("ignore")  # what Keras warns is each row's ``why``
        try:
            copy.quantize(request.mode, config=config)
        except Exception as error:  # no structure, no tokenizer: Keras's words
            refused = _error(error)
    # 3. The rows: a layer Keras set to the mode but never calibrated computes in float
    rows = []
    for layer, path in leaves:
        row = _row(layer, path, before[id(layer)], said.get(id(layer), ""))
        flag = f"is_{request.mode}_calibrated"
        if refused is None and row.status == "quantized" and not getattr(layer, flag, True):
            row = row.model_copy(
                update={
                    "status": "skipped",
                    "why": (
                        f"set to {row.policy} but never calibrated ({flag} is False: it is "
                        "outside the blocks of the model's quantization layer structure), "
                        "so it still computes with its float kernel"
                    ),
                }
            )
        rows.append(row)
    return rows, refused


@contextlib.contextmanager
def _watched(leaves: list[tuple[Any, str]], said: dict[int, str]) -> Iterator[None]:
    """Each leaf's ``quantize`` (an instance attribute over the class's, removed after)
    records what it raised when Keras skips it (``NotImplementedError``; no method)."""

    def watch(layer: Any) -> Any:
        original = layer.quantize

        def quantize(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            except NotImplementedError as error:
                said[id(layer)] = keras_message(str(error), limit=300)
                raise

        return quantize

    patched = []
    try:
        for layer, _ in leaves:
            if callable(getattr(layer, "quantize", None)):
                layer.__dict__["quantize"] = watch(layer)
                patched.append(layer)
            else:
                said[id(layer)] = f"{type(layer).__name__} has no quantize method"
        yield
    finally:
        for layer in patched:
            layer.__dict__.pop("quantize", None)


def _config_for_copy(config: Any, source: Any, copy: Any) -> Any:
    """``config``, or a shallow copy of it whose ``quantization_layer_structure`` names the
    copy's layers (found by path) instead of ``source``'s: quantizing the copy never
    calibrates the user's own layers."""
    structure = getattr(config, "quantization_layer_structure", None)
    if not structure:
        return config
    if source is None:
        raise InvalidSpecError("quantization_layer_structure needs the model it names")
    paths = {id(layer): path for layer, path, _ in layer_paths(source).values()}
    theirs = {path: layer for layer, path, _ in layer_paths(copy).values()}
    mapped = {}
    for key, layers in structure.items():
        mapped[key] = []
        for layer in layers:
            path = paths.get(id(layer))
            if path is None or path not in theirs:
                raise InvalidSpecError(
                    "the audit quantizes a copy of the model, so each layer that "
                    "quantization_layer_structure names must be one of the model's own "
                    f"layers; received in {key!r}: {type(layer).__name__} "
                    f"{getattr(layer, 'name', layer)!r}, not inside the model (leave "
                    "quantization_layer_structure unset to use the model's "
                    "get_quantization_layer_structure())"
                )
            mapped[key].append(theirs[path])
    config = copy_module.copy(config)
    config.quantization_layer_structure = mapped
    return config


def _config(request: QuantizeRequest) -> dict[str, Any]:
    """``layer.quantize``'s ``config=``, given only when there is one: releases before 3.12
    take no ``config``."""
    return {} if request.config is None else {"config": request.config}


def _row(
    layer: Any, path: str, before: tuple, said: str, error: ErrorInfo | None = None
) -> QuantizedLayer:
    mode = layer_quantization_mode(layer)
    status = "refused" if error is not None else "quantized" if mode else "skipped"
    why = (
        f"{error.type}: {error.message}"
        if error is not None
        else ""
        if mode
        else said or ("no weights to quantize" if not before else "")
    )
    return QuantizedLayer(
        path=path,
        layer_class=type(layer).__name__,
        status=status,
        why=why,
        policy=layer.dtype_policy.name,
        compute_dtype=layer.compute_dtype,
        has_weights=bool(before),
        variables=stored_variables(layer, packed=_packs(layer, str(mode or ""))),
        float_bytes=sum(v.bytes for v in before),
    )


def _packs(layer: Any, mode: str) -> bool:
    """Whether ``layer`` holds 4-bit values two to a byte: int4 (int8 bytes), awq and 4-bit
    gptq (uint8 bytes), as its policy says (``gptq/<bits>/<group>_from_...``)."""
    if mode in ("int4", "awq"):
        return True
    return mode == "gptq" and getattr(layer.dtype_policy, "weight_bits", None) == 4


def _leaves(model: Any) -> list[Any]:
    return [layer for layer in model._flatten_layers() if len(list(layer._flatten_layers())) == 1]


def _leaf_paths(model: Any) -> list[tuple[Any, str]]:
    paths = layer_paths(model)
    return [(layer, paths[id(layer)][1]) for layer in _leaves(model) if id(layer) in paths]


def _error(error: Exception, note: str = "") -> ErrorInfo:
    said = keras_message(str(error), limit=600)
    return ErrorInfo(type=type(error).__name__, message=f"{said} ({note})" if note else said)


def leaf_outputs(model: Any, sample: Any, arguments: dict[str, Any]) -> tuple[dict, Any]:
    """One call of ``model`` (a copy: its layers' entry points are wrapped for the call) on
    ``sample``: each leaf layer's outputs as NumPy, by ``(path, call index)``, and the model's
    outputs. Values only, for the error of a quantized copy against the float one."""
    seen: dict[tuple[str, int], list[np.ndarray]] = {}
    counts: dict[str, int] = {}
    active: set[int] = set()

    def wrap_for(layer: Any, path: str) -> Any:
        def wrap(_name: str, original: Any) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                if id(layer) in active:
                    return original(*args, **kwargs)
                active.add(id(layer))
                try:
                    out = original(*args, **kwargs)
                finally:
                    active.discard(id(layer))
                index = counts.get(path, 0)
                counts[path] = index + 1
                flat = keras_flatten(out)
                if not any(abstract(x) for x in flat):  # not a call inside a jax scan
                    seen[(path, index)] = [numpy_values(x) for x in flat]
                return out

            return call

        return wrap

    with contextlib.ExitStack() as stack:
        for layer, path in _leaf_paths(model):
            stack.enter_context(wrapped_entry_points(layer, wrap_for(layer, path)))
        outputs = model(sample, **arguments)
    return seen, [numpy_values(x) for x in keras_flatten(outputs)]
