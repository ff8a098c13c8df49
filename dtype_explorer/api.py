"""The public ``probe`` function: validate a question, then answer it here or in the workers.

>>> import dtype_explorer as dx
>>> dx.probe("Conv1D", input_dtype="uint8", backend="all").verdict   # doctest: +SKIP
'diverges'
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from dtype_explorer import catalog, dtypes
from dtype_explorer.errors import InvalidSpecError, unknown
from dtype_explorer.model import BACKENDS, ProbeResult, ProbeSet, ProbeSpec

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


def probe(
    target: Any,
    input_dtype: DtypeArg = "float32",
    policy: Any = None,
    backend: str | Sequence[str] | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    shape: ShapeArg = None,
    values: str = "default",
    floatx: str | None = None,
    seed: int = 0,
    timeout: float | None = None,
    use_cache: bool = True,
) -> ProbeResult | ProbeSet:
    """Run ``target`` on a sample of ``input_dtype`` under ``policy`` and report every dtype.

    ``target``: a ``keras.layers`` class name (``"Dense"``), ``"ops.<name>"``, or a user
    ``Layer`` subclass or instance. ``backend``: ``None`` runs in this process on the backend
    Keras imported; a backend name runs in that backend's worker process; ``"all"`` or a list
    returns a ``ProbeSet`` with one result per backend. ``policy=None`` is the policy Keras
    makes from ``floatx`` (``"float32"`` unless ``floatx`` is given), whatever this session's
    global policy is, so answers are the same in every process.
    """
    backends = resolve_backends(backend)
    specs = [
        make_spec(
            target,
            input_dtype,
            policy,
            b,
            kwargs=kwargs,
            shape=shape,
            values=values,
            floatx=floatx,
            seed=seed,
        )
        for b in backends
    ]
    custom = None if isinstance(target, str) else target
    if backend is None:
        from dtype_explorer.inprocess import run

        return run(specs[0], target=custom)

    from dtype_explorer import pool

    payload = pool.target_payload(custom) if custom is not None else None
    futures = [
        pool.submit(s, target_payload=payload, timeout=timeout, use_cache=use_cache) for s in specs
    ]
    results = [f.result() for f in futures]
    if isinstance(backend, str) and backend != "all":
        return results[0]
    return ProbeSet(results=tuple(results))


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
    if floatx is not None and floatx not in ("float16", "bfloat16", "float32", "float64"):
        raise unknown("floatx", floatx, ("float16", "bfloat16", "float32", "float64"))
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


def resolve_backends(backend: str | Sequence[str] | None) -> list[str | None]:
    """``None`` (in-process), one name, ``"all"`` (every installed backend) or a list."""
    if backend is None:
        return [None]
    if backend == "all":
        from dtype_explorer import pool

        return list(pool.installed_backends())
    names = [backend] if isinstance(backend, str) else list(backend)
    for name in names:
        if name not in BACKENDS:
            raise unknown("backend", name, (*BACKENDS, "all"))
    return names


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
