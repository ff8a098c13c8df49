"""The front door: ``probe`` validates a question, then answers it in this process or in the
backends' worker processes.

>>> import dtype_explorer as dx
>>> dx.probe("Conv1D", input_dtype="uint8", backend="all").verdict   # doctest: +SKIP
'diverges'
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dtype_explorer import backends as backend_names
from dtype_explorer import keras_facts, keras_run
from dtype_explorer.errors import InvalidSpecError, received
from dtype_explorer.keras_run import ShapeArg, make_spec
from dtype_explorer.records import (
    TF_KERAS_BACKEND,
    ProbeResult,
    ProbeSet,
    ProbeSpec,
    check_engine_backend,
)
from dtype_explorer.runtime import engines, pool
from dtype_explorer.versions import keras_config_path

DtypeArg = str | Sequence[str]


def probe(
    target: Any,
    input_dtype: DtypeArg | None = None,
    policy: Any = None,
    backend: str | Sequence[str] | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    shape: ShapeArg = None,
    values: Any = "default",
    floatx: str | None = None,
    seed: int = 0,
    mode: str | Sequence[str] = "call",
    engine: str | Sequence[str | None] | None = None,
    call_kwargs: dict[str, Any] | None = None,
    precision: str | None = None,
    quantize: str | None = None,
    timeout: float | None = None,
    use_cache: bool = True,
) -> ProbeResult | ProbeSet:
    """Run ``target`` on a sample of ``input_dtype`` under ``policy`` and report every dtype.

    Args:
        target: a ``keras.layers`` class name (``"Dense"``), ``"ops.<name>"``, or a user
            ``Layer`` subclass or instance.
        input_dtype: the input's dtype, or one per input (``("int8", "float16")``); with
            your own ``values``, one per value (leaf), and left out (``None``) each value
            keeps its own dtype. ``None`` without values: ``"float32"``.
        policy: a dtype policy name or ``keras.DTypePolicy``. ``None`` is the policy Keras
            makes from ``floatx`` (``"float32"`` unless ``floatx`` is given), whatever this
            session's global policy is, so answers are the same in every process.
        backend: ``None`` runs in this process on the backend Keras imported; a backend name
            runs in that backend's worker process; ``"all"`` or a list of names runs on each.
        kwargs: the constructor's (a layer) or the call's (an op) keyword arguments, as JSON
            values; they replace the catalog's defaults.
        shape: the input shape (batch first), or one per input: ints, or text such as
            ``"2x8x3"``, ``"(2, 8, 3)"`` or ``"[[2, 4], [2, 4]]"``.
        values: the sample's value preset (``default``, ``image``, ``large``, ``tiny``,
            ``edge``), or your own values, one per input: NumPy arrays (or anything
            ``np.asarray`` takes), nested lists, Python numbers (passed to Keras as the
            Python numbers they are, like ``ops.add(x, 2)``), or dicts and tuples of them for
            a layer that takes a structure (``[{"images": x, "segmentation_masks": m}]``),
            passed exactly as given. An op takes its probed inputs, or every array of its call
            in call order, its fixed ones too (``ops.take``: ``[table, indices]``; otherwise
            the catalog's indices, listed in ``supplied``). They travel to workers as data and
            key the cache by a hash; a value ``input_dtype`` cannot hold exactly (``-1`` as
            ``uint8``) is refused.
        floatx: ``keras.config.floatx()`` during the probe.
        seed: the seed of the sample's values (and, under ``"training"`` and ``"fit"``, of
            dropout and noise layers).
        mode: how the target runs: ``"call"`` (the eager call), ``"training"`` (the eager
            call with ``training=True``), ``"model"`` (inside a functional ``keras.Model``
            whose ``keras.Input`` has the input dtype), ``"predict"`` (``model.predict``,
            compiled on jax and tensorflow), ``"fit"`` (one training step: gradients, loss
            scaling; for an op, the gradient of its output w.r.t. its float inputs, not on
            numpy) or ``"dataset"`` (inside ``tf.data.Dataset.map``; needs tensorflow); a
            list of modes answers in each.
        engine: which Keras answers: ``None`` (the installed Keras), ``"keras==3.X.Y"`` (a
            Keras 3 release, layered over the installed backends), ``"nightly"`` (Keras's
            main: the newest ``keras-nightly`` build, pinned to its exact version, which
            every answer names with its date), ``"keras-nightly==3.X.Y.devYYYYMMDDHH"`` (one
            build) or ``"tf_keras"`` (Keras 2, tensorflow only). A list asks each of them the
            same question, side by side in a ``ProbeSet`` (``engine=["3.15.1", "nightly"]``:
            "is it fixed on main?"; ``None`` in it is the installed Keras, in a worker). An
            engine runs in its own workers; one not created yet is created first
            (``dx.engines.create``: it needs the package index once, with progress). With
            ``backend=None`` it runs on tensorflow for Keras 2, else on the backend this
            process's Keras uses (``$KERAS_BACKEND``, keras.json), never in this process. In
            the Keras 2 kernel (``dx.engines.kernel``) ``None`` is that kernel's engine.
        call_kwargs: keyword arguments of a layer's call, as JSON values
            (``{"training": True}``; a list becomes a NumPy array, ``{"mask": [[1, 0]]}``).
        precision: the float32 matmul precision during the probe, put back afterwards:
            ``"highest"`` (TF32 off: "with TF32 off"), ``"tf32"`` or ``"default"`` (each
            backend's own); ``None`` leaves the settings as they are. The settings in effect
            are in every answer's ``environment``.
        quantize: the layer quantized before the call, as ``Model.quantize`` does it
            (``layer.quantize(mode)`` once built): ``"int8"``, ``"int4"``, ``"int4/<block
            size>"``, ``"float8"`` (the answering release's modes). The answer's
            ``quantization`` lists the stored variables and the compute path read from the
            trace; Keras's refusal (no ``quantize`` method, int8 under float16, a mode the
            release lacks) is the answer, an error at ``"quantize"``. A quantized policy
            (``policy="int8_from_float32"``) builds the layer quantized instead.
        timeout: seconds a worker may take (default: the pool's, 60); a probe in this
            process (``backend=None``) cannot be timed out, and refuses one.
        use_cache: answer from, and store into, the result cache.

    Returns:
        A ``ProbeResult`` for one backend (``backend=None`` or a name), one mode and one
        engine; a ``ProbeSet`` with one result per engine, backend and mode for ``"all"``, a
        list of backends, a list of modes or a list of engines.

    Raises:
        InvalidSpecError: a part of the question does not exist (with the closest match), or
            ``timeout`` is not a positive number of seconds, or is given with
            ``backend=None``.

    >>> import dtype_explorer as dx
    >>> r = dx.probe("Dense", input_dtype="float64", kwargs={"units": 2})
    >>> r.output_dtype, r.verdict
    ('float32', 'as-documented')
    >>> [step.dtype for step in r.notable_steps()]
    ['float64', 'float32', 'float32']
    >>> modes = dx.probe("Dense", input_dtype="float64", kwargs={"units": 2},
    ...                  mode=["call", "model"])
    >>> [(m.spec.mode, m.output_dtype) for m in modes], modes.verdict
    ([('call', 'float32'), ('model', 'float32')], 'as-documented')
    >>> r = dx.probe("ops.power", ["int32", "int32"], values=[[2, 3], [-1, -2]])
    >>> r.spec.input_dtypes, [step.note for step in r.steps("input")]
    (('int32', 'int32'), ['your value', 'your value'])
    >>> r.outcome in ("int32", "raises InvalidArgumentError")  # TensorFlow refuses 2 ** -1
    True
    >>> q = dx.probe("Dense", "float32", kwargs={"units": 4}, quantize="int8")
    >>> q.output_dtype, [v.dtype for v in q.quantization.variables]
    ('float32', ['float32', 'int8', 'float32'])
    >>> q.quantization.steps[1]
    'integer matmul: int8 x int8 → int32 (accumulated in int32)'
    >>> old = dx.probe("Discretization", kwargs={"bin_boundaries": [0.5, 1.5, 2.5]},
    ...                backend="numpy", engine="keras==3.11.3")        # doctest: +SKIP
    >>> old.output_dtype, old.versions["keras"]                        # doctest: +SKIP
    ('int64', '3.11.3')
    >>> main = dx.probe("ops.leaky_relu", "int32", backend="numpy",
    ...                 engine=["3.15.1", "nightly"])                  # doctest: +SKIP
    >>> [(main.label(r), r.outcome) for r in main], main.verdict       # doctest: +SKIP
    ([('keras 3.15.1', 'int32'),
      ('keras 3.16.0.dev2026102704 (nightly 2026-10-27 04h)', 'float32')], 'diverges')
    """
    # 1. Validate: the time limit, the engine and the backends it runs on, the modes.
    timeout = pool.time_limit(timeout)
    asked, several_engines = _engines_asked(engine)
    engine = next((e for e in asked if e is not None), None)  # the backend's default, facts
    backend = _engine_default(engine, backend)
    if several_engines and backend is None:  # side by side in workers: the default backend
        backend = keras_backend()
    if backend is None and timeout is not None:
        raise InvalidSpecError(
            "timeout: a probe in this process (backend=None) cannot be timed out (Python "
            "cannot stop a call running in this process); give a backend (backend='numpy', "
            "...) to run it in a worker that is stopped at the limit, or leave timeout out. "
            f"Received: timeout={timeout:g}"
        )
    backends = resolve_backends(backend)
    for e in asked:
        for b in backends:
            check_engine_backend(e, b)  # before anything is installed
    modes = _modes(mode)
    # 2. Plan: one spec per engine, backend and mode (each checked: a bad question fails here).
    # With no Keras snapshot yet, the workers start first and the check waits for theirs.
    with keras_facts.expecting(_workers_started(backends, None if None in asked else engine)):
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
                mode=m,
                engine=e,
                call_kwargs=call_kwargs,
                precision=precision,
                quantize=quantize,
            )
            for e in asked
            for b in backends
            for m in modes
        ]
    custom = None if isinstance(target, str) else target
    several = not isinstance(mode, str) or several_engines
    # 3. Run: in this process (backend=None), else in the backends' workers.
    if backend is None:
        if not several:
            return keras_run.run_probe(specs[0], target=custom)  # imports the probe's code
        return ProbeSet(results=tuple(keras_run.run_probe(s, target=custom) for s in specs))
    results = _in_workers(specs, custom, asked, timeout=timeout, use_cache=use_cache)
    # 4. Collect: one backend by name in one mode is a result; anything more, a ProbeSet.
    if backend_names.is_one(backend) and not several:  # "jax,numpy", "all ": a set of each
        return results[0]
    return ProbeSet(results=tuple(results))


def _workers_started(backends: list[str | None], engine: str | None) -> Callable[[], None]:
    """With no Keras snapshot yet, the backends' first workers started now (in parallel with
    the check) and what waits for their snapshot (``pool.start_for_facts``); else nothing."""
    names = [b for b in backends if b is not None]
    if engine is not None or not names or keras_facts.has_snapshot():
        return _nothing
    try:
        return pool.start_for_facts(names)
    except InvalidSpecError:  # the check, then submit, say what is wrong with the backend
        return _nothing


def _nothing() -> None:
    return None


def _engines_asked(engine: Any) -> tuple[list[str | None], bool]:
    """The engines asked, pinned (``"nightly"`` named as the build it is), and whether a list
    was given; ``None`` alone is this process's engine (``engines.current``)."""
    if engine is None:
        return [engines.current()], False
    if isinstance(engine, str):
        return [engines.pin(engine)], False
    if not _is_list(engine) or not engine:
        raise InvalidSpecError(
            "engine is None, one engine's name or a list of at most 16 of them (None in it is "
            f"the installed Keras); received: {received(engine)}"
        )
    pinned = list(dict.fromkeys(engines.pin(e) for e in engine))  # each asked once
    return pinned, True


