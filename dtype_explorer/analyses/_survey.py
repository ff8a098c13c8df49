"""The survey: every target x input dtype x policy x backend, probed through the worker pool
and its cache, in parallel across backends. The answers and their classification are a
:class:`~dtype_explorer.records.Survey`.

>>> import dtype_explorer as dx
>>> s = dx.survey(["Dense", "Flatten"], ["uint8", "float64"], ["float32"])    # doctest: +SKIP
>>> s.to_frame()                                                              # doctest: +SKIP
>>> s.save("survey.html")                                                     # doctest: +SKIP
"""

from __future__ import annotations

import datetime
import fnmatch
import functools
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.analyses._cluster import check_client, run_on_cluster
from dtype_explorer.analyses._run import progress_bar, run_specs
from dtype_explorer.errors import InvalidSpecError, listed, received, unknown
from dtype_explorer.keras_run import catalog, get_policy, make_spec, modes_for, validate_policy
from dtype_explorer.records import (
    MODES,
    TF_KERAS_BACKEND,
    ProbeResult,
    ProbeSpec,
    Survey,
    axis_policy,
    check_engine_backend,
    op_dtypes,
    op_policy,
)
from dtype_explorer.runtime import engines, pool

DEFAULT_POLICIES: tuple[str, ...] = ("float32", "mixed_float16", "mixed_bfloat16", "float64")


def survey(
    targets: Sequence[str] | None = None,
    input_dtypes: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    backends: Sequence[str] | str | None = None,
    *,
    floatx: str | None = None,
    modes: Sequence[str] | None = None,
    engine: str | None = None,
    quantize: Sequence[str | None] | None = None,
    timeout: float | None = None,
    use_cache: bool = True,
    progress: bool = True,
    cluster: Any = None,
    sink: Callable[[ProbeResult], None] | None = None,
) -> Survey:
    """Probe every target on every input dtype under every policy on every backend.

    Backends run in parallel, each on ``pool.workers_per_backend()`` workers; every probe
    goes through the cache, so a repeated survey is fast.

    Args:
        targets: catalog names, groups or glob patterns (``"ops"``: every op,
            ``"ops.nn.*"``, ``"ops.linalg"``, ``"Conv*D"``; default: every catalog layer).
        input_dtypes: dtype names (default: every Keras dtype, plus the weak Python scalars when
            an op is among the targets). A layer takes arrays only: where layers and ops are
            surveyed together, the weak scalars (``python_int``, ``python_float``,
            ``python_bool``) are probed on the ops only, whether asked explicitly or by default
            (``Survey.op_dtypes``; a layer's cell there is refused with what is valid). A
            survey of layers alone probes every dtype asked (a layer on ``python_int``
            answers the probe's refusal, classed ``raises``).
        policies: policy names (default: ``float32``, ``mixed_float16``, ``mixed_bfloat16``,
            ``float64``; only ``float32`` when every target is an op: ops take no policy).
            Where layers and ops are surveyed together, each op is probed under the first
            policy only (``float32`` by default; where ``float32`` is not asked, the first one
            given: ``Survey.op_policy``): nothing in Keras's ops reads the dtype policy, so
            its answer is the same under every one. A survey of ops alone probes every
            policy it is asked.
        backends: backend names or ``"all"`` (default: every installed one).
        floatx: ``keras.config.floatx()`` during each probe (one survey per floatx: compare
            two with ``.diff``).
        modes: how each target runs (``dx.probe``'s ``mode``; default ``["call"]``). Each
            target runs in the modes that apply to it (an op only in ``"call"``); with several
            modes a cell's results are keyed ``"<backend>/<mode>"`` and a cell whose answer
            depends on the mode is classed ``diverges``.
        engine: which Keras answers (``dx.probe``'s ``engine``): ``None`` (the installed
            Keras), ``"keras==3.X.Y"`` or ``"tf_keras"`` (Keras 2; the backends default to
            tensorflow, the only one it runs on). Created first when missing. Compare two
            surveys with ``.diff``.
        quantize: quantization modes (``dx.probe``'s ``quantize``; ``None`` in the list: the
            float layer), e.g. ``[None, "int8"]``. Each layer is built, then quantized as
            ``Model.quantize`` does; its cells sit on the policy axis as
            ``"<policy>+quantize=<mode>"`` (``records.axis_policy``: quantize() turns a
            policy into ``<mode>_from_<policy>``, so a quantized cell is a policy column of
            its own in every view), each cached on its own. A layer Keras cannot quantize
            answers Keras's refusal (an error at ``"quantize"``); ops have no weights and are
            surveyed unquantized only.
        timeout: seconds a worker may take per probe (default: the pool's).
        use_cache: answer from, and store into, the result cache.
        progress: show a progress bar.
        cluster: a ``distributed.Client``: the cells are partitioned across its workers,
            each machine answering with its own pool and cache; answers stream back and
            merge into one ``Survey`` (a lost worker's partitions run elsewhere). Needs
            ``pip install 'dtype-explorer[cluster]'``.
        sink: called with each answer as it arrives, which is then let go: the survey
            returned has no results, only its axes (``build_atlas`` streams into an
            ``AtlasCollector`` this way, so the whole survey is never held).

    Returns:
        A ``Survey``: ``.to_frame()``, ``.figure()``, ``.counts()``, ``.diff(other)``,
        ``.save("survey.html")``.

    >>> import dtype_explorer as dx
    >>> s = dx.survey(["Dense", "Flatten"], ["uint8"], ["float32"], backends="numpy",
    ...               progress=False)                                    # doctest: +SKIP
    >>> s.cell("Flatten", "uint8").classification                        # doctest: +SKIP
    'keeps-input'
    """
    # 1. Validate: the time limit, the cluster, the axes, the engine's backends, the modes.
    timeout = pool.time_limit(timeout)
    client = None if cluster is None else check_client(cluster)
    names, dtype_names, policy_names = resolve(targets, input_dtypes, policies)
    engine = engines.pin(engine)  # "nightly": the exact build, named in every answer
    if engine is not None and engine.startswith("tf_keras") and backends is None:
        backends = (TF_KERAS_BACKEND,)
    chosen = installed(backends)
    for b in chosen:
        check_engine_backend(engine, b)
    mode_names = _modes(modes)
    modes_asked = quantize_axis(quantize)
    # 2. Plan: one spec per cell and mode that applies to its target on its backend (in a
    #    survey of layers and ops, an op under one policy only: it reads none; a layer on
    #    arrays only: the weak Python scalars are an op's).
    ops_under = op_policy(names, policy_names)
    ops_only = op_dtypes(names, dtype_names)
    specs = [
        make_spec(t, d, p, b, floatx=floatx, mode=m, engine=engine, quantize=q)
        for t in names
        for d in dtype_names
        for p in policy_names
        for q in modes_asked
        for b in chosen
        for m in mode_names
        if m == "call" or m in modes_for(t, backend=b)
        if q is None or not t.startswith("ops.")
        if ops_under is None or p == ops_under or not t.startswith("ops.")
        if d not in ops_only or t.startswith("ops.")
    ]
    axis = axis_policies(policy_names, modes_asked)
    # 3. Run: through this machine's pool, or partitioned over the cluster's workers.
    engines.ensure(engine, progress=progress)  # created on first use
    started = time.perf_counter()
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results = _answers(
        specs, client, timeout=timeout, use_cache=use_cache, progress=progress, sink=sink
    )
    # 4. Collect: the answers and the axes they cover.
    return Survey(
        targets=names,
        input_dtypes=dtype_names,
        policies=tuple(axis),
        backends=chosen,
        modes=mode_names,
        compute_dtypes=axis,
        floatx=floatx,
        created=created,
        elapsed_s=round(time.perf_counter() - started, 3),
        results=tuple(results),
        engine=engine,
        quantize=modes_asked,
        op_policy=ops_under,
        op_dtypes=ops_only,
    )


