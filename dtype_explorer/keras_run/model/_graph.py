"""A model's graph from its real forward pass: which call's output went into which call, with
the dtype Keras returned, every layer drawn once (a shared layer's calls are its edges).

Recorded alongside ``ModelTracer``'s pass (``ModelTracer(model, graph=True)``), by tensor
identity: each output a call returns is kept alive until the end of the pass, so a tensor a
later call is given *is* that output when its ``id`` matches one made before the call began.
What the pass does between layers is seen too, from Keras's functional graph: a functional
model's inputs as it converts them to its ``keras.Input`` dtypes (``Functional.
_standardize_inputs``, an ``input`` node each) and its operation nodes (``keras.ops.add(a, b)``
on symbolic tensors is a ``Node`` whose operation is no layer: ``Operation.__call__`` runs it,
an ``op`` node each). A tensor a layer's ``call()`` received after Keras converted it (its
autocast) stands for the tensor its ``__call__`` was handed. A tensor made by arithmetic inside
a subclassed layer's ``call()`` (a residual add) comes from no call: it has no edge, said in
the graph's notes.

>>> import keras, numpy as np
>>> from dtype_explorer.keras_run import ModelTracer, declared_inputs
>>> x = keras.Input((3,), name="x")
>>> shared = keras.layers.Dense(3, name="shared")
>>> model = keras.Model(x, shared(shared(x)), name="m")
>>> tracer = ModelTracer(model, graph=True)
>>> _ = tracer.finish(tracer.run(np.ones((2, 3)), declared_inputs(model)))
>>> [(e.source, e.source_call, e.target, e.target_call) for e in tracer.graph.edges]
[('m/x', 0, 'm/shared', 0), ('m/shared', 0, 'm/shared', 1)]
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from dtype_explorer import dtypes
from dtype_explorer.keras_run.model._samples import keras_flatten
from dtype_explorer.records import GraphEdge, GraphNode, ModelGraph, TensorInfo

#: Said when some layer that ran has no edge in.
UNREACHED = (
    "{n} layer{s} that ran {have} no edge in ({names}): what {they} got was made by ops in "
    "{their} parent's call() (a residual add, a reshape), not returned by a layer"
)


@dataclasses.dataclass(eq=False)
class Visit:
    """One call in the pass: a layer's, a model's input conversion, or an op node's."""

    kind: str
    path: str
    index: int
    start: int
    given: list[int]
    given_infos: tuple[TensorInfo, ...]
    received: list[int] = dataclasses.field(default_factory=list)
    end: int = -1
    #: The outputs, held so that their ids stay theirs until the graph is made.
    outputs: list[Any] = dataclasses.field(default_factory=list)
    output_infos: tuple[TensorInfo, ...] = ()


def _infos(tensors: list[Any]) -> tuple[TensorInfo, ...]:
    return tuple(
        TensorInfo(dtype=dtypes.describe(t), shape=tuple(_dim(d) for d in t.shape)) for t in tensors
    )


def _dim(d: Any) -> int | None:
    return None if d is None else int(d)


