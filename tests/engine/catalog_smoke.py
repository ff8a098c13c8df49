"""Build and call every catalog entry on the backend Keras imports; print one JSON report.

Run in a fresh process (the backend is fixed at import):
``KERAS_BACKEND=numpy python tests/engine/catalog_smoke.py layers|ops|probe``. Each entry gets its
default input: float32 for ``float`` inputs, int32 in ``range(INDEX_HIGH)`` for ``index``
inputs, lists of words for ``string`` inputs; ``ops.where`` gets a bool condition.
The report gives each entry's output dtype or error, and the seconds it took. ``probe`` runs
``dtype_explorer.engine.run_probe`` on each entry with the same default input dtypes instead.
"""

from __future__ import annotations

import json
import sys
import time
import traceback

import numpy as np


def _inputs(entry) -> list:
    from dtype_explorer.dtypes import sample
    from dtype_explorer.engine.catalog import INDEX_HIGH

    rng = np.random.default_rng(0)
    made = []
    for i, shape in enumerate(entry.shapes):
        role = entry.roles[i] if entry.roles else "float"
        if role == "index":
            made.append(rng.integers(0, INDEX_HIGH, size=shape).astype("int32"))
        elif role == "string":
            made.append(sample("string", shape).tolist())
        elif entry.name == "ops.where" and i == 0:
            made.append(sample("bool", shape))
        else:
            made.append(sample("float32", shape))
    return made


def _call_layer(entry):
    import keras

    from dtype_explorer.engine.catalog import build_kwargs

    layer = getattr(keras.layers, entry.name)(**build_kwargs(entry.kwargs))
    xs = _inputs(entry)
    if entry.input_style == "list":
        return layer(xs)
    if entry.input_style == "positional":
        return layer(*xs)
    return layer(xs[0])


def _call_op(entry):
    from keras import ops

    fn = getattr(ops, entry.function_name)
    xs = _inputs(entry)
    if entry.input_style == "list":
        return fn(xs, **entry.kwargs)
    return fn(*xs, **entry.kwargs)


def _first_dtype(output) -> str:
    import keras

    return keras.backend.standardize_dtype(keras.tree.flatten(output)[0].dtype)


def _smoke(entries, call) -> dict:
    report = {}
    for entry in entries:
        start = time.perf_counter()
        try:
            report[entry.name] = {"ok": True, "dtype": _first_dtype(call(entry))}
        except Exception as exc:  # report every failure, keep going
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            report[entry.name] = {"ok": False, "error": last[:500]}
        report[entry.name]["seconds"] = round(time.perf_counter() - start, 2)
    return report


def _default_dtypes(entry) -> tuple[str, ...]:
    if entry.name == "ops.where":
        return ("bool", "float32", "float32")
    named = {"index": "int32", "string": "string"}
    return tuple(named.get(role, "float32") for role in entry.roles) or ("float32",)


def _probe(entries) -> dict:
    import keras

    from dtype_explorer.engine import run_probe as run
    from dtype_explorer.records import ProbeSpec

    report = {}
    for entry in entries:
        spec = ProbeSpec(
            target=entry.name, input_dtypes=_default_dtypes(entry), backend=keras.backend.backend()
        )
        result = run(spec)
        report[entry.name] = {
            "status": result.status,
            "dtype": result.output_dtype,
            "error": result.error.message[:300] if result.error else None,
        }
    return report


def main(mode: str) -> None:
    from dtype_explorer import catalog

    if mode == "layers":
        report = _smoke(catalog.layers(), _call_layer)
    elif mode == "ops":
        report = _smoke(catalog.ops(), _call_op)
    else:
        report = _probe([*catalog.layers(), *catalog.ops()])
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
