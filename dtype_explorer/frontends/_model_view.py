"""The widget's model view of an audit: the ``audit`` trait (``widget_contract.json``), made
once from the ``AuditReport``: its rows as the tables show them, its findings, its graph.

The page lays the graph out (dagre, bundled into the widget) and computes no dtype: every
dtype it shows is here, from the record. Each row carries the layer's ``path`` and ``call``
(its call index), which is how a node of the graph finds its rows.

>>> import keras, numpy as np
>>> import dtype_explorer as dx
>>> inputs = keras.Input((3,), dtype="float64", name="x")
>>> model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(inputs), name="m")
>>> view = model_view(dx.check_model(model))
>>> [(r["path"], r["received"]) for r in view["rows"]]
[('m', 'float64'), ('m/dense', 'float32')]
>>> [(e["source"], e["target"], e["dtype"]) for e in view["graph"]["edges"]]
[('m/x', 'm/dense', 'float64')]
"""

from __future__ import annotations

from typing import Any

from dtype_explorer.errors import InvalidSpecError, received
from dtype_explorer.records import ROW_COLUMNS, AuditReport


def model_view(report: Any) -> dict[str, Any]:
    """The ``audit`` trait for ``report``.

    Args:
        report: an ``AuditReport`` (``dx.check_model``'s, ``%dtype_check``'s).

    Returns:
        ``{summary, model, backend, keras, columns, rows, findings, graph, notes}``: rows
        as :meth:`LayerCall.row` gives them with ``path``, ``call`` and ``depth``; ``graph``
        the report's ``ModelGraph`` as a dict (``None`` where the audit drew none: its notes
        say why).

    Raises:
        InvalidSpecError: ``report`` is not an ``AuditReport``.
    """
    if not isinstance(report, AuditReport):
        raise InvalidSpecError(
            "audit= takes the AuditReport of dx.check_model (or %dtype_check); "
            f"received: {received(report)} ({type(report).__name__})"
        )
    graph = report.graph
    return {
        "summary": report.summary(),
        "model": report.model,
        "backend": report.backend,
        "keras": report.keras,
        "columns": list(ROW_COLUMNS),
        "rows": [
            {**call.row(), "call": call.call_index, "depth": call.depth} for call in report.layers
        ],
        "findings": [
            {
                "severity": f.severity,
                "kind": f.kind,
                "path": f.path,
                "message": f.message,
                "fix": f.fix,
            }
            for f in report.findings
        ],
        "graph": None if graph is None else graph.to_dict(),
        "notes": [*report.notes, *(graph.notes if graph is not None else ())],
    }