class GraphRecorder:
    """What the graph needs from one pass: each call's span, what it was handed and received,
    what it returned. ``layers``: ``ModelTracer.layers`` (``id -> (layer, path, depth)``);
    ``recording``: whether a call now is the pass's (``ModelTracer._recording``)."""

    def __init__(self, model: Any, layers: dict[int, tuple[Any, str, int]], recording: Callable):
        self.model, self.layers, self.recording = model, layers, recording
        self.visits: list[Visit] = []
        self._clock = itertools.count()
        self._handed: dict[int, list[list[Any]]] = {}
        self._counts: dict[str, int] = {}
        self.functionals = _functionals(layers)
        self.ops = _op_nodes(self.functionals, layers)

    # ----------------------------------------------------------------- during the pass

    def handed(self, key: int, args: tuple, kwargs: dict) -> None:
        """A layer's ``__call__`` was handed ``args``/``kwargs`` (before Keras converted them)."""
        self._handed.setdefault(key, []).append(keras_flatten((args, kwargs)))

    def unhanded(self, key: int) -> None:
        self._handed[key].pop()

    def enter(self, key: int, path: str, index: int, args: tuple, kwargs: dict) -> Visit:
        """A layer's ``call()`` began, with what it received."""
        handed = self._handed.get(key) or [keras_flatten((args, kwargs))]
        visit = Visit("layer", path, index, next(self._clock), [id(t) for t in handed[-1]],
                      _infos(handed[-1]))  # fmt: skip
        visit.received = [id(t) for t in keras_flatten((args, kwargs))]
        self.visits.append(visit)
        return visit

    def leave(self, visit: Visit, outputs: Any) -> None:
        """A call returned ``outputs``."""
        visit.outputs = keras_flatten(outputs)
        visit.output_infos = _infos(visit.outputs)
        visit.end = next(self._clock)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Each functional model's input conversion and op nodes watched; put back after."""
        with contextlib.ExitStack() as stack:
            if self.ops:
                stack.enter_context(self._ops_watched())
            for functional, owner in self.functionals:
                stack.enter_context(self._inputs_watched(functional, owner))
            yield

    @contextlib.contextmanager
    def _ops_watched(self) -> Iterator[None]:
        """``Operation.__call__`` patched to open a visit for each op node (only where a model
        has some: setting an attribute of a class with 1,300 subclasses, keras-hub imported,
        costs tens of microseconds each way)."""
        from keras.src.ops.operation import Operation

        original = Operation.__dict__["__call__"]
        recorder = self

        def op_call(op: Any, *args: Any, **kwargs: Any) -> Any:
            found = recorder.ops.get(id(op))
            if found is None or not recorder.recording():
                return original(op, *args, **kwargs)
            path = found[1]
            visit = recorder._open("op", path, keras_flatten((args, kwargs)))
            outputs = original(op, *args, **kwargs)
            recorder.leave(visit, outputs)
            return outputs

        Operation.__call__ = op_call
        try:
            yield
        finally:
            Operation.__call__ = original

    def _open(self, kind: str, path: str, given: list[Any]) -> Visit:
        index = self._counts.get(path, 0)
        self._counts[path] = index + 1
        visit = Visit(kind, path, index, next(self._clock), [id(t) for t in given], _infos(given))
        self.visits.append(visit)
        return visit

    @contextlib.contextmanager
    def _inputs_watched(self, functional: Any, owner: str) -> Iterator[None]:
        """``functional._standardize_inputs`` wrapped on the instance: each input it converts
        is a visit of its ``keras.Input`` layer (given what the model's ``call()`` received)."""
        original = getattr(functional, "_standardize_inputs", None)
        if original is None:  # a release without it: the model's inputs are where edges begin
            yield
            return
        own = vars(functional).get("_standardize_inputs")  # an instance's own wrapper, kept
        inputs = [self.layers.get(id(_input_layer(t))) for t in functional.inputs]

        def standardize(raw: Any) -> Any:
            converted = original(raw)
            if not self.recording():
                return converted
            handed, made = keras_flatten(raw), keras_flatten(converted)
            for j, found in enumerate(inputs):
                if found is None or j >= len(made):
                    continue
                visit = self._open("input", found[1], handed[j : j + 1])
                visit.outputs, visit.output_infos = [made[j]], _infos([made[j]])
                visit.end = next(self._clock)
            return converted

        object.__setattr__(functional, "_standardize_inputs", standardize)  # past Keras's tracking
        try:
            yield
        finally:
            if own is not None:  # as it was: the instance's own, or the class's
                object.__setattr__(functional, "_standardize_inputs", own)
            else:
                object.__delattr__(functional, "_standardize_inputs")

    # ----------------------------------------------------------------- after the pass

    def graph(self) -> ModelGraph:
        """The graph of the pass: every layer once, the edges between the deepest calls."""
        root = self.model.name
        nodes = _layer_nodes(self.layers, self.visits)
        nodes += [_op_node(path, self.ops, self.visits) for path in _op_paths(self.ops)]
        leaf = len(nodes) == 1  # a layer without sublayers: the one node
        edges, synthetic = _Edges(self.visits, root, {n.path for n in nodes}, leaf).all()
        nodes = synthetic + nodes
        if not leaf:  # the root is the canvas, its parts the nodes
            nodes = [n for n in nodes if n.path != root]
        reached = {e.target for e in edges}
        unreached = [
            n.name
            for n in nodes
            if n.kind == "layer"
            and n.calls
            and not any(p == n.path or p.startswith(n.path + "/") for p in reached)
        ]
        notes = ()
        if unreached:
            many = len(unreached) > 1
            notes = (
                UNREACHED.format(
                    n=len(unreached),
                    s="s" if many else "",
                    have="have" if many else "has",
                    names=", ".join(unreached[:6]) + (", ..." if len(unreached) > 6 else ""),
                    they="they" if many else "it",
                    their="their" if many else "its",
                ),
            )
        return ModelGraph(root=root, nodes=tuple(nodes), edges=tuple(edges), notes=notes)


