"""What a catalog entry holds: how to build and call one target, and its dtype contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

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
    """One ``keras.ops`` function, probed as ``"ops.<name>"``; ``input_style="list"`` ops take
    their inputs as one list, ``fn([x1, x2])``."""

    name: str
    rule: OpRule
    shapes: tuple[tuple[int, ...], ...] = ((2, 3), (2, 3))
    kwargs: dict[str, Any] = field(default_factory=dict)
    group: str = "ops"
    roles: tuple[Role, ...] = ()
    note: str = ""
    input_style: InputStyle = "positional"

    kind = "op"

    @property
    def arity(self) -> int:
        return len(self.shapes)

    @property
    def function_name(self) -> str:
        return self.name.removeprefix("ops.")


Entry = LayerEntry | OpEntry
