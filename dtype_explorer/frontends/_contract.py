"""The widget's contract (``widget_contract.json``) as traitlets: one synced trait per entry,
declared by name on :class:`ContractTraits` (so IDEs see them) and tagged from the contract.

>>> sorted(TRAITS)[:3]
['available_backends', 'catalog', 'code']
>>> KERNEL_WRITES >= {"results", "request_id"} and "request" not in KERNEL_WRITES
True
>>> REQUEST_KEYS[:3], REQUEST_KEYS[-1]
(('target', 'kwargs', 'input_dtypes'), 'nonce')
>>> ContractTraits.class_traits()["verdict"].metadata["writer"]
'kernel'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import traitlets

CONTRACT: dict[str, Any] = json.loads(
    Path(__file__).with_name("widget_contract.json").read_text(encoding="utf-8")
)
TRAITS: dict[str, dict[str, Any]] = CONTRACT["traits"]
#: Traits only the kernel may set: what the page writes to them is undone.
KERNEL_WRITES = frozenset(name for name, t in TRAITS.items() if t["writer"] == "kernel")
#: The keys of a request from the page (the ``request`` trait); the kernel refuses any other.
REQUEST_KEYS: tuple[str, ...] = tuple(CONTRACT["request"])
#: The traitlet each contract type is synced as.
TRAIT_TYPES: dict[str, type[traitlets.TraitType]] = {
    "object": traitlets.Dict,
    "array": traitlets.List,
    "string": traitlets.Unicode,
    "integer": traitlets.Int,
}


def _synced(name: str, trait: traitlets.TraitType) -> Any:
    """``trait``, synced and tagged with the contract's ``writer`` and ``doc`` for ``name``.

    Raises ``KeyError`` for a name the contract lacks, ``TypeError`` for another type than the
    contract's (the class below is checked against the contract as it is defined).
    """
    spec = TRAITS[name]
    if type(trait) is not TRAIT_TYPES[spec["type"]]:
        raise TypeError(f"trait {name!r} is {spec['type']} in the contract; received: {trait!r}")
    return trait.tag(sync=True, writer=spec["writer"], doc=spec["doc"])


class ContractTraits(traitlets.HasTraits):
    """Every synced trait of the widget, as the contract names and types them (a mixin of
    ``DtypeExplorer``); ``tests/frontends/test_contract.py`` checks it against the contract."""

    catalog = _synced("catalog", traitlets.Dict())
    defaults = _synced("defaults", traitlets.Dict())
    dtypes = _synced("dtypes", traitlets.List())
    dtype_families = _synced("dtype_families", traitlets.Dict())
    policies = _synced("policies", traitlets.List())
    presets = _synced("presets", traitlets.Dict())
    modes = _synced("modes", traitlets.List())
    precisions = _synced("precisions", traitlets.List())
    quantize_modes = _synced("quantize_modes", traitlets.List())
    available_backends = _synced("available_backends", traitlets.List())
    engines = _synced("engines", traitlets.List())
    request = _synced("request", traitlets.Dict())
    request_id = _synced("request_id", traitlets.Int(0))
    results = _synced("results", traitlets.Dict())
    timings = _synced("timings", traitlets.Dict())
    verdict = _synced("verdict", traitlets.Unicode(""))
    trace_divergence = _synced("trace_divergence", traitlets.Dict())
    comparison = _synced("comparison", traitlets.Dict())
    promotion = _synced("promotion", traitlets.Dict())
    code = _synced("code", traitlets.Dict())
    error = _synced("error", traitlets.Unicode(""))
