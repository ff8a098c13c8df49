"""The audit's re-probes: each layer call that took integer, bool or 64-bit input (or raised)
re-created as a probe and run on other backends through the worker pool, so that
:func:`~dtype_explorer.analyses.audit._rules_across.backend_divergence` can compare them.
Where they part, the fix is run the same way: the layer re-probed on every one of those
backends with its inputs cast to its compute dtype (``x = keras.ops.cast(x, dtype)`` before
it); that cast is the finding's fix only where every backend then returns the same dtype
and the same numbers (its ``FixProof`` says what each answered, either way).

>>> findings = divergences(report_calls, layers, ["jax", "torch"])  # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import Any

from dtype_explorer.analyses.audit import _rules as _audit_rules
from dtype_explorer.analyses.audit import _rules_across as _audit_rules_across
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import make_spec
from dtype_explorer.records import (
    Finding,
    FixMeasure,
    FixProof,
    LayerCall,
    ProbeResult,
    ProbeSet,
    ProbeSpec,
)
from dtype_explorer.runtime import pool


def divergences(
    calls: list[LayerCall],
    layers: dict[str, Any],
    backends: list[str],
    *,
    here: str,
    timeout: float | None = None,
) -> list[Finding]:
    """Re-run each catalogued layer that took integer, bool or 64-bit input (or raised) on
    ``backends`` and on this one (``here``), through the worker pool; report those whose
    results differ. ``layers``: the layer objects by path."""
    names = list(dict.fromkeys([here, *backends]))
    groups: dict[str, tuple[LayerCall, list[ProbeSpec]]] = {}
    for call in calls:
        specs = _probe_specs(call, layers.get(call.path), names)
        if specs:
            groups.setdefault(specs[0].cache_key(), (call, specs))
    wanted = [spec for _, specs in groups.values() for spec in specs]
    results = {r.spec.cache_key(): r for r in pool.run_many(wanted, timeout=timeout)}
    parted = []
    for call, specs in groups.values():
        outcomes = {spec.backend: results[spec.cache_key()] for spec in specs}
        parted += [
            (f, call, outcomes) for f in _audit_rules_across.backend_divergence(call, outcomes)
        ]
    # the fix: each layer that parted re-probed with its inputs in its compute dtype
    casts = {
        id(f): _probe_specs(call, layers.get(call.path), names, cast=call.compute_dtype)
        for f, call, _ in parted
    }
    wanted = [spec for specs in casts.values() for spec in specs]
    done = {r.spec.cache_key(): r for r in pool.run_many(wanted, timeout=timeout)} if wanted else {}
    return [
        _with(f, _cast_proof(call, before, [done[s.cache_key()] for s in casts[id(f)]]))
        for f, call, before in parted
    ]


def _probe_specs(
    call: LayerCall, layer: Any, backends: list[str], cast: str | None = None
) -> list[ProbeSpec]:
    """One probe spec per backend re-creating ``call``, or none if it is not worth probing;
    ``cast``: every input in that dtype instead (none where they are in it already)."""
    target = _audit_rules.reprobe_target(call)
    if layer is None or target is None:
        return []
    given = call.given if call.given is not None else call.received
    dtypes = tuple(t.dtype for t in given)
    if cast is not None:
        if all(d == cast for d in dtypes):
            return []
        dtypes = tuple(cast for _ in dtypes)
    try:
        return [
            make_spec(
                target,
                input_dtype=dtypes,
                policy=call.policy,
                backend=backend,
                kwargs=_kwargs(layer),
                shape=[tuple(d or 1 for d in t.shape) for t in given],
            )
            for backend in backends
        ]
    except InvalidSpecError:
        return []


def _cast_proof(
    call: LayerCall, before: dict[str, ProbeResult], results: list[ProbeResult]
) -> FixProof:
    """The re-probes with the inputs cast (``results``; ``before``: as given, by backend), as
    the finding's proof: proven where every backend returned the same dtype and no two parted
    on the numbers."""
    if not results:
        return FixProof(
            not_tried=(
                f"{call.layer_class}'s inputs are in its compute dtype {call.compute_dtype} "
                "already, or it cannot be probed with them cast"
            )
        )
    outcomes = {r.spec.backend: _outcome(r) for r in results}
    ok = all(r.ok for r in results) and len({r.output_dtype for r in results}) == 1
    parted = None if not ok else ProbeSet(results=tuple(results)).value_divergence()
    proven = ok and parted is None
    dtype = call.compute_dtype
    said = ", ".join(outcomes)
    after = FixMeasure(
        finding=not proven,
        at=call.path,
        received=dtype,
        outcomes=outcomes,
        wrong="" if parted is None else parted.message,
    )
    change = (
        f'x = keras.ops.cast(x, "{dtype}")   # before {call.layer_class}: proven by re-probing '
        f"it so on {said}, every one returns {results[0].output_dtype}"
    )
    return FixProof(
        how="backend-cast",
        change=change if proven else "",
        layers=(call.path,),
        input_dtype=dtype,
        proven=proven,
        before=FixMeasure(
            finding=True,
            at=call.path,
            received=", ".join(_given(call)),
            outcomes={b: _outcome(r) for b, r in before.items()},
        ),
        after=after,
        tried=(f"inputs cast to {dtype} on {said}: " + ("they agree" if proven else "they part"),),
    )


def _given(call: LayerCall) -> tuple[str, ...]:
    given = call.given if call.given is not None else call.received
    return tuple(t.dtype for t in given)


def _outcome(result: ProbeResult) -> str:
    return f"returns {result.outcome}" if result.ok else result.outcome


def _with(finding: Finding, proof: FixProof) -> Finding:
    return finding.model_copy(update={"fix": proof.change if proof.proven else "", "proof": proof})


def _kwargs(layer: Any) -> dict[str, Any]:
    """The layer's config as plain JSON kwargs for a probe; serialized Keras objects
    (initializers, regularizers, constraints) are left at their defaults."""
    config = json.loads(json.dumps(layer.get_config(), default=str))
    return {
        key: value
        for key, value in config.items()
        if key not in ("name", "dtype", "trainable")
        and not (isinstance(value, dict) and "class_name" in value)
    }
