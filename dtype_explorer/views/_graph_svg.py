"""An audit's model graph as an inline SVG for its HTML card (``%dtype_check``'s output): the
top-level nodes (a nested model or a layer with sublayers one block, its layer count said)
in rows by their depth in the pass, each filled with its compute dtype's palette colour, the
edges coloured and labelled with the dtype of the tensor they carry, a finding's count and
severity on its node. No script runs in a card: blocks stay closed here, the widget's model
view (``%dtype_check model --widget``) opens them. Every dtype is the record's.
"""

from __future__ import annotations

import math

from dtype_explorer.records import Finding, GraphNode, ModelGraph
from dtype_explorer.views._markup import FG2, clip, e
from dtype_explorer.views._palette import PALETTE, dtype_color, text_on

_W, _H, _GAP_X, _GAP_Y, _PAD, _NAME, _SUB = 196, 38, 22, 40, 16, 26, 32
_SEVERITIES = ("error", "warning", "info")
_LABEL = 'font-size="10" font-family="monospace" text-anchor="middle"'
_INK = PALETTE["ui"]["foreground"]


def model_graph_svg(graph: ModelGraph, findings: tuple[Finding, ...] = ()) -> str:
    """The graph's top level as an SVG, nodes in rows by their longest path from the inputs
    (an edge back up, where a shared layer feeds a layer before it, curves on the left).

    Args:
        graph: the audit's ``ModelGraph`` (``AuditReport.graph``).
        findings: the audit's findings, each counted on the top-level node of its path.

    Returns:
        ``<svg ...>``, or ``""`` for a graph with no node.

    >>> from dtype_explorer.records import GraphEdge
    >>> g = ModelGraph(root="m", nodes=(
    ...     GraphNode(path="m/x", name="x", kind="input", layer_class="InputLayer",
    ...               output_dtypes=("float32",)),
    ...     GraphNode(path="m/d", name="d", kind="layer", layer_class="Dense", calls=1,
    ...               compute_dtype="float16", variable_dtype="float32"),
    ... ), edges=(GraphEdge(source="m/x", target="m/d", dtype="float32"),))
    >>> svg = model_graph_svg(g)
    >>> svg.count('class="dx-graph-node"'), svg.count('class="dx-graph-edge"')
    (2, 1)
    """
    nodes = graph.children("")
    if not nodes:
        return ""
    order = {n.path: i for i, n in enumerate(nodes)}
    edges = [edge for edge in graph.top_edges() if edge[0] in order and edge[1] in order]
    rank = _ranks(order, [(s, t) for s, t, _ in edges])
    rows: dict[int, list[str]] = {}
    for path in order:
        rows.setdefault(rank[path], []).append(path)
    width = max(len(r) for r in rows.values()) * (_W + _GAP_X) + 2 * _PAD + 100
    height = len(rows) * (_H + _GAP_Y) + _PAD
    place = {}
    for r, paths in rows.items():
        left = (width - len(paths) * (_W + _GAP_X) + _GAP_X) / 2
        for i, path in enumerate(paths):
            place[path] = (left + i * (_W + _GAP_X), _PAD + r * (_H + _GAP_Y))
    counts = _findings_by_top(graph, findings)
    parts = [_edge(place[s], place[t], dtypes) for s, t, dtypes in edges]
    parts += [_node(graph, n, place[n.path], counts.get(n.path, [])) for n in nodes]
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" class="dx-model-graph" '
        f'aria-label="model graph of {e(graph.root)}">{"".join(parts)}</svg>'
    )


