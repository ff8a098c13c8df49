"""Build and call every catalog entry on the backend Keras imports; print one JSON report.

Run in a fresh process (the backend is fixed at import):
``KERAS_BACKEND=numpy python tests/keras_run/catalog_smoke.py layers|ops|probe``. Each entry gets
its default input: float32 for ``float`` inputs, int32 in ``range(INDEX_HIGH)`` for ``index``
inputs, lists of words for ``string`` inputs; ``ops.where`` gets a bool condition. An op gets
the catalog's inputs by role in its primary dtype (``op_calls``), as backend tensors; a
RuntimeWarning (a domain error) or a non-finite output fails it.
The report gives each entry's output dtype or error, and the seconds it took. ``probe`` runs
``dtype_explorer.keras_run.run_probe`` on each entry with the same default input dtypes instead.
"""

from __future__ import annotations

import json
import sys
import time
import traceback

import numpy as np


def _inputs(entry) -> list:
    from dtype_explorer.dtypes import sample
    from dtype_explorer.keras_run.catalog import INDEX_HIGH

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

    from dtype_explorer.keras_run.catalog import build_kwargs

    layer = getattr(keras.layers, entry.name)(**build_kwargs(entry.kwargs))
    xs = _inputs(entry)
    if entry.input_style == "list":
        return layer(xs)
    if entry.input_style == "positional":
        return layer(*xs)
    return layer(xs[0])


def _call_op(entry):
    """The op on its default inputs (primary dtype), as backend tensors; RuntimeWarnings
    (numpy's domain errors: invalid value, divide by zero) are raised."""
    import warnings

    import keras

    from dtype_explorer.keras_run.catalog import op_calls

    rng = np.random.default_rng(0)

    def tensor(spec, i):
        dtype = spec["dtype"] if i is None else entry.primary_dtype
        return keras.ops.convert_to_tensor(
            op_calls.values(spec["values"], tuple(spec["shape"]), dtype, rng), dtype=dtype
        )

    args, named = op_calls.build(entry.inputs, tensor)
    kwargs = dict(entry.kwargs)
    if entry.probe == "dtype_kwarg":
        kwargs["dtype"] = entry.primary_dtype
    with warnings.catch_warnings(), np.errstate(all="raise", under="ignore"):
        warnings.simplefilter("error", RuntimeWarning)
        out = op_calls.call(entry.name, args, named, kwargs)
    leaves = [leaf for leaf in keras.tree.flatten(out) if hasattr(leaf, "dtype")]
    if not entry.name.endswith(("empty", "empty_like")):
        for leaf in leaves:
            arr = np.asarray(keras.ops.convert_to_numpy(leaf))
            if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
                raise FloatingPointError(f"non-finite output from finite input: {arr}")
    return out


def _first_dtype(output) -> str:
    import keras

    first = keras.tree.flatten(output)[0]
    if isinstance(first, (bool, int, float, str)):
        return f"python_{type(first).__name__}"
    return keras.backend.standardize_dtype(first.dtype)


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
    if hasattr(entry, "default_dtypes"):  # losses and metrics: their roles' dtypes
        return entry.default_dtypes
    if entry.kind == "op" and entry.name != "ops.where":
        return (entry.primary_dtype,)
    if entry.name == "ops.where":
        return ("bool", "float32", "float32")
    named = {"index": "int32", "string": "string"}
    return tuple(named.get(role, "float32") for role in entry.roles) or ("float32",)


def _probe(entries) -> dict:
    import keras

    from dtype_explorer.keras_run import run_probe as run
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
        report = _probe([*catalog.layers(), *catalog.ops(), *catalog.objectives()])
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
