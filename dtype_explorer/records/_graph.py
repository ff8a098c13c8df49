"""A model's graph as one forward pass ran it: every layer once, an edge for each tensor that
went from one call's outputs into another call's inputs, with that tensor's dtype and shape.

Made by the audit's traced pass (``keras_run.ModelTracer(graph=True)``), kept on
``AuditReport.graph``; the widget's model view lays it out (dagre, in the page). Nodes nest by
``parent`` (a nested model's or a subclassed layer's sublayers under it); edges join the
deepest calls that handed a tensor on, so a view that collapses a block draws its edges at the
block.

>>> g = ModelGraph(root="m", nodes=(
...     GraphNode(path="m/x", name="x", kind="input", layer_class="InputLayer"),
...     GraphNode(path="m/d", name="d", kind="layer", layer_class="Dense", calls=1,
...               compute_dtype="float16", variable_dtype="float32"),
... ), edges=(GraphEdge(source="m/x", target="m/d", dtype="float32", shape=(2, 3)),))
>>> [n.path for n in g.children("")], g.into("m/d")[0].dtype
(['m/x', 'm/d'], 'float32')
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records._base import Record

#: What a node is: a layer (a model nested in the model is one, its layers under it), one of
#: a model's ``keras.Input`` layers (or the positional input of a model that has none), or
#: a ``keras.ops`` call recorded in a functional model's graph (``keras.ops.add(a, b)`` on
#: symbolic tensors: an operation node, not a layer).
NodeKind = Literal["layer", "input", "op"]


class GraphNode(Record):
    """One layer (or a model's input, or an op node of a functional graph), drawn once."""

    path: str
    name: str
    kind: NodeKind
    #: The layer's (or the op's) class name.
    layer_class: str
    #: The path of the node it sits in (a nested model, a subclassed layer); ``""``: the top.
    parent: str = ""
    #: The layer's ``compute_dtype`` and ``variable_dtype`` (``""`` for an input or an op).
    compute_dtype: str = ""
    variable_dtype: str = ""
    #: How many times the pass called it (a shared layer: more than once; ``0``: never).
    calls: int = 0
    #: The dtypes of what it returned in the pass (an input: what its model converted the
    #: sample to), in order.
    output_dtypes: tuple[str, ...] = ()

    def shown_dtype(self) -> str:
        """The dtype a view colours the node by: a layer's compute dtype, else (an input, an
        op) the first dtype it returned; ``""`` when it has none."""
        if self.kind == "layer" and self.compute_dtype:
            return self.compute_dtype
        return self.output_dtypes[0] if self.output_dtypes else ""


class GraphEdge(Record):
    """One tensor handed on: output ``output`` of call ``source_call`` of ``source`` was input
    ``input`` (the flat position among what the call was given) of call ``target_call`` of
    ``target``. ``dtype``/``shape``: that tensor as the source returned it."""

    source: str
    target: str
    source_call: int = 0
    target_call: int = 0
    output: int = 0
    input: int = 0
    dtype: str
    shape: tuple[int | None, ...] = ()


class ModelGraph(Record):
    """Every layer of the model once, and the edges of the pass that ran it."""

    #: The audited model's (or layer's) name: every path starts with it.
    root: str
    nodes: tuple[GraphNode, ...] = ()
    edges: tuple[GraphEdge, ...] = ()
    #: What the graph cannot show, in a sentence each (a tensor made by arithmetic inside a
    #: layer's ``call()`` comes from no layer: no edge reaches the layer it feeds).
    notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _joined(self) -> ModelGraph:
        paths = [n.path for n in self.nodes]
        if len(set(paths)) != len(paths):
            twice = sorted({p for p in paths if paths.count(p) > 1})
            raise InvalidSpecError(f"a graph draws each node once; received twice: {twice}")
        known = {*paths, ""}
        stray = [n.path for n in self.nodes if n.parent not in known]
        stray += [
            f"{e.source} -> {e.target}"
            for e in self.edges
            if e.source not in known or e.target not in known
        ]
        if stray:
            raise InvalidSpecError(f"graph parts that name no node: {stray[:5]}")
        return self

    def node(self, path: str) -> GraphNode:
        """The node at ``path`` (``KeyError`` naming the paths there are, when none)."""
        for n in self.nodes:
            if n.path == path:
                return n
        raise KeyError(f"no node {path!r} in the graph of {self.root!r}")

    def children(self, parent: str) -> list[GraphNode]:
        """The nodes right under ``parent`` (``""``: the top level), in the model's order."""
        return [n for n in self.nodes if n.parent == parent]

    def into(self, path: str) -> list[GraphEdge]:
        """The edges into ``path``."""
        return [e for e in self.edges if e.target == path]

    def out_of(self, path: str) -> list[GraphEdge]:
        """The edges out of ``path``."""
        return [e for e in self.edges if e.source == path]

    def top(self, path: str) -> str:
        """The top-level node ``path`` sits in (``path`` itself when it is one)."""
        return self._top(path, {n.path: n.parent for n in self.nodes})

    @staticmethod
    def _top(path: str, parents: dict[str, str]) -> str:
        while parents.get(path):
            path = parents[path]
        return path

    def top_edges(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """The edges between top-level nodes, each block (a nested model, a layer with
        sublayers) standing for what it holds: ``(source, target, dtypes)``, parallel edges
        merged with their dtypes listed once, those inside one block dropped (a layer feeding
        itself kept).

        >>> g = ModelGraph(root="m", nodes=(
        ...     GraphNode(path="m/x", name="x", kind="input", layer_class="InputLayer"),
        ...     GraphNode(path="m/b", name="b", kind="layer", layer_class="Model"),
        ...     GraphNode(path="m/b/d", name="d", kind="layer", layer_class="Dense", parent="m/b"),
        ... ), edges=(GraphEdge(source="m/x", target="m/b/d", dtype="float32"),))
        >>> g.top_edges()
        [('m/x', 'm/b', ('float32',))]
        """
        parents = {n.path: n.parent for n in self.nodes}
        merged: dict[tuple[str, str], list[str]] = {}
        for edge in self.edges:
            source, target = self._top(edge.source, parents), self._top(edge.target, parents)
            if source == target and edge.source != edge.target:
                continue
            found = merged.setdefault((source, target), [])
            if edge.dtype not in found:
                found.append(edge.dtype)
        return [(s, t, tuple(d)) for (s, t), d in merged.items()]