def quantize_axis(quantize: Sequence[str | None] | None) -> tuple[str | None, ...]:
    """The quantization modes a survey asks (default ``(None,)``: the float layers only),
    each once; a mode's name is checked by each probe against its release's modes.

    >>> quantize_axis([None, "int8", "int8"])
    (None, 'int8')
    """
    if quantize is None:
        return (None,)
    if isinstance(quantize, str):
        quantize = [quantize]
    for q in quantize:
        if q is not None and (not isinstance(q, str) or not q.strip()):
            raise InvalidSpecError(
                "quantize: a list of mode names (None for the float layer), e.g. "
                f"[None, 'int8', 'int4/32']. Received: {received(q)}"
            )
    return tuple(dict.fromkeys(quantize))


def axis_policies(policy_names: Sequence[str], quantize: Sequence[str | None]) -> dict[str, str]:
    """The policy axis's entries (``records.axis_policy``) in order, each with its compute
    dtype: a quantized layer keeps its policy's (``int8_from_mixed_bfloat16`` computes in
    bfloat16)."""
    return {axis_policy(p, q): compute_dtype(p) for p in policy_names for q in quantize}


def _modes(modes: Sequence[str] | None) -> tuple[str, ...]:
    """The modes a survey runs (default ``("call",)``), each once and checked."""
    names = tuple(dict.fromkeys(_listed(modes, ("call",), "modes")))
    for m in names:
        if m not in MODES:
            raise unknown("mode", m, MODES)
    return names


def _answers(
    specs: list[ProbeSpec],
    client: Any,
    *,
    timeout: float | None,
    use_cache: bool,
    progress: bool,
    sink: Callable[[ProbeResult], None] | None,
) -> list[ProbeResult]:
    """Every spec answered, in order: by this machine's pool, or by ``client``'s workers
    (with ``sink``: each handed to it, none returned)."""
    if client is None:
        return run_specs(specs, timeout=timeout, use_cache=use_cache, progress=progress, sink=sink)
    with progress_bar(total=len(specs), desc="survey", enabled=progress) as bar:
        return run_on_cluster(
            client, specs, timeout=timeout, use_cache=use_cache, update=bar.update, sink=sink
        )


