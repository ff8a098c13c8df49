"""How to build and call every public ``keras.layers`` class and the ``keras.ops`` we probe.

An entry holds the constructor kwargs and input shapes of a minimal valid call, the role of
each input, and the target's *dtype contract* (what Keras documents about its output dtype).
The tables themselves live in ``catalog_layers`` and ``catalog_ops``.

>>> entry("Conv1D").contract
'compute'
>>> entry("ops.add").arity
2
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

from dtype_explorer.errors import unknown

Role = Literal["float", "index", "string", "any"]
#: ``compute``: float math in the compute dtype, result_type(input after autocast, compute dtype).
#: ``passthrough``: returns its input's dtype after autocast (reshaping, dropout, ...).
#: ``layer-dtype``: returns the layer's own compute dtype whatever the input (Embedding, Hashing).
#: ``self-managed``: casts inside ``call`` by its own rules (normalisation layers, ...), output in
#: the compute dtype.
#: ``own-output``: returns a dtype of its own choosing (indices, token ids) that no policy rule
#: decides; the declared spec is the only statement Keras makes about it.
Contract = Literal["compute", "passthrough", "layer-dtype", "self-managed", "own-output"]
#: How inputs are handed to ``__call__``: one tensor, a list of tensors, or positionally.
InputStyle = Literal["single", "list", "positional"]
#: ``promote``: result_type of the inputs; ``promote-float``: result_type(inputs, float);
#: ``bool``: a boolean result; ``index``: an int32 index; ``none``: Keras documents no rule.
OpRule = Literal["promote", "promote-float", "bool", "index", "none"]


@dataclass(frozen=True)
class LayerEntry:
    """One public ``keras.layers`` class and how to probe it."""

    name: str
    group: str
    contract: Contract
    shapes: tuple[tuple[int, ...], ...] = ((2, 4),)
    roles: tuple[Role, ...] = ("float",)
    kwargs: dict[str, Any] = field(default_factory=dict)
    input_style: InputStyle = "single"
    aliases: tuple[str, ...] = ()
    skip: str | None = None
    note: str = ""

    kind = "layer"

    @property
    def arity(self) -> int:
        return len(self.shapes)

    def input_roles(self, arity: int) -> tuple[Role, ...]:
        """The role of each of ``arity`` inputs (the last role repeats)."""
        roles = self.roles or ("float",)
        return tuple(roles[min(i, len(roles) - 1)] for i in range(arity))


@dataclass(frozen=True)
class OpEntry:
    """One ``keras.ops`` function, probed as ``"ops.<name>"``."""

    name: str
    rule: OpRule
    shapes: tuple[tuple[int, ...], ...] = ((2, 3), (2, 3))
    kwargs: dict[str, Any] = field(default_factory=dict)
    group: str = "ops"
    roles: tuple[Role, ...] = ()
    note: str = ""

    kind = "op"

    @property
    def arity(self) -> int:
        return len(self.shapes)

    @property
    def function_name(self) -> str:
        return self.name.removeprefix("ops.")


Entry = LayerEntry | OpEntry


@functools.cache
def _index() -> dict[str, Entry]:
    from dtype_explorer.catalog_layers import LAYERS
    from dtype_explorer.catalog_ops import OPS

    table: dict[str, Entry] = {}
    for layer in LAYERS:
        for name in (layer.name, *layer.aliases):
            table[name] = layer
    for op in OPS:
        table[op.name] = op
    return table


def entry(name: str) -> Entry:
    """The catalog entry for a layer class name, alias, or ``"ops.<name>"``.

    Raises ``InvalidSpecError`` naming the closest valid target.
    """
    table = _index()
    if name in table:
        return table[name]
    raise unknown("target", name, table)


def custom_entry(target_name: str) -> LayerEntry:
    """The entry a user layer (``"custom:<Name>"``) is probed with: one float input, the
    compute contract, the default shape."""
    name = target_name.removeprefix("custom:")
    return LayerEntry(name=name, group="custom", contract="compute")


def layers(*, include_skipped: bool = False) -> list[LayerEntry]:
    """Every layer entry, once each (aliases not repeated)."""
    from dtype_explorer.catalog_layers import LAYERS

    return [e for e in LAYERS if include_skipped or e.skip is None]


def ops() -> list[OpEntry]:
    from dtype_explorer.catalog_ops import OPS

    return list(OPS)


def groups() -> dict[str, list[str]]:
    """Target names by group, for pickers: ``{"core": ["Dense", ...], ..., "ops": [...]}``."""
    grouped: dict[str, list[str]] = {}
    for item in [*layers(), *ops()]:
        grouped.setdefault(item.group, []).append(item.name)
    return grouped
