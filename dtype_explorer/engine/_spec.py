"""A question, validated: every part of a probe checked and turned into a ``ProbeSpec``.

Nothing is evaluated: targets, dtypes and policies are checked against the catalog and Keras,
kwargs must be JSON values. A bad part raises ``InvalidSpecError`` naming what is wrong, what
is valid and the closest match.

>>> make_spec("Dense", "uint8", backend="numpy", kwargs={"units": 4}).input_dtypes
('uint8',)
>>> make_spec("Dens", backend="numpy")
Traceback (most recent call last):
...
dtype_explorer.errors.InvalidSpecError: unknown target 'Dens'; did you mean 'Dense'? ...
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.engine import catalog
from dtype_explorer.errors import InvalidSpecError, unknown
from dtype_explorer.records import ProbeSpec

#: Policies offered in pickers; any name Keras accepts works too.
COMMON_POLICIES: tuple[str, ...] = (
    "float32",
    "mixed_float16",
    "mixed_bfloat16",
    "float16",
    "bfloat16",
    "float64",
    "int8_from_float32",
)

#: Samples are probes, not workloads: the largest input a probe builds.
MAX_SAMPLE_ELEMENTS = 1 << 22

DtypeArg = str | Sequence[str]
ShapeArg = Sequence[int] | Sequence[Sequence[int]] | None


def make_spec(
    target: Any,
    input_dtype: DtypeArg = "float32",
    policy: Any = None,
    backend: str | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    shape: ShapeArg = None,
    values: str = "default",
    floatx: str | None = None,
    seed: int = 0,
) -> ProbeSpec:
    """Validate every part of a probe and return its ``ProbeSpec``.

    Raises ``InvalidSpecError`` (a ``ValueError``) naming what is wrong, what is valid and the
    closest match. Nothing is evaluated: kwargs must be JSON values.
    """
    if backend is None:
        import keras

        backend = keras.backend.backend()
    if isinstance(input_dtype, str):
        input_dtype = (input_dtype,)
    for name in input_dtype:
        dtypes.validate(name)
    if values not in dtypes.PRESETS:
        raise unknown("value preset", values, dtypes.PRESETS)
    if floatx is not None and floatx not in dtypes.FLOATX:
        raise unknown("floatx", floatx, dtypes.FLOATX)
    return ProbeSpec(
        target=_target_name(target),
        input_dtypes=tuple(input_dtype),
        policy=validate_policy(policy if policy is not None else floatx or "float32"),
        backend=backend,
        kwargs=_json_kwargs(kwargs or {}),
        shapes=_shapes(shape),
        values=values,
        floatx=floatx,
        seed=seed,
    )


def validate_policy(policy: Any) -> str:
    """The name of a policy Keras accepts (a ``DTypePolicy`` or a string)."""
    name = getattr(policy, "name", policy)
    if not isinstance(name, str):
        raise InvalidSpecError(
            f"policy must be a name or a keras.DTypePolicy, not {type(policy).__name__}"
        )
    return _checked_policy(name)


@functools.cache
def _checked_policy(name: str) -> str:
    import keras

    try:
        keras.dtype_policies.get(name)
    except (ValueError, TypeError) as error:
        raise unknown("dtype policy", name, (*COMMON_POLICIES, *dtypes.keras_dtypes())) from error
    return name


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return catalog.entry(target).name
    import keras

    cls = target if isinstance(target, type) else type(target)
    if not (isinstance(cls, type) and issubclass(cls, keras.layers.Layer)):
        raise InvalidSpecError(
            "target must be a layer name, 'ops.<name>', "
            "or a keras.layers.Layer subclass or instance; "
            f"got {type(target).__name__}"
        )
    return f"custom:{cls.__qualname__}"


def _json_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(kwargs, dict):
        raise InvalidSpecError(f"kwargs must be a dict of JSON values, not {type(kwargs).__name__}")
    try:
        return json.loads(json.dumps(kwargs, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise InvalidSpecError(
            f"kwargs must be JSON values (numbers, strings, lists, dicts): {error}"
        ) from error


def _shapes(shape: ShapeArg) -> tuple[tuple[int, ...], ...] | None:
    if shape is None:
        return None
    items = list(shape)
    nested = items and all(isinstance(s, Iterable) and not isinstance(s, str) for s in items)
    shapes = [tuple(s) for s in items] if nested else [tuple(items)]
    for s in shapes:
        if not s or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in s):
            raise InvalidSpecError(f"a shape is a tuple of positive ints (batch first), got {s!r}")
        if math.prod(s) > MAX_SAMPLE_ELEMENTS:
            raise InvalidSpecError(
                f"shape {s} holds {math.prod(s)} elements; the limit is {MAX_SAMPLE_ELEMENTS}"
            )
    return tuple(shapes)