def resolve(
    targets: Sequence[str] | None,
    input_dtypes: Sequence[str] | None,
    policies: Sequence[str] | None,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The targets, input dtypes and policies a survey of these arguments covers (patterns
    expanded, defaults filled in for the whole list of targets, every name checked)."""
    names = _targets(targets)
    dtype_names = _input_dtypes(input_dtypes, names)
    only_ops = all(t.startswith("ops.") for t in names)
    default_policies = ("float32",) if only_ops else DEFAULT_POLICIES  # an op has no policy
    policy_names = tuple(
        dict.fromkeys(validate_policy(p) for p in _listed(policies, default_policies, "policies"))
    )
    return names, dtype_names, policy_names


def installed(backends: Sequence[str] | str | None) -> tuple[str, ...]:
    """``backends`` (``None`` or ``"all"``: every installed one), each checked to be installed
    and allowed, so that a survey fails before it starts rather than half-way."""
    return tuple(pool.usable(backends))


@functools.cache
def compute_dtype(policy: str) -> str:
    """The compute dtype of ``policy``, as Keras's ``DTypePolicy`` says: the kernel's Keras
    when it is imported already, else a worker's (numpy's, the lightest), so that a survey's
    front never imports Keras for it (with TensorFlow, its default backend, ~700 MB: the
    front's whole peak in ``benchmarks/atlas_store.py``)."""
    if "keras" in sys.modules:
        return policy_compute_dtype(policy)
    backends = pool.installed_backends() or ["numpy"]
    backend = "numpy" if "numpy" in backends else backends[0]
    return str(pool.call(backend, policy_compute_dtype, policy).result())


@pool.trusted_entry  # pool.call runs it in a cache-keeping worker
def policy_compute_dtype(policy: str) -> str:
    """``keras.dtype_policies.get(policy).compute_dtype`` in this process (a worker's, from
    :func:`compute_dtype`)."""
    return str(get_policy(policy).compute_dtype)


def _targets(targets: Sequence[str] | None) -> tuple[str, ...]:
    if targets is None:
        return tuple(e.name for e in catalog.layers())
    return tuple(
        dict.fromkeys(n for t in _listed(targets, (), "targets") for n in expand_targets(t))
    )


def expand_targets(pattern: str) -> tuple[str, ...]:
    """The catalog names a target or a pattern stands for, each once (aliases resolved).

    ``"ops"``: every op; ``"layers"``: every layer; a group (``"ops.nn"``, ``"convolution"``);
    a glob over every catalog name and alias (``"ops.nn.*"``, ``"Conv*D"``, ``"ops.*log*"``); else
    one target name. Entries that cannot be probed standalone are left out of the wide forms.

    >>> expand_targets("ops.nn.*")[:3]
    ('ops.adaptive_average_pool', 'ops.adaptive_max_pool', 'ops.average_pool')
    >>> "ops.silu" in expand_targets("ops.nn.sw*")
    True
    """
    if not isinstance(pattern, str):
        raise InvalidSpecError(
            f"targets: unknown target {received(pattern)}: a target is a name or a pattern such "
            f"as 'Dense' or 'ops.nn.*', not a {type(pattern).__name__}"
        )
    if pattern == "ops":
        return tuple(e.name for e in catalog.ops())
    if pattern == "layers":
        return tuple(e.name for e in catalog.layers())
    groups = catalog.groups()
    if pattern in groups:
        return tuple(groups[pattern])
    if not any(ch in pattern for ch in "*?["):
        return (catalog.entry(pattern).name,)
    probeable = {e.name for e in [*catalog.layers(), *catalog.ops()]}
    found = tuple(
        dict.fromkeys(
            catalog.entry(name).name
            for name in fnmatch.filter(catalog.names(), pattern)
            if catalog.entry(name).name in probeable
        )
    )
    if not found:
        raise InvalidSpecError(
            f"the pattern {pattern!r} matches no target; patterns are globs over catalog names "
            "such as 'ops.nn.*', 'ops.*log*', 'Conv*D', or 'ops' and 'layers' for all"
        )
    return tuple(sorted(found))


def _input_dtypes(names: Sequence[str] | None, targets: tuple[str, ...]) -> tuple[str, ...]:
    if names is None:
        with_ops = any(t.startswith("ops.") for t in targets)
        return dtypes.all_input_dtypes() if with_ops else dtypes.keras_dtypes()
    return tuple(
        dict.fromkeys(
            dtypes.standardize(n, "input_dtypes") for n in _listed(names, (), "input_dtypes")
        )
    )


def _listed(
    values: Sequence[str] | str | None, default: tuple[str, ...], parameter: str
) -> tuple[Any, ...]:
    return default if values is None else listed(values, parameter)
