"""An audit's HTML card draws its model graph (views/_graph_svg.py) as raw Keras ran it: a
functional model with a layer called twice and a nested model, each drawn once (the nested
model one block), nodes filled with the palette colour of the compute dtype Keras reports,
edges labelled with the dtype of the tensor raw Keras's pass hands on."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import keras
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer.views import audit_html
from dtype_explorer.views._graph_svg import model_graph_svg
from dtype_explorer.views._palette import dtype_color

SVG = "{http://www.w3.org/2000/svg}"
SAMPLE = np.ones((2, 4), "float32")


def std(tensor) -> str:
    return keras.backend.standardize_dtype(tensor.dtype)


@pytest.fixture(scope="module")
def built():
    """The model, its symbolic tensors (for raw Keras's values of each) and its audit."""
    inner_in = keras.Input((4,), name="inner_in")
    inner_out = keras.layers.Dense(4, name="inner_dense", dtype="float32")(inner_in)
    inner = keras.Model(inner_in, inner_out, name="inner")
    x = keras.Input((4,), name="x")
    shared = keras.layers.Dense(4, name="shared", dtype="mixed_float16")
    first = shared(x)
    second = shared(keras.layers.Dense(4, name="pre", dtype="mixed_bfloat16")(first))
    nested = inner(second)
    head = keras.layers.Dense(2, name="head")(nested)
    model = keras.Model(x, head, name="towers")
    tensors = {"x": x, "first": first, "second": second, "nested": nested}
    return model, tensors, dx.check_model(model, SAMPLE)


def parsed(svg: str):
    root = ET.fromstring(svg)
    nodes = {g.get("data-path"): g for g in root.iter(f"{SVG}g") if g.get("data-path")}
    edges = [g for g in root.iter(f"{SVG}g") if g.get("class") == "dx-graph-edge"]
    return nodes, edges


def test_the_card_draws_each_top_level_layer_once_in_its_compute_dtype_colour(built):
    model, _, report = built
    html = audit_html(report)
    svg = html[html.index("<svg") : html.index("</svg>") + len("</svg>")]
    nodes, _ = parsed(svg)
    assert sorted(nodes) == sorted(f"towers/{layer.name}" for layer in model.layers)
    for layer in model.layers:
        node = nodes[f"towers/{layer.name}"]
        if isinstance(layer, keras.layers.InputLayer):
            continue
        assert node.get("data-dtype") == layer.compute_dtype  # Keras's own, each layer
        assert node.get("data-fill") == dtype_color(layer.compute_dtype)
    assert "2 calls" in ET.tostring(nodes["towers/shared"], encoding="unicode")
    assert "2 inside" in ET.tostring(nodes["towers/inner"], encoding="unicode")


def test_the_edges_carry_the_dtypes_of_raw_keras(built):
    model, tensors, report = built
    names = list(tensors)
    raw = dict(zip(names, keras.Model(model.inputs[0], list(tensors.values()))(SAMPLE)))
    _, edges = parsed(model_graph_svg(report.graph, report.findings))
    got = sorted(e.get("data-dtype") for e in edges)
    # x -> shared, shared -> pre, pre -> shared, shared -> inner (its layers one block),
    # inner -> head, each the tensor raw Keras's pass hands on
    pre = model.get_layer("pre")(raw["first"])  # raw Keras: what pre hands the shared layer
    expected = [std(raw["x"]), std(raw["first"]), std(pre), std(raw["second"]), std(raw["nested"])]
    assert got == sorted(expected)
    assert std(raw["first"]) == "float16" and std(pre) == "bfloat16"


def test_a_finding_is_counted_on_the_block_it_is_in():
    """Findings mark the top-level node of their path (hand-built record: the view only)."""
    from dtype_explorer.records import Finding, GraphNode, ModelGraph

    graph = ModelGraph(
        root="m",
        nodes=(
            GraphNode(path="m/b", name="b", kind="layer", layer_class="Model"),
            GraphNode(path="m/b/d", name="d", kind="layer", layer_class="Dense", parent="m/b"),
        ),
    )
    finding = Finding(severity="warning", kind="overflow", path="m/b/d", message="inf")
    nodes, _ = parsed(model_graph_svg(graph, (finding,)))
    (badge,) = [g for g in nodes["m/b"].iter(f"{SVG}g") if g.get("data-severity")]
    assert badge.get("data-severity") == "warning"
