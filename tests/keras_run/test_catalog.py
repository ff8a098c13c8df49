"""The catalog covers every public ``keras.layers`` class, and every entry really runs."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import keras
import numpy as np
import pytest
from keras.src.backend.common import dtypes as keras_dtypes

from dtype_explorer import catalog
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import make_spec, run_probe
from dtype_explorer.keras_run.catalog import op_calls
from dtype_explorer.records import ProbeSpec

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "tests" / "keras_run" / "catalog_smoke.py"
GROUPS = {
    "core", "convolution", "pooling", "normalization", "recurrent", "attention", "merging",
    "reshaping", "regularization", "activation", "preprocessing-numerical",
    "preprocessing-categorical", "preprocessing-text", "preprocessing-image",
    "preprocessing-audio", "rnn-cells", "wrappers", "other",
}  # fmt: skip


def _public_layer_classes() -> dict[type, set[str]]:
    classes: dict[type, set[str]] = {}
    for name in dir(keras.layers):
        obj = getattr(keras.layers, name)
        if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer):
            classes.setdefault(obj, set()).add(name)
    return classes


def _run_smoke(mode: str, backend: str) -> dict:
    env = {
        **os.environ,
        "KERAS_BACKEND": backend,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, str(SMOKE), mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_public_layer_class_is_catalogued():
    classes = _public_layer_classes()
    entries = catalog.layers(include_skipped=True)
    by_class = {getattr(keras.layers, e.name): e for e in entries}
    assert len(entries) == len(by_class) == len(classes)  # one entry per class, none twice
    for cls, names in classes.items():
        assert cls in by_class, f"keras.layers.{cls.__name__} has no catalog entry"
        e = by_class[cls]
        assert {e.name, *e.aliases} == names, f"{e.name}: public names {sorted(names)}"


def test_every_alias_resolves_to_the_same_class():
    aliases = [(e, a) for e in catalog.layers(include_skipped=True) for a in e.aliases]
    assert ("Conv2D", "Convolution2D") in [(e.name, a) for e, a in aliases]
    for e, alias in aliases:
        assert getattr(keras.layers, alias) is getattr(keras.layers, e.name)
        assert catalog.entry(alias) is e


@pytest.mark.parametrize(
    ("typo", "meant"), [("Dens", "Dense"), ("ops.ad", "ops.pad"), ("ops.sofmax", "ops.softmax")]
)
def test_misspelt_target_names_the_closest_match(typo, meant):
    with pytest.raises(InvalidSpecError, match=f"did you mean '{meant}'"):
        catalog.entry(typo)


def test_layer_entries_are_well_formed():
    for e in catalog.layers(include_skipped=True):
        assert e.group in GROUPS, e.name
        assert e.contract in typing.get_args(catalog.Contract), e.name
        assert e.input_style in {"single", "list", "positional"}, e.name
        assert len(e.roles) == e.arity and set(e.roles) <= {"float", "index", "string"}, e.name
        assert e.shapes[0][0] == 2, f"{e.name}: a batch of 2 comes first"
        assert (e.input_style == "single") == (e.arity == 1), e.name
        assert e.skip is None or len(e.skip) > 20, f"{e.name}: say why it is skipped"
        assert json.loads(json.dumps(e.kwargs)) == e.kwargs, f"{e.name}: kwargs must be JSON"
        ProbeSpec(target=e.name, kwargs=e.kwargs)  # the data model accepts them


OP_NAMESPACES = ("ops", "ops.numpy", "ops.nn", "ops.linalg", "ops.image")
OP_RULES = {"promote", "promote-float", "bool", "index", "dtype-arg", "none"}


def _public_callables(spaces: dict[str, object]) -> dict[int, tuple[object, set[str]]]:
    """Every public callable of each ``space -> module``, by identity, with all its names."""
    found: dict[int, tuple[object, set[str]]] = {}
    for space, module in spaces.items():
        for name in dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or inspect.ismodule(obj) or not callable(obj):
                continue
            found.setdefault(id(obj), (obj, set()))[1].add(f"{space}.{name}")
    return found


def _public_ops() -> dict[int, tuple[object, set[str]]]:
    """Every public callable of ``keras.ops`` and its namespaces."""
    return _public_callables({space: op_calls.resolve(space) for space in OP_NAMESPACES})


def test_every_public_op_is_catalogued():
    """A new keras.ops function (in any namespace) without an entry fails here."""
    public = _public_ops()
    entries = catalog.ops(include_skipped=True)
    assert len(entries) == len(public) > 340  # one entry per function: aliases counted once
    by_id = {id(op_calls.resolve(e.name)): e for e in entries}
    for obj, names in public.values():
        assert id(obj) in by_id, f"keras.{sorted(names)[0]} has no catalog entry"
        e = by_id[id(obj)]
        assert {e.name, *e.aliases} == names, f"{e.name}: public names {sorted(names)}"
        for name in names:  # every name resolves to the one entry
            assert catalog.entry(name) is e


def test_op_aliases_resolve_by_every_name():
    assert catalog.entry("ops.swish") is catalog.entry("ops.nn.silu") is catalog.entry("ops.silu")
    assert catalog.entry("ops.nn.softmax").name == "ops.softmax"
    assert catalog.entry("ops.numpy.add").name == "ops.add"
    assert catalog.entry("ops.image.resize").group == "ops.image"
    groups = catalog.groups()
    assert {"ops", "ops.numpy", "ops.nn", "ops.linalg", "ops.image"} <= set(groups)
    listed = [n for g, names in groups.items() if g.startswith("ops") for n in names]
    assert len(listed) == len(set(listed)) == len(catalog.ops())


def test_op_entries_are_well_formed():
    listed = {e.name for e in catalog.ops() if e.input_style == "list"}
    assert {"ops.concatenate", "ops.stack"} <= listed
    for e in catalog.ops(include_skipped=True):
        assert e.input_style in {"positional", "list"}, e.name
        assert callable(op_calls.resolve(e.name)), e.name
        assert e.rule in OP_RULES, e.name
        assert e.roles == ("any",) * e.arity, e.name
        assert len(e.probed_roles) == e.arity, e.name
        assert e.probe in {"inputs", "dtype_kwarg", "none"}, e.name
        assert (e.arity > 0) == (e.probe == "inputs"), e.name
        assert e.category and e.subcategory, e.name
        assert json.loads(json.dumps(e.kwargs)) == e.kwargs, e.name
        assert set(e.references) == {"numpy", "jax", "torch", "tensorflow"}, e.name
        assert e.skip is None or len(e.skip) > 20, f"{e.name}: say why it is skipped"
    assert catalog.entry("ops.where").arity == 3
    assert catalog.entry("ops.matmul").shapes[0][-1] == catalog.entry("ops.matmul").shapes[1][0]


def test_op_samples_are_valid_for_the_op():
    """Divisors are never 0, sqrt/log get positive values, arccos stays in [-1, 1], linalg
    gets square (invertible) matrices."""
    rng = np.random.default_rng(0)

    def probed_values(name: str, dtype: str) -> list[np.ndarray]:
        e = catalog.entry(name)
        return [
            op_calls.values(spec["values"], tuple(spec["shape"]), dtype, rng)
            for spec in op_calls.probed(e.inputs)
        ]

    for dtype in ("int8", "uint8", "int32", "float16", "bfloat16", "float32"):
        for name in ("ops.divide", "ops.mod", "ops.floor_divide", "ops.fmod"):
            assert np.all(probed_values(name, dtype)[1] != 0), (name, dtype)
        for name in ("ops.sqrt", "ops.log", "ops.rsqrt", "ops.log2"):
            assert np.all(probed_values(name, dtype)[0].astype(np.float64) > 0), (name, dtype)
        unit = probed_values("ops.arccos", dtype)[0].astype(np.float64)
        assert np.all(np.abs(unit) < 1), dtype
    for name in ("ops.linalg.inv", "ops.linalg.det", "ops.linalg.solve", "ops.linalg.cholesky"):
        matrix = probed_values(name, "float32")[0]
        assert matrix.shape[-1] == matrix.shape[-2], name
        assert abs(np.linalg.det(matrix.astype(np.float64))) > 0.5, name
    spd = probed_values("ops.linalg.cholesky", "float64")[0]
    assert np.allclose(spd, np.swapaxes(spd, -1, -2)) and np.all(np.linalg.eigvalsh(spd) > 0)


def test_edge_preset_keeps_edge_values():
    from dtype_explorer import dtypes

    assert "edge" in dtypes.PRESETS
    edge = dtypes.sample("int8", (2, 3), preset="edge").ravel().tolist()
    assert {0, -1, 127, -128} <= set(edge)
    assert {0.0, 65504.0, -65504.0} <= set(dtypes.sample("float16", (4,), preset="edge").tolist())
    r = run_probe(make_spec("ops.divide", "int8", backend=keras.backend.backend(), values="edge"))
    assert r.status == "ok" and r.numerics.nonfinite_from_finite > 0  # x / 0 kept on purpose


def _public_objectives() -> dict[int, tuple[object, set[str]]]:
    """Every public callable of ``keras.losses`` and ``keras.metrics``."""
    return _public_callables({space: getattr(keras, space) for space in ("losses", "metrics")})


def test_every_public_loss_and_metric_is_catalogued():
    """A new keras.losses or keras.metrics name without an entry fails here."""
    public = _public_objectives()
    entries = catalog.objectives(include_skipped=True)
    assert len(entries) == len(public) > 90
    for obj, names in public.values():
        e = catalog.entry(sorted(names)[0])
        assert catalog.objective_calls.resolve(e) is obj, names
        assert {e.name, *e.aliases} == names, f"{e.name}: public names {sorted(names)}"
        assert e.skip is None or len(e.skip) > 15, e.name
    assert catalog.entry("metrics.mean_squared_error").name == "losses.mean_squared_error"
    assert catalog.entry("losses.Loss").skip  # abstract: listed with its reason
    kinds = {e.kind for e in catalog.objectives()}
    assert kinds == {"loss", "loss-function", "metric", "metric-function"}


def _declared(e: catalog.OpEntry, dtypes: tuple[str, ...]) -> str:
    def tensor(spec, i):
        return keras.KerasTensor(
            tuple(spec["shape"]), dtype=spec["dtype"] if i is None else dtypes[i]
        )

    args, named = op_calls.build(e.inputs, tensor)
    out = op_calls.call(e.name, args, named, e.kwargs)
    return keras.tree.flatten(out)[0].dtype


def _by_rule(rule: str, dtypes: tuple[str, ...]) -> str:
    if rule == "promote":
        return keras_dtypes.result_type(*dtypes)
    if rule == "promote-float":
        return keras_dtypes.result_type(*dtypes, float)
    return {"bool": "bool", "index": "int32"}[rule]


RULED = [e for e in catalog.ops() if e.rule in {"promote", "promote-float", "bool", "index"}]


def test_rules_cover_the_classes_keras_states_them_for():
    by_rule = {rule: {e.short_name for e in RULED if e.rule == rule} for rule in OP_RULES}
    assert {"add", "maximum", "abs", "negative", "clip", "matmul"} <= by_rule["promote"]
    assert {"sqrt", "exp", "sin", "divide", "log1p"} <= by_rule["promote-float"]
    assert {"greater", "equal", "isnan", "logical_and"} <= by_rule["bool"]
    assert {"argmax", "argmin", "argsort"} <= by_rule["index"]
    assert catalog.entry("ops.zeros").rule == "dtype-arg"
    assert catalog.entry("ops.image.resize").rule == "none"  # Keras states no rule: undocumented


def test_op_rule_matches_what_keras_declares():
    """Every rule restates compute_output_spec (bool inputs and int8 matmul aside: see notes)."""
    combos = [("int8",), ("uint8",), ("int32",), ("float16",), ("bfloat16",), ("float32",)]
    combos += [("int8", "float16"), ("int32", "float16"), ("uint8", "int8"), ("int16", "bfloat16")]
    failures = []
    for e in RULED:
        for combo in combos:
            dtypes = tuple(combo[i % len(combo)] for i in range(e.arity))
            if e.name == "ops.where":
                dtypes = ("bool", *dtypes[1:])
            if e.name == "ops.matmul" and dtypes == ("int8", "int8"):
                continue
            try:
                declared = _declared(e, dtypes)
            except Exception:  # an int-only or float-only op: no statement for this combo
                continue
            if declared != _by_rule(e.rule, dtypes):
                failures.append(f"{e.name}{dtypes}: declared {declared}, rule {e.rule}")
    assert not failures, failures


@pytest.fixture(
    scope="module", params=["numpy", pytest.param("jax", marks=pytest.mark.slow)]
)  # jax compiles every op it meets: minutes on a busy two-core machine
def layer_smoke(request) -> tuple[str, dict]:
    return request.param, _run_smoke("layers", request.param)


def test_every_layer_entry_builds_and_calls(layer_smoke):
    backend, report = layer_smoke
    assert set(report) == {e.name for e in catalog.layers()}
    failed = {name: r["error"] for name, r in report.items() if not r["ok"]}
    assert not failed, f"on {backend}: {failed}"


def test_layer_smoke_sees_real_dtypes(layer_smoke):
    _, report = layer_smoke
    assert report["Dense"]["dtype"] == "float32"
    assert report["Embedding"]["dtype"] == "float32"  # int indices in, float vectors out
    assert report["Discretization"]["dtype"] == "int32"


def test_every_op_entry_calls_on_numpy():
    """Every op, its default inputs in its primary dtype: no crash, no domain error (numpy's
    RuntimeWarnings are errors in the smoke), no inf/NaN from finite inputs."""
    report = _run_smoke("ops", "numpy")
    assert set(report) == {e.name for e in catalog.ops()}
    failed = {
        name: r["error"]
        for name, r in report.items()
        if not r["ok"] and "numpy" not in catalog.entry(name).backend_limits
    }
    assert not failed, failed
    assert report["ops.greater"]["dtype"] == "bool"
    assert report["ops.argmax"]["dtype"] == "int32"
    assert report["ops.size"]["dtype"] == "python_int"


def test_probe_runs_every_entry_on_numpy():
    """Every catalog entry probes through the engine (``dtype_explorer.keras_run.run_probe``)."""
    report = _run_smoke("probe", "numpy")
    every = [*catalog.layers(), *catalog.ops(), *catalog.objectives()]
    assert set(report) == {e.name for e in every}
    broken = {n: r for n, r in report.items() if r["status"] in {"crashed", "invalid"}}
    assert not broken, broken
    errors = {
        n: r
        for n, r in report.items()
        if r["status"] == "error" and "numpy" not in getattr(catalog.entry(n), "backend_limits", {})
    }
    assert not errors, errors
