"""The widget's request from the page, validated whole (:func:`parse_request`): its fields
(text, lists of names, JSON, shapes, the quantization mode), its engine (one of
:func:`engine_choices`, the engines the page's Keras picker offers), and one spec per backend
that can run it. Nothing from the page is evaluated.

>>> _shape({"shape": "2x4, 2x4"})
[[2, 4], [2, 4]]
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import partial
from typing import Any

from dtype_explorer.errors import InvalidSpecError, received, unknown
from dtype_explorer.frontends._contract import REQUEST_KEYS
from dtype_explorer.keras_run import MAX_KWARGS_DEPTH, make_spec, uncalibrated_modes
from dtype_explorer.records import (
    NIGHTLY_PACKAGE,
    ProbeSpec,
    check_engine_backend,
    engine_spec,
    is_moving,
    nightly_date,
)
from dtype_explorer.runtime import engines, pool
from dtype_explorer.shapes import SHAPE_SYNTAX, parse_shapes
from dtype_explorer.versions import library_version

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


def engine_choices() -> list[dict[str, Any]]:
    """The engines the page's Keras picker offers: the installed Keras (``engine: None``), then
    every created engine (``dx.engines.list()``), each with the Keras release that answers and
    the backends it runs on (``None``: every one).

    Returns:
        One dict per engine: ``engine``, ``keras``, ``label``, ``backends``.

    >>> engine_choices()[0]["engine"] is None
    True
    """
    installed = library_version("keras")
    return [
        {
            "engine": None,
            "keras": installed,
            "label": f"installed Keras {installed}",
            "backends": None,
        },
        *(_choice(e.spec, e.version, e.backends) for e in engines.created()),
    ]


def _choice(spec: str, version: str, runs_on: Sequence[str] | None) -> dict[str, Any]:
    keras2 = spec.startswith("tf_keras")
    built = nightly_date(version) if spec.startswith(NIGHTLY_PACKAGE) else None
    label = f"Keras 2, tf_keras {version} (engine)" if keras2 else f"Keras {version} (engine)"
    if built is not None:  # Keras's main: the build's date
        label = f"Keras main {version}, nightly of {built} (engine)"
    return {
        "engine": spec,
        "keras": version,
        "label": label,
        "backends": None if runs_on is None else list(runs_on),
    }


def _engine(
    request: dict[str, Any], offered: Sequence[dict[str, Any]], backends: list[str]
) -> str | None:
    """The request's engine: ``None`` (the installed Keras) or a created engine's name. Keras 2
    asked on a backend other than tensorflow is refused (named), not answered 'invalid'."""
    value = request.get("engine")
    names = [choice["engine"] for choice in offered]
    valid = ", ".join("None (the installed Keras)" if n is None else repr(n) for n in names)
    create = 'dx.engines.create("keras==3.11.3") creates one (then refresh_engines())'
    try:
        name = engine_spec(value)
        if is_moving(name):  # "nightly": the newest nightly created here (no index asked)
            name = getattr(engines.get(name or ""), "spec", name)
    except InvalidSpecError:
        raise InvalidSpecError(
            f"unknown engine; received: {received(value)}; valid: {valid}; {create}"
        ) from None
    for backend in backends:
        check_engine_backend(name, backend)
    if name is None or name in names:
        return name
    found = engines.get(name)  # created since the list was read (never created here)
    if found is None:
        raise InvalidSpecError(
            f"engine {name!r} is not created; received: {received(value)}; valid: {valid}; {create}"
        )
    return found.spec


def parse_request(
    request: Any,
    custom: dict[str, Any],
    defaults: dict[str, Any],
    offered: Sequence[dict[str, Any]] = (),
) -> tuple[list[ProbeSpec], dict[str, InvalidSpecError], int]:
    """Validate a request from the page into one ``ProbeSpec`` per backend that can run it,
    why each other backend cannot (:func:`_per_backend`), and its nonce.

    Args:
        request: the page's request (the widget contract's ``REQUEST_KEYS``).
        custom: the user's layers the picker offers, by target name.
        defaults: each target's catalog defaults (its shapes), for the arity check.
        offered: the engines the page may name (default: :func:`engine_choices`).

    Returns:
        ``(specs, refused, nonce)``: the specs, the backends that cannot run it with why, and
        the request's nonce. Raises ``InvalidSpecError`` when no backend can run it.

    >>> parse_request("Dense", {}, {})
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: a request is an object, not str
    """
    if not isinstance(request, dict):
        raise InvalidSpecError(f"a request is an object, not {type(request).__name__}")
    extra = sorted(str(key) for key in set(request) - set(REQUEST_KEYS))
    if extra:
        valid = ", ".join(REQUEST_KEYS)
        raise InvalidSpecError(f"unknown request field(s) {received(extra)}; valid: {valid}")
    target = _text(request, "target")
    layer = custom.get(target)
    kwargs = _json(request, "kwargs", dict, 'a JSON object such as {"units": 4}')
    shape = _shape(request)
    input_dtypes = _texts(request, "input_dtypes")
    backends = _texts(request, "backends")
    if not backends:
        raise InvalidSpecError("choose at least one backend")
    pool.usable(backends)
    engine = _engine(request, offered or engine_choices(), backends)
    nonce = request.get("nonce", 0)
    if not isinstance(nonce, int) or isinstance(nonce, bool):
        raise InvalidSpecError(f"nonce must be an integer; received: {received(nonce)}")
    ask = partial(
        make_spec,
        layer if layer is not None else target,
        tuple(input_dtypes),
        _text(request, "policy"),
        kwargs=kwargs,
        shape=shape,
        values=_text(request, "preset"),
        mode=_text(request, "mode") if "mode" in request else "call",
        engine=engine,
        precision=request.get("precision"),
        quantize=_quantize(request, uncalibrated_modes()),
    )
    specs, refused = _per_backend(ask, list(dict.fromkeys(backends)))
    _check_arity(specs[0], defaults.get(specs[0].target))
    return specs, refused, nonce