def _engine_default(
    engine: str | None, backend: str | Sequence[str] | None
) -> str | Sequence[str] | None:
    """The backends an engine runs on: the one it defaults to (``backend=None``: an engine
    never runs in this process), and Keras 2's only one for ``"all"``."""
    if engine is not None and backend is None:
        backend = engine_backend(engine)
    if engine is not None and engine.startswith("tf_keras") and backend_names.is_all(backend):
        backend = [TF_KERAS_BACKEND]  # every backend Keras 2 runs on: a ProbeSet of one
    return backend


def _modes(mode: str | Sequence[str]) -> list[Any]:
    """``mode`` as a non-empty list (each name is checked by ``make_spec``)."""
    modes = [mode] if isinstance(mode, str) else list(mode) if _is_list(mode) else [mode]
    if not modes:
        raise InvalidSpecError("mode: give a mode name or a non-empty list of them")
    return modes


def _in_workers(
    specs: list[ProbeSpec],
    custom: Any,
    asked: list[str | None],
    *,
    timeout: float | None,
    use_cache: bool,
) -> list[ProbeResult]:
    """Every spec answered by its backend's workers, all at once (the engines created first,
    with progress; a custom layer pickled once for every backend)."""
    for engine in asked:
        engines.ensure(engine)  # created on first use, with progress
    payload = pool.target_payload(custom) if custom is not None else None
    futures = [
        pool.submit(s, target_payload=payload, timeout=timeout, use_cache=use_cache) for s in specs
    ]
    return [f.result() for f in futures]


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and len(value) <= 16


def engine_backend(engine: str) -> str:
    """The backend an engine runs on when none is given: tensorflow for Keras 2; else the one
    this process's Keras uses, read without importing it (imported Keras, ``$KERAS_BACKEND``,
    keras.json's ``backend``, else Keras's default, tensorflow)."""
    return TF_KERAS_BACKEND if engine.startswith("tf_keras") else keras_backend()


def keras_backend() -> str:
    """The backend this process's Keras uses, read without importing it."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        return keras.backend.backend()
    chosen = os.environ.get("KERAS_BACKEND") or _keras_json_backend() or "tensorflow"
    return chosen if chosen in backend_names.BACKENDS else "tensorflow"


def _keras_json_backend() -> str | None:
    try:
        config = json.loads(keras_config_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    backend = config.get("backend") if isinstance(config, dict) else None
    return backend if isinstance(backend, str) else None


def resolve_backends(backend: str | Sequence[str] | None) -> list[str | None]:
    """``None`` (in-process), one name, ``"all"`` (every installed backend) or a list."""
    if backend is None:
        return [None]
    if backend_names.is_all(backend):
        return list(pool.installed_backends())
    return list(backend_names.names(backend))
