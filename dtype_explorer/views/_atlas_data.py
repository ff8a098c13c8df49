"""What a target page of the atlas site carries, compact (``views/_atlas.py`` writes it;
``js/src/atlas.js`` reads it back): the default layer survey's site is a few bytes a run of
grid and a few tens of run, not the ~860 bytes of pre-rendered grids and whole runs.

The page's **grids** (:func:`grid_data`) are a list of cells, each a row of indices into the
page's tables (input dtypes, policies, run names, classes, labels): ``[dtype, policy, class,
label, class of run 0, label of run 0, ...]``, ``-1`` where a run is absent. The script draws
the two heatmaps from it (``drawGrids``), each cell coloured by its class (``ax-k-<class>``,
the one palette's fill in the site's stylesheet). Its columns are the policies the target was
probed under: an op of an atlas of layers and ops has one (``Atlas.op_policy``: it reads none),
headed with ``policy_note`` (``records.ANY_POLICY``), not empty columns for the others. Its
rows are the input dtypes the target was probed on: a layer of such an atlas has no rows on the
weak Python scalars (``Atlas.op_dtypes``), ``dtype_note`` saying why (``records.ARRAYS_ONLY``);
an op has them.

The target's **data file** (:func:`target_data`) holds each distinct run once, as a row of
its fields in :data:`RUN_FIELDS`' order, each text an index into the file's ``strings``,
each cast-path step an index into its ``steps`` (each distinct step once, its fields in
:data:`STEP_FIELDS`' order); trailing absent fields are left off. A cell is ``[input dtype,
policy, compute dtype, class, run 0, run 1, ...]``: strings, then the place of each run named
in ``run_names`` (``-1``: none). ``expandCells`` puts every run back whole, as the record
dumps it (``None`` left out). Left out of the file: the cast path's text (``path_text``: the
page draws the path from its steps) and the target's name in each cell (the file's).

>>> table = Table()
>>> table("float32"), table("int8"), table("float32"), table.values
(0, 1, 0, ['float32', 'int8'])
"""

from __future__ import annotations

import json
from typing import Any

from dtype_explorer.records import ANY_POLICY, ARRAYS_ONLY, Atlas, AtlasCell
from dtype_explorer.views._markup import short

#: A run's fields in a data file's rows, each with its kind: ``s`` text (an index into
#: ``strings``), ``S`` a list of texts, ``p`` the cast path (indices into ``steps``), ``v`` the
#: value as it is (a number, a flag).
RUN_FIELDS: dict[str, str] = {
    "status": "s",
    "outcome": "s",
    "classification": "s",
    "verdict": "s",
    "device": "s",
    "output_dtype": "s",
    "documented_dtype": "s",
    "declared_dtype": "s",
    "cast_path": "p",
    "output_dtypes": "S",
    "trace_ops": "v",
    "trace_flags": "S",
    "error_type": "s",
    "error_where": "s",
    "error_message": "s",
    "first_change": "s",
    "first_change_note": "s",
    "first_change_at": "s",
    "first_nonfinite": "s",
}
#: A cast-path step's fields in a data file's ``steps``, with their kinds.
STEP_FIELDS: dict[str, str] = {
    "stage": "s",
    "dtype": "s",
    "note": "s",
    "index": "v",
    "name": "s",
    "changed": "v",
}
#: What a data file leaves out of a run (the page never shows it; ``atlas.json`` has it).
LEFT_OUT = frozenset({"path_text"})


class Table:
    """Distinct values in the order first met; calling it gives a value's place."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._place: dict[Any, int] = {}

    def __call__(self, value: Any) -> int:
        if value not in self._place:
            self._place[value] = len(self.values)
            self.values.append(value)
        return self._place[value]


def _row(values: dict[str, Any], fields: dict[str, str], strings: Table, steps: Table) -> list:
    """``values`` as a row of ``fields``, trailing absent fields left off."""
    row: list[Any] = []
    for name, kind in fields.items():
        value = values.get(name)
        if value is None:
            row.append(None)
        elif kind == "s":
            row.append(strings(value))
        elif kind == "S":
            row.append([strings(v) for v in value])
        elif kind == "p":
            row.append([steps(_step(s, strings)) for s in value])
        else:
            row.append(value)
    while row and row[-1] is None:
        row.pop()
    return row


def _step(step: dict[str, Any], strings: Table) -> str:
    # a step's row as its key in ``steps`` (JSON text: hashable, and the same step once)
    return json.dumps(_row(step, STEP_FIELDS, strings, Table()), separators=(",", ":"))


def target_data(atlas: Atlas, target: str) -> dict[str, Any]:
    """What ``target``'s data file holds (the module's docstring says how it is laid out)."""
    strings, steps, runs = Table(), Table(), Table()
    cells = atlas.cells_of(target)
    names = sorted({name for cell in cells for name in cell.runs})
    rows = []
    for cell in cells:
        places = []
        for name in names:
            run = cell.runs.get(name)
            if run is None:
                places.append(-1)
                continue
            dumped = run.model_dump(mode="json", exclude=set(LEFT_OUT))
            row = _row(dumped, RUN_FIELDS, strings, steps)
            places.append(runs(json.dumps(row, separators=(",", ":"))))
        head = (cell.input_dtype, cell.policy, cell.compute_dtype, cell.classification)
        rows.append([strings(v) for v in head] + places)
    return {
        "target": target,
        "strings": strings.values,
        "run_fields": list(RUN_FIELDS),
        "run_kinds": "".join(RUN_FIELDS.values()),
        "step_fields": list(STEP_FIELDS),
        "step_kinds": "".join(STEP_FIELDS.values()),
        "steps": [json.loads(s) for s in steps.values],
        "runs": [json.loads(r) for r in runs.values],
        "run_names": names,
        "cells": rows,
    }


def cell_label(cell: AtlasCell) -> str:
    """What a cell of the every-backend grid says: the outcome all its runs share (``raises``
    for any error), ``≠`` where they differ."""
    outcomes = {run.outcome for run in cell.runs.values()}
    if len(outcomes) != 1:
        return "≠"
    (outcome,) = outcomes
    return "raises" if outcome.startswith("raises") else short(outcome)


def grid_data(atlas: Atlas, target: str) -> dict[str, Any]:
    """``target``'s two heatmaps as the page's script draws them (the module's docstring)."""
    cells = atlas.cells_of(target)
    classes, labels = Table(), Table()
    dtypes = {d: i for i, d in enumerate(atlas.dtypes_of(target))}
    policies = {p: i for i, p in enumerate(atlas.policies_of(target))}
    left_out = [d for d in atlas.input_dtypes if d not in dtypes]  # a layer's weak scalars
    names = sorted({name for cell in cells for name in cell.runs})
    rows = []
    for cell in cells:
        row = [dtypes[cell.input_dtype], policies[cell.policy]]
        row += [classes(cell.classification), labels(cell_label(cell))]
        for name in names:
            run = cell.runs.get(name)
            if run is None:
                row += [-1, -1]
                continue
            label = "raises" if run.status != "ok" else short(run.outcome)
            row += [classes(run.classification), labels(label)]
        rows.append(row)
    return {
        "dtypes": list(dtypes),
        # a layer of an atlas of layers and ops: no rows on the weak Python scalars
        "dtype_note": f"no {', '.join(left_out)}: {ARRAYS_ONLY}" if left_out else None,
        "policies": list(policies),
        # an op of an atlas of layers and ops: one column, said to stand for every policy
        "policy_note": ANY_POLICY if list(policies) == [atlas.op_policy] else None,
        "runs": names,
        "classes": classes.values,
        "labels": labels.values,
        "cells": rows,
    }
