"""How to build and call every public ``keras.layers`` class and the ``keras.ops`` we probe.

An entry (``_entries``) holds the constructor kwargs and input shapes of a minimal valid call,
the role of each input, and the target's *dtype contract* (what Keras documents about its
output dtype). The tables themselves live in ``_layers`` and ``_ops``.

>>> entry("Conv1D").contract
'compute'
>>> entry("ops.add").arity
2
>>> entry("ops.swish") is entry("ops.nn.silu")
True
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from dtype_explorer.errors import unknown
from dtype_explorer.keras_run.catalog import _objectives as objective_calls
from dtype_explorer.keras_run.catalog import _op_calls as op_calls
from dtype_explorer.keras_run.catalog._entries import (
    Contract,
    Entry,
    InputStyle,
    LayerEntry,
    ObjectiveEntry,
    OpEntry,
    OpRule,
    Role,
)
from dtype_explorer.keras_run.catalog._layers import (
    INDEX_HIGH,
    LAYERS,
    build_kwargs,
    safe_deserialization,
    sublayer,
)
from dtype_explorer.keras_run.catalog._ops import load as _load_ops


@functools.cache
def _index() -> dict[str, Entry]:
    table: dict[str, Entry] = {}
    for layer in LAYERS:
        for name in (layer.name, *layer.aliases):
            table[name] = layer
    for op in [*_load_ops(), *objective_calls.load()]:
        for name in (op.name, *op.aliases):
            table[name] = op
    return table


def entry(name: str) -> Entry:
    """The catalog entry for a layer class name, alias, or ``"ops.<name>"``.

    Raises ``InvalidSpecError`` naming the closest valid target.
    """
    found = find(name)
    if found is None:
        raise unknown("target", name, _index())
    return found


def find(name: str) -> Entry | None:
    """The catalog entry :func:`entry` gives for ``name``, or ``None``: no error is made and no
    close match looked for, for a caller that asks of many names, most of them no target (the
    op trace, of every function it wraps).

    >>> find("Dense").name, find("ops.arange").probe, find("Layer.__call__")
    ('Dense', 'dtype_kwarg', None)
    """
    return _index().get(name) if isinstance(name, str) else None


def custom_entry(target_name: str, call: Any = None, inputs: int = 1) -> LayerEntry:
    """The entry a user layer (``"custom:<Name>"``) is probed with: float inputs passed
    positionally (one by default; ``call(self, x, y)`` takes two), the compute contract, the
    default shape. Several inputs to a ``call`` that takes one (``call(self, inputs)``) go as
    one list, Keras's own convention (``layer([a, b])``).

    >>> def call(self, inputs, training=None): ...
    >>> custom_entry("custom:Pair", call, inputs=2).input_style
    'list'
    """
    name = target_name.removeprefix("custom:")
    style: InputStyle = "list" if inputs > 1 and _takes_one_input(call) else "positional"
    return LayerEntry(name=name, group="custom", contract="compute", input_style=style)


def _takes_one_input(call: Any) -> bool:
    """Whether ``call`` takes one positional input besides ``self`` (and no ``*args``); the
    arguments Keras passes by name (``training``, ``mask``) are not inputs."""
    try:
        params = list(inspect.signature(call).parameters.values())
    except (TypeError, ValueError):
        return False
    if params and params[0].name == "self":
        params = params[1:]
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return False
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        and p.name not in ("training", "mask")
        and p.default is inspect.Parameter.empty
    ]
    return len(positional) == 1


def layers(*, include_skipped: bool = False) -> list[LayerEntry]:
    """Every layer entry, once each (aliases not repeated)."""
    return [e for e in LAYERS if include_skipped or e.skip is None]


def ops(*, include_skipped: bool = False) -> list[OpEntry]:
    """Every op entry, once each (aliases not repeated), by name."""
    return [e for e in _load_ops() if include_skipped or e.skip is None]


def objectives(*, include_skipped: bool = False) -> list[ObjectiveEntry]:
    """Every loss and metric entry (``losses.*``, ``metrics.*``), once each."""
    return [e for e in objective_calls.load() if include_skipped or e.skip is None]


def names() -> list[str]:
    """Every target name, aliases included (what a target pattern is matched against)."""
    return list(_index())


def groups() -> dict[str, list[str]]:
    """Target names by group, for pickers: ``{"core": ["Dense", ...], ..., "ops": [...],
    "ops.nn": [...], "ops.numpy": [...], "ops.linalg": [...], "ops.image": [...]}``."""
    grouped: dict[str, list[str]] = {}
    for item in [*layers(), *ops(), *objectives()]:
        grouped.setdefault(item.group, []).append(item.name)
    return grouped


__all__ = [
    "INDEX_HIGH",
    "Contract",
    "Entry",
    "InputStyle",
    "LayerEntry",
    "ObjectiveEntry",
    "OpEntry",
    "OpRule",
    "Role",
    "build_kwargs",
    "custom_entry",
    "entry",
    "find",
    "groups",
    "layers",
    "names",
    "objective_calls",
    "objectives",
    "op_calls",
    "ops",
    "safe_deserialization",
    "sublayer",
]