class _Edges:
    """The edges of the pass: each tensor a call was handed, traced to the call that made it."""

    def __init__(self, visits: list[Visit], root: str, paths: set[str], leaf: bool):
        self.leaf = leaf
        self.visits = sorted((v for v in visits if v.end >= 0), key=lambda v: v.start)
        self.root, self.paths = root, paths
        self.made: dict[int, list[tuple[Visit, int]]] = {}
        for visit in self.visits:
            for k, tensor in enumerate(visit.outputs):
                self.made.setdefault(id(tensor), []).append((visit, k))
        self.top = next((v for v in self.visits if v.path == root), None)
        self.synthetic: dict[int, GraphNode] = {}

    def all(self) -> tuple[list[GraphEdge], list[GraphNode]]:
        found = []
        for visit in self.visits:
            if visit is self.top:  # where the pass begins: its inputs, if it is the one node
                found += [(j, visit, j) for j in range(len(visit.given)) if self.leaf]
                continue
            for i, tensor in enumerate(visit.given):
                source = self.source(tensor, visit)
                if source is None or (visit.kind == "input" and isinstance(source, int)):
                    continue  # a model input's own conversion: it is where the pass begins
                found.append((source, visit, i))
        # a tensor handed on inside a call is drawn into the inner call only: each source's
        # calls looked up by its key (a scan of every pair was a quarter second on a ResNet50)
        takers: dict[tuple[int, int], list[Visit]] = {}
        for source, visit, _ in found:
            takers.setdefault(_key(source), []).append(visit)
        edges = [
            self.edge(source, visit, i)
            for source, visit, i in found
            if not any(self.inside(d, visit) for d in takers[_key(source)])
        ]
        return edges, list(self.synthetic.values())

    def source(self, tensor: int, visit: Visit) -> tuple[Visit, int] | int | None:
        """What made ``tensor`` before ``visit`` began: the deepest call that returned it, or
        (a tensor an enclosing call received) what that call was handed; an ``int``: the
        root's input of that position; ``None``: no call (made by ops)."""
        made = [(v, k) for v, k in self.made.get(tensor, ()) if v.end < visit.start]
        if made:
            return max(made, key=lambda vk: vk[0].start)
        for outer in sorted(self.enclosing(visit), key=lambda v: -v.start):
            if tensor in outer.received:
                j = outer.received.index(tensor)
                if outer is self.top:
                    return j
                return self.source(outer.given[j], outer) if j < len(outer.given) else None
        return None

    def enclosing(self, visit: Visit) -> list[Visit]:
        return [v for v in self.visits if v.start < visit.start and v.end > visit.end]

    @staticmethod
    def inside(inner: Visit, outer: Visit) -> bool:
        return outer.start < inner.start and inner.end < outer.end

    def edge(self, source: tuple[Visit, int] | int, visit: Visit, i: int) -> GraphEdge:
        if isinstance(source, int):
            node = self.root_input(source)
            info = _infos_at(self.top.given_infos, source) if self.top else None
            return GraphEdge(
                source=node.path,
                target=visit.path,
                target_call=visit.index,
                input=i,
                dtype=info.dtype if info else visit.given_infos[i].dtype,
                shape=info.shape if info else visit.given_infos[i].shape,
            )
        made, k = source
        info = made.output_infos[k]
        return GraphEdge(
            source=made.path,
            target=visit.path,
            source_call=made.index,
            target_call=visit.index,
            output=k,
            input=i,
            dtype=info.dtype,
            shape=info.shape,
        )

    def root_input(self, j: int) -> GraphNode:
        """The node of the root's input ``j`` (a model without ``keras.Input`` layers)."""
        if j not in self.synthetic:
            name = "input" if len(self.top.given) == 1 else f"input_{j}"
            while f"{self.root}/{name}" in self.paths:
                name += "_"
            info = _infos_at(self.top.given_infos, j)
            self.synthetic[j] = GraphNode(
                path=f"{self.root}/{name}",
                name=name,
                kind="input",
                layer_class="input",
                output_dtypes=(info.dtype,) if info else (),
            )
        return self.synthetic[j]


