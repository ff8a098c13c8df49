"""The audit's re-probes: each layer call that took integer, bool or 64-bit input (or raised)
re-created as a probe and run on other backends through the worker pool, so that
:func:`~dtype_explorer.analyses.audit._rules_across.backend_divergence` can compare them.

>>> findings = divergences(report_calls, layers, ["jax", "torch"])  # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import Any

from dtype_explorer.analyses.audit import _rules as _audit_rules
from dtype_explorer.analyses.audit import _rules_across as _audit_rules_across
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import make_spec
from dtype_explorer.records import Finding, LayerCall, ProbeSpec
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
    findings = []
    for call, specs in groups.values():
        outcomes = {spec.backend: results[spec.cache_key()] for spec in specs}
        findings += _audit_rules_across.backend_divergence(call, outcomes)
    return findings


def _probe_specs(call: LayerCall, layer: Any, backends: list[str]) -> list[ProbeSpec]:
    """One probe spec per backend re-creating ``call``, or none if it is not worth probing."""
    target = _audit_rules.reprobe_target(call)
    if layer is None or target is None:
        return []
    given = call.given if call.given is not None else call.received
    try:
        return [
            make_spec(
                target,
                input_dtype=tuple(t.dtype for t in given),
                policy=call.policy,
                backend=backend,
                kwargs=_kwargs(layer),
                shape=[tuple(d or 1 for d in t.shape) for t in given],
            )
            for backend in backends
        ]
    except InvalidSpecError:
        return []


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
