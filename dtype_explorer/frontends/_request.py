"""The pieces of a page request the widget validates (:func:`dtype_explorer.frontends.widget.
_parse_request` puts them together): text fields, lists of names, JSON, shapes, and one spec per
backend that can run the request.

>>> _shape({"shape": "2x4, 2x4"})
[[2, 4], [2, 4]]
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from dtype_explorer.errors import InvalidSpecError, received, unknown
from dtype_explorer.keras_run import MAX_KWARGS_DEPTH
from dtype_explorer.records import ProbeSpec
from dtype_explorer.shapes import SHAPE_SYNTAX, parse_shapes

#: The longest JSON text accepted for kwargs.
MAX_TEXT = 20_000


def _per_backend(
    ask: Any, backends: list[str]
) -> tuple[list[ProbeSpec], dict[str, InvalidSpecError]]:
    """One spec per backend that can run the request, and why each other backend cannot
    (fit on numpy): the request is refused only when no backend can run it."""
    specs: list[ProbeSpec] = []
    refused: dict[str, InvalidSpecError] = {}
    for backend in backends:
        try:
            specs.append(ask(backend=backend))
        except InvalidSpecError as error:
            refused[backend] = error
    if not specs:
        raise next(iter(refused.values()))
    return specs, refused


def _check_arity(spec: ProbeSpec, defaults: dict[str, Any] | None) -> None:
    inputs = len(spec.shapes) if spec.shapes else len((defaults or {}).get("shapes", [()]))
    if len(spec.input_dtypes) not in (1, inputs):
        raise InvalidSpecError(
            f"{spec.target} gets {inputs} input(s) but {len(spec.input_dtypes)} input dtypes "
            f"were given; give one dtype for all inputs or one per input"
        )


def _text(request: dict[str, Any], key: str) -> str:
    value = request.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidSpecError(f"{key} must be a non-empty string; received: {received(value)}")
    return value.strip()


def _texts(request: dict[str, Any], key: str) -> list[str]:
    value = request.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidSpecError(f"{key} must be a list of names; received: {received(value)}")
    return value


def _json(request: dict[str, Any], key: str, kind: type, example: str) -> Any:
    """A JSON text field: ``None`` when empty (the catalog default), else a value of ``kind``."""
    text = request.get(key, "")
    if not isinstance(text, str):
        raise InvalidSpecError(f"{key} must be JSON text, not {type(text).__name__}")
    if not text.strip():
        return None
    if len(text) > MAX_TEXT:
        raise InvalidSpecError(f"{key} is {len(text)} characters long; the limit is {MAX_TEXT}")
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidSpecError(
            f"{key} nest deeper than {MAX_KWARGS_DEPTH} levels; expected {example}"
        ) from None
    except ValueError as error:  # JSONDecodeError says where, not what: nothing long
        raise InvalidSpecError(f"{key} is not valid JSON ({error}); expected {example}") from None
    if not isinstance(value, kind):
        raise InvalidSpecError(f"{key} must be {example}; received: {received(text.strip())}")
    return value


def _quantize(request: dict[str, Any], modes: Sequence[str]) -> str | None:
    """The request's ``quantize``: ``None`` (the float layer), one of ``modes`` (the installed
    Keras's modes that need no calibration, :func:`uncalibrated_modes`) or ``int4/<block
    size>``; whether the target takes it (a layer, not an op) is :func:`make_spec`'s to say.

    >>> _quantize({"quantize": "int8"}, ["int8", "int4"]), _quantize({}, ["int8"])
    ('int8', None)
    >>> _quantize({"quantize": "int9"}, ["int8", "int4"])
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: quantize: unknown quantization mode 'int9'; \
did you mean 'int8'? Valid: None (not quantized), int4, int4/<block size>, int8
    """
    value = request.get("quantize")
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidSpecError(
            f"quantize must be a mode's name or null; received: {received(value)}"
        )
    block = re.fullmatch(r"int4/([1-9]\d*)", value)
    if value in modes or (block and "int4" in modes):
        return value
    valid = ["None (not quantized)", *modes, *(["int4/<block size>"] if "int4" in modes else [])]
    if value in ("gptq", "awq"):
        raise InvalidSpecError(
            f"quantize={value!r} calibrates on data (a dataset and a tokenizer) over a model's "
            "blocks: ask it of a model, dx.check_model(model, sample, quantize=keras.quantizers."
            f"{value.upper()}Config(...)); a layer takes {', '.join(valid)}"
        )
    raise InvalidSpecError(f"quantize: {unknown('quantization mode', value, valid)}")


def _shape(request: dict[str, Any]) -> list[list[int]] | None:
    """The request's shapes (``2x8x3``, ``(2, 8, 3)`` or JSON, :func:`parse_shapes`)."""
    text = request.get("shape", "")
    if not isinstance(text, str):
        raise InvalidSpecError(f"shape must be text, not {type(text).__name__}; {SHAPE_SYNTAX}")
    shapes = parse_shapes(text)
    return None if shapes is None else [list(shape) for shape in shapes]