def _key(source: tuple[Visit, int] | int) -> tuple[int, int]:
    """A source as a key: the call by identity and the output's position (the root's input:
    ``-1`` and its position)."""
    return (-1, source) if isinstance(source, int) else (id(source[0]), source[1])


def _infos_at(infos: tuple[TensorInfo, ...], j: int) -> TensorInfo | None:
    return infos[j] if j < len(infos) else None


def _layer_nodes(layers: dict[int, tuple[Any, str, int]], visits: list[Visit]) -> list[GraphNode]:
    """Every layer once (the model's order), with its calls and output dtypes in the pass."""
    root = next(path for _, path, depth in layers.values() if depth == 0)
    found = []
    for layer, path, depth in layers.values():
        mine = [v for v in visits if v.path == path]
        inputs = type(layer).__name__ == "InputLayer"
        found.append(
            GraphNode(
                path=path,
                name=layer.name,
                kind="input" if inputs else "layer",
                layer_class=type(layer).__name__,
                parent=_parent(path, depth, root),
                compute_dtype="" if inputs else str(layer.compute_dtype),
                variable_dtype="" if inputs else str(layer.variable_dtype),
                calls=len(mine),
                output_dtypes=_distinct(mine),
            )
        )
    return found


def _parent(path: str, depth: int, root: str) -> str:
    parent = path.rsplit("/", 1)[0] if depth > 0 else ""
    return "" if parent == root else parent


def _distinct(visits: list[Visit]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.dtype for v in visits for t in v.output_infos))


def _op_paths(ops: dict[int, tuple[Any, str, str]]) -> list[str]:
    return list(dict.fromkeys(path for _, path, _ in ops.values()))


def _op_node(path: str, ops: dict[int, tuple[Any, str, str]], visits: list[Visit]) -> GraphNode:
    op, _, owner = next(found for found in ops.values() if found[1] == path)
    mine = [v for v in visits if v.path == path]
    return GraphNode(
        path=path,
        name=op.name,
        kind="op",
        layer_class=type(op).__name__,
        parent=owner,
        calls=len(mine),
        output_dtypes=_distinct(mine),
    )


def _functionals(layers: dict[int, tuple[Any, str, int]]) -> list[tuple[Any, str]]:
    """Each functional graph in the model with the path of the model that runs it (a
    ``Sequential`` runs its own ``Functional``)."""
    from keras.src.models.functional import Functional

    found = []
    for layer, path, _ in layers.values():
        functional = getattr(layer, "_functional", None) or layer
        if isinstance(functional, Functional):
            found.append((functional, path))
    return found


def _op_nodes(
    functionals: list[tuple[Any, str]], layers: dict[int, tuple[Any, str, int]]
) -> dict[int, tuple[Any, str, str]]:
    """The operations of the functional graphs that are no layer: ``id -> (op, path, the
    path of the node it sits in)``."""
    from keras.src.layers.layer import Layer

    root = next(path for _, path, depth in layers.values() if depth == 0)
    found = {}
    for functional, owner in functionals:
        for op in functional.operations:
            if not isinstance(op, Layer) and id(op) not in found:
                found[id(op)] = (op, f"{owner}/{op.name}", "" if owner == root else owner)
    return found


def _input_layer(tensor: Any) -> Any:
    """The ``InputLayer`` that made a functional model's input tensor (``None``: unknown)."""
    history = getattr(tensor, "_keras_history", None)
    return getattr(history, "operation", None)