def _ranks(order: dict[str, int], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Each node's row: its longest path from a node with no edge in, the edges that close a
    cycle (found depth first, in the model's order) left out."""
    out: dict[str, list[str]] = {p: [] for p in order}
    for source, target in edges:
        if source != target:
            out[source].append(target)
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    finished: list[str] = []
    forward: set[tuple[str, str]] = set()
    for start in order:
        if state.get(start):
            continue
        stack = [(start, iter(out[start]))]
        state[start] = 1
        while stack:
            path, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                state[path] = 2
                finished.append(path)
                stack.pop()
            elif state.get(target) != 1:  # an edge to a node on the path closes a cycle
                forward.add((path, target))
                if not state.get(target):
                    state[target] = 1
                    stack.append((target, iter(out[target])))
    rank = dict.fromkeys(order, 0)
    for path in reversed(finished):  # a topological order of the forward edges
        for target in out[path]:
            if (path, target) in forward:
                rank[target] = max(rank[target], rank[path] + 1)
    return rank


def _findings_by_top(graph: ModelGraph, findings: tuple[Finding, ...]) -> dict[str, list]:
    known = {n.path for n in graph.nodes}
    found: dict[str, list[Finding]] = {}
    for finding in findings:
        path = finding.path
        while path and path not in known:
            path = path.rpartition("/")[0]
        if path:
            found.setdefault(graph.top(path), []).append(finding)
    return found


def _node(graph: ModelGraph, node: GraphNode, at: tuple[float, float], found: list) -> str:
    x, y = at
    dtype = node.shown_dtype()
    fill = dtype_color(dtype) if dtype and node.kind != "op" else PALETTE["ui"]["background2"]
    ink = text_on(fill) if node.kind != "op" else _INK
    inside = sum(1 for n in graph.nodes if n.path.startswith(node.path + "/"))
    what = "input" if node.kind == "input" else node.layer_class
    calls = f" · {node.calls} calls" if node.calls > 1 else ""
    calls += " · not called" if node.kind == "layer" and node.calls == 0 else ""
    # the dtype first, then what the node holds or how often it ran, its class last (clipped)
    sub = f"{dtype or '—'}{calls}" + (f" · {inside} inside" if inside else "") + f" · {what}"
    title = (
        f"{node.path}\n{node.layer_class}: compute {node.compute_dtype or '—'}, "
        f"variables {node.variable_dtype or '—'}"
    )
    rx = _H / 2 if node.kind == "input" else 6
    dash = ' stroke-dasharray="5 2" stroke-width="2"' if inside else ""
    badge = ""
    if found:
        severities = {f.severity for f in found}
        worst = next((s for s in _SEVERITIES if s in severities), found[0].severity)
        colour = PALETTE["severities"].get(worst, FG2)
        badge = (
            f'<g data-severity="{worst}"><title>{e(_finding_titles(found))}</title>'
            f'<circle cx="{x + _W - 4}" cy="{y + 4}" r="8" fill="{colour}"/>'
            f'<text x="{x + _W - 4}" y="{y + 8}" font-size="10" font-weight="700" '
            f'text-anchor="middle" fill="{text_on(colour)}">{len(found)}</text></g>'
        )
    return (
        f'<g class="dx-graph-node" data-path="{e(node.path)}" data-dtype="{e(dtype)}" '
        f'data-fill="{e(fill)}"><title>{e(title)}</title>'
        f'<rect x="{x}" y="{y}" width="{_W}" height="{_H}" rx="{rx}" fill="{fill}" '
        f'stroke="{dtype_color(dtype) if dtype else FG2}"{dash}/>'
        f'<text x="{x + 8}" y="{y + 15}" font-size="12" font-weight="600" fill="{ink}">'
        f"{e(clip(node.name, _NAME))}</text>"
        f'<text x="{x + 8}" y="{y + 30}" font-size="10" font-family="monospace" '
        f'fill="{ink}">{e(clip(sub, _SUB))}</text>{badge}</g>'
    )


def _finding_titles(found: list) -> str:
    return "\n".join(f"{f.severity}: {f.path}: {f.message}" for f in found)


def _edge(a: tuple[float, float], b: tuple[float, float], dtypes: tuple[str, ...]) -> str:
    """A tensor's edge, with its arrow: down from ``a``'s bottom to ``b``'s top to the next
    row, round the right side where it skips rows, a loop on the right into itself, round the
    left side back up where it closes a cycle."""
    colour = dtype_color(dtypes[0])
    text = " | ".join(dtypes)
    (ax, ay), (bx, by) = a, b
    if a == b:  # a layer fed its own output (a shared layer called on itself)
        x, y = ax + _W, ay + _H / 2
        ends = (x, y - 8), (x + 36, y - 22), (x + 36, y + 22), (x + 2, y + 8)
        lx, ly = x + 34, y + 4
    elif by > ay and by - ay <= _H + _GAP_Y:  # to the next row
        x1, y1, x2, y2 = ax + _W / 2, ay + _H, bx + _W / 2, by - 2
        ends = (x1, y1), (x1, y1 + 26), (x2, y2 - 26), (x2, y2)
        lx, ly = (x1 + x2) / 2, (y1 + y2) / 2 + 4
    elif by > ay:  # down past rows between: round the right side
        x1, y1, x2, y2 = ax + _W, ay + _H / 2, bx + _W + 2, by + _H / 2
        far = max(x1, x2) + 34
        ends = (x1, y1), (far, y1), (far, y2), (x2, y2)
        lx, ly = far - 8, (y1 + y2) / 2 + 4
    else:  # back up to a row above: round the left side
        x1, y1, x2, y2 = ax, ay + _H / 2, bx - 2, by + _H / 2
        near = min(x1, x2) - 40
        ends = (x1, y1), (near, y1), (near, y2), (x2, y2)
        lx, ly = near + 8, (y1 + y2) / 2 + 4
    (x1, y1), (c1x, c1y), (c2x, c2y), (x2, y2) = ends
    half = len(text) * 3.1 + 3
    return (
        f'<g class="dx-graph-edge" data-dtype="{e(text)}">'
        f'<path d="M{x1:.1f},{y1:.1f} C{c1x:.1f},{c1y:.1f} {c2x:.1f},{c2y:.1f} {x2:.1f},{y2:.1f}" '
        f'fill="none" stroke="{colour}" stroke-width="1.6"/>'
        f'<polygon points="{_arrow((c2x, c2y), (x2, y2))}" fill="{colour}"/>'
        f'<rect x="{lx - half:.1f}" y="{ly - 10:.1f}" width="{2 * half:.1f}" height="13" '
        f'rx="3" fill="{PALETTE["ui"]["background"]}" opacity="0.9"/>'
        f'<text x="{lx:.1f}" y="{ly:.1f}" {_LABEL} fill="{_INK}">{e(text)}</text></g>'
    )


def _arrow(control: tuple[float, float], tip: tuple[float, float]) -> str:
    """An arrowhead at ``tip``, pointing away from ``control``."""
    angle = math.atan2(tip[1] - control[1], tip[0] - control[0])
    wing = [
        (tip[0] - 7 * math.cos(angle + t), tip[1] - 7 * math.sin(angle + t)) for t in (0.45, -0.45)
    ]
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in (tip, *wing))
