"""The model graph (``ModelTracer(graph=True)``, ``keras_run/model/_graph.py``) beside raw
Keras: every layer of the model once (Keras's own layer lists, nested models included), its
compute dtype as Keras reports it, and an edge for each call with the dtype a raw forward
pass gives that tensor (Keras's own functional model of the intermediate tensors, run on the
same sample), on a mixed_float16 model with a layer called twice and a nested model."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from dtype_explorer.keras_run import ModelTracer, declared_inputs

SAMPLE = [np.ones((2, 4), "float32"), np.arange(8, dtype="int32").reshape(2, 4)]


def std(tensor) -> str:
    return keras.backend.standardize_dtype(tensor.dtype)


@pytest.fixture(scope="module")
def towers():
    """The model, the symbolic tensors between its layers (to read raw Keras's eager values
    of each), and the nested model's."""
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inner_in = keras.Input((4,), name="inner_in")
        hidden = keras.layers.Dense(4, name="inner_dense")(inner_in)
        inner_out = keras.layers.Dense(4, name="inner_out")(hidden)
        inner = keras.Model(inner_in, inner_out, name="inner")
        x = keras.Input((4,), name="x")
        ids = keras.Input((4,), dtype="int32", name="ids")
        shared = keras.layers.Dense(4, name="shared")
        first = shared(x)
        pre = keras.layers.Dense(4, name="pre")(first)
        second = shared(pre)
        nested = inner(second)
        summed = keras.ops.add(nested, 1.0)  # an op node of the functional graph, no layer
        reshaped = keras.layers.Reshape((4,), name="resh")(ids)
        out = keras.layers.Add(name="sum")([summed, reshaped])
        head = keras.layers.Dense(2, name="head")(out)
        model = keras.Model([x, ids], head, name="towers")
    finally:
        keras.config.set_dtype_policy("float32")
    outer = {
        "x": x, "shared0": first, "pre": pre, "shared1": second, "inner": nested,
        "add": summed, "ids": ids, "resh": reshaped, "sum": out,
    }  # fmt: skip
    return model, inner, outer, {"inner_in": inner_in, "inner_dense": hidden}


def _op_name(model) -> str:
    """The name Keras gave the model's one op node (``add``, or ``add_4`` after other ``add``
    ops were made in this process: Keras numbers them per process)."""
    [op] = [op for op in model.operations if not isinstance(op, keras.layers.Layer)]
    return op.name


@pytest.fixture(scope="module")
def graph(towers):
    model = towers[0]
    tracer = ModelTracer(model, graph=True)
    tracer.finish(tracer.run(SAMPLE, declared_inputs(model)))
    assert tracer.graph_error == ""
    # the user's models as they were: no wrapper of the recorder's left on an instance
    assert not any("_standardize_inputs" in vars(m) for m in (model, towers[1]))
    return tracer.graph


def raw_dtypes(towers) -> dict[str, keras.KerasTensor]:
    """Raw Keras's forward pass: each intermediate tensor's eager value, by name (the
    model's tensors through a functional model of them; the nested model's likewise, on what
    the outer pass handed it)."""
    model, inner, outer, inside = towers
    names = list(outer)
    values = dict(zip(names, keras.Model(model.inputs, [outer[n] for n in names])(SAMPLE)))
    names = list(inside)
    values |= dict(zip(names, keras.Model(inner.inputs, list(inside.values()))(values["shared1"])))
    return values


def test_each_layer_is_one_node_with_keras_compute_dtype(towers, graph):
    model, inner, _, _ = towers
    layers = {f"towers/{layer.name}": layer for layer in model.layers}
    layers |= {f"towers/inner/{layer.name}": layer for layer in inner.layers}
    ops = [op for op in model.operations if not isinstance(op, keras.layers.Layer)]
    paths = [n.path for n in graph.nodes]
    assert len(paths) == len(set(paths))  # each once, the shared layer and the nested model too
    assert set(paths) == set(layers) | {f"towers/{op.name}" for op in ops}
    for path, layer in layers.items():
        node = graph.node(path)
        if isinstance(layer, keras.layers.InputLayer):
            assert node.kind == "input"
        else:
            assert (node.kind, node.compute_dtype, node.variable_dtype) == (
                "layer", layer.compute_dtype, layer.variable_dtype,
            )  # fmt: skip
            assert node.compute_dtype == "float16"  # mixed_float16, as built
    assert graph.node("towers/shared").calls == 2
    assert graph.node("towers/inner/inner_dense").parent == "towers/inner"
    add = _op_name(model)
    assert graph.node("towers/inner").parent == "" and graph.node(f"towers/{add}").kind == "op"


