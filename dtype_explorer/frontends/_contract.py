"""The widget's contract (``widget_contract.json``) as traitlets: one synced trait per entry.

>>> sorted(TRAITS)[:3]
['available_backends', 'catalog', 'defaults']
>>> KERNEL_WRITES >= {"results", "request_id"} and "request" not in KERNEL_WRITES
True
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

_MAKERS = {
    "object": lambda: traitlets.Dict(),
    "array": lambda: traitlets.List(),
    "string": lambda: traitlets.Unicode(""),
    "integer": lambda: traitlets.Int(0),
}


def traits() -> dict[str, traitlets.TraitType]:
    """A synced traitlet for every trait of the contract, documented by it."""
    return {
        name: _MAKERS[spec["type"]]().tag(sync=True, writer=spec["writer"], doc=spec["doc"])
        for name, spec in TRAITS.items()
    }
