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
import pytest
from keras.src.backend.common import dtypes as keras_dtypes

from dtype_explorer import catalog
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import ProbeSpec

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "tests" / "engine" / "catalog_smoke.py"
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


@pytest.mark.parametrize(("typo", "meant"), [("Dens", "Dense"), ("ops.ad", "ops.add")])
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


def test_op_entries_are_well_formed():
    listed = {e.name for e in catalog.ops() if e.input_style == "list"}
    assert listed == {"ops.concatenate", "ops.stack"}
    for e in catalog.ops():
        assert e.input_style in {"positional", "list"}, e.name
        assert callable(getattr(keras.ops, e.function_name)), e.name
        assert e.rule in {"promote", "promote-float", "bool", "index", "none"}, e.name
        assert e.roles in ((), ("any",) * e.arity), e.name
        assert json.loads(json.dumps(e.kwargs)) == e.kwargs, e.name
    assert catalog.entry("ops.where").arity == 3


def _declared(e: catalog.OpEntry, dtypes: tuple[str, ...]) -> str:
    fn = getattr(keras.ops, e.function_name)
    xs = [keras.KerasTensor(s, dtype=d) for s, d in zip(e.shapes, dtypes)]
    out = fn(xs, **e.kwargs) if e.input_style == "list" else fn(*xs, **e.kwargs)
    return keras.tree.flatten(out)[0].dtype


def _by_rule(rule: str, dtypes: tuple[str, ...]) -> str:
    if rule == "promote":
        return keras_dtypes.result_type(*dtypes)
    if rule == "promote-float":
        return keras_dtypes.result_type(*dtypes, float)
    return {"bool": "bool", "index": "int32"}[rule]


@pytest.mark.parametrize("e", [e for e in catalog.ops() if e.rule != "none"], ids=lambda e: e.name)
def test_op_rule_matches_what_keras_declares(e):
    """The rule restates compute_output_spec (bool inputs and int8 matmul aside: see notes)."""
    combos = [("int8",), ("uint8",), ("int32",), ("float16",), ("bfloat16",), ("float32",)]
    combos += [("int8", "float16"), ("int32", "float16"), ("uint8", "int8"), ("int16", "bfloat16")]
    for combo in combos:
        dtypes = tuple(combo[i % len(combo)] for i in range(e.arity))
        if e.name == "ops.where":
            dtypes = ("bool", *dtypes[1:])
        if e.name == "ops.matmul" and dtypes == ("int8", "int8"):
            continue
        assert _declared(e, dtypes) == _by_rule(e.rule, dtypes), f"{e.name}{dtypes}"


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
    report = _run_smoke("ops", "numpy")
    assert set(report) == {e.name for e in catalog.ops()}
    failed = {name: r["error"] for name, r in report.items() if not r["ok"]}
    assert not failed, failed
    assert report["ops.greater"]["dtype"] == "bool"
    assert report["ops.argmax"]["dtype"] == "int32"


def test_probe_runs_every_entry_on_numpy():
    """Every catalog entry probes through the engine (``dtype_explorer.engine.run_probe``)."""
    report = _run_smoke("probe", "numpy")
    assert set(report) == {e.name for e in [*catalog.layers(), *catalog.ops()]}
    broken = {n: r for n, r in report.items() if r["status"] in {"crashed", "invalid"}}
    assert not broken, broken