def test_an_edge_for_each_call_with_the_dtype_of_raw_keras(towers, graph):
    raw = raw_dtypes(towers)
    add = _op_name(towers[0])
    expected = {  # (source, call) -> (target, call): the tensor, as raw Keras computed it
        (("x", 0), ("shared", 0)): raw["x"],
        (("shared", 0), ("pre", 0)): raw["shared0"],
        (("pre", 0), ("shared", 1)): raw["pre"],
        (("shared", 1), ("inner/inner_in", 0)): raw["shared1"],
        (("inner/inner_in", 0), ("inner/inner_dense", 0)): raw["inner_in"],
        (("inner/inner_dense", 0), ("inner/inner_out", 0)): raw["inner_dense"],
        (("inner/inner_out", 0), (add, 0)): raw["inner"],
        (("ids", 0), ("resh", 0)): raw["ids"],
        ((add, 0), ("sum", 0)): raw["add"],
        (("resh", 0), ("sum", 0)): raw["resh"],
        (("sum", 0), ("head", 0)): raw["sum"],
    }
    got = {
        ((e.source.removeprefix("towers/"), e.source_call),
         (e.target.removeprefix("towers/"), e.target_call)): (e.dtype, e.shape)
        for e in graph.edges
    }  # fmt: skip
    assert len(got) == len(graph.edges)  # no edge twice
    assert got == {key: (std(t), tuple(t.shape)) for key, t in expected.items()}
    # what the edges show differs by dtype where Keras's does: the nested model's input
    # converts the float16 it is handed to its keras.Input's float32
    assert std(raw["shared1"]) == "float16" and std(raw["inner_in"]) == "float32"
    assert graph.notes == ()


class Twice(keras.Model):
    """A subclassed model calling one layer twice: no functional graph, edges by the pass."""

    def __init__(self):
        super().__init__(name="twice")
        self.d = keras.layers.Dense(3, name="d", dtype="mixed_float16")
        self.o = keras.layers.Dense(2, name="o")

    def call(self, x):
        return self.o(self.d(self.d(x)))


def test_a_subclassed_model_calling_a_layer_twice():
    model = Twice()
    sample = np.ones((2, 3), "float64")
    tracer = ModelTracer(model, graph=True)
    tracer.finish(tracer.run(sample, None))
    graph = tracer.graph
    # raw Keras, the same layers called by hand in the same order
    once = model.d(keras.ops.convert_to_tensor(sample))
    twice = model.d(once)
    assert sorted(n.path for n in graph.nodes) == ["twice/d", "twice/input", "twice/o"]
    assert graph.node("twice/d").calls == 2
    edges = [(e.source, e.source_call, e.target, e.target_call, e.dtype) for e in graph.edges]
    assert edges == [
        ("twice/input", 0, "twice/d", 0, "float64"),
        ("twice/d", 0, "twice/d", 1, std(once)),
        ("twice/d", 1, "twice/o", 0, std(twice)),
    ]
    assert std(once) == "float16"


def test_a_layer_alone_is_one_node_fed_by_its_input():
    layer = keras.layers.Dense(2, name="solo", dtype="mixed_float16")
    tracer = ModelTracer(layer, graph=True)
    tracer.finish(tracer.run(np.ones((2, 3), "int32"), None))
    graph = tracer.graph
    assert [(n.path, n.kind) for n in graph.nodes] == [("solo/input", "input"), ("solo", "layer")]
    assert [(e.source, e.target, e.dtype) for e in graph.edges] == [("solo/input", "solo", "int32")]
    assert graph.node("solo").output_dtypes == (std(layer(np.ones((2, 3), "int32"))),)


def test_check_model_keeps_the_graph_on_its_report(towers, graph):
    """``dx.check_model`` draws the same graph as its traced pass, and the report carries it
    through JSON (how a report comes back from another Keras release's worker)."""
    import dtype_explorer as dx
    from dtype_explorer.records import AuditReport

    report = dx.check_model(towers[0], SAMPLE)
    assert report.graph == graph
    assert AuditReport.from_json(report.to_json()).graph == graph
