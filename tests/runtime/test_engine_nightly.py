"""Keras's main as an engine (issue 40 item 3): ``engine="nightly"`` pinned to the exact
``keras-nightly`` build the package index lists, "is it fixed on main?" as one call
(``dx.probe(..., engine=[installed, nightly])``), ``dx.bisect`` from 3.15.1 to the nightly, and
the quantize audit beside Keras's main's own ``model.quantization_summary()``.

The case: ``ops.leaky_relu`` on an int32 input on numpy. Keras 3.15.1 answers int32 (a float
activation truncated to integers); the nightly of 2026-10-27 answers float32. Both are run raw
beside the tool, each in a fresh process: the installed Keras, and the nightly's site alone on
the path (``tests.on_backend.json_on(site=...)``). The engine is made once per machine
(``keras_nightly_engine``, tests/conftest.py); making it needs the package index: when it is
unreachable these tests fail, they never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from packaging.version import Version
from typer.testing import CliRunner

import dtype_explorer as dx
from dtype_explorer.analyses import index_releases, resolve_versions
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.frontends.cli import app
from dtype_explorer.records import ProbeSpec, engine_spec, keras_summary_rows
from dtype_explorer.runtime import engines
from dtype_explorer.versions import library_version
from tests.on_backend import json_on

pytestmark = pytest.mark.timeout(900)

INSTALLED = library_version("keras")
QUESTION = {"target": "ops.leaky_relu", "input_dtype": "int32", "backend": "numpy"}
#: ops.leaky_relu on int32, raw: the Keras that ran and its output's dtype, as one JSON line.
RAW = """
import json, numpy as np, keras
y = keras.ops.leaky_relu(np.array([[-2, 0, 3], [4, -1, 1]], dtype="int32"))
print(json.dumps({"keras": keras.__version__, "dtype": keras.backend.standardize_dtype(y.dtype)}))
"""


@pytest.fixture(scope="module", autouse=True)
def _engine_workers_stopped():
    """Other modules count the pool's workers: the nightly's are stopped after this one."""
    yield
    for engine in engines.list():
        dx.pool._stop_engine(engine.spec)


@pytest.fixture(scope="module")
def raw(keras_nightly_engine) -> dict[str, dict[str, str]]:
    """Raw Keras's answers: the installed release's, and the nightly's from its site alone."""
    return {
        "installed": json_on("numpy", RAW),
        "nightly": json_on("numpy", RAW, site=keras_nightly_engine.site),
    }


def _pip_lists_newest_nightly() -> str:
    """The newest keras-nightly build, as pip itself lists it (``--pre``: dev builds only)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "--pre", "keras-nightly"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("Available versions:"))
    return str(max(Version(v.strip()) for v in line.partition(":")[2].split(",")))


def test_nightly_names_are_checked_and_never_kept_moving():
    build = "keras-nightly==3.16.0.dev2026102704"
    assert engine_spec("nightly") == engine_spec(" keras-nightly ") == "nightly"
    assert engine_spec("keras_nightly == 3.16.0.dev2026102704") == build
    with pytest.raises(InvalidSpecError) as said:
        engine_spec("nightlyy")
    assert "did you mean 'nightly'?" in str(said.value)
    assert "'keras-nightly==3.X.Y.devYYYYMMDDHH'" in str(said.value)
    with pytest.raises(InvalidSpecError, match=r"a dev build is named keras-nightly==3\.16"):
        engine_spec("keras==3.16.0.dev2026102704")
    with pytest.raises(ValueError, match="a probe's engine names one build"):
        ProbeSpec(target="Dense", engine="nightly")  # a cache key never names a moving target
    assert '"engine":"keras-nightly==3.16.0.dev2026102704"' in (
        ProbeSpec(target="Dense", engine=build).cache_key()
    )


def test_nightly_pins_to_the_newest_build_and_a_missing_build_names_the_closest(
    keras_nightly_engine,
):
    newest = _pip_lists_newest_nightly()
    assert engines.pin("nightly") == f"keras-nightly=={newest}"
    assert Version(newest) >= Version(keras_nightly_engine.version)
    span = resolve_versions(f"{INSTALLED}..nightly")  # good="3.15.1", bad="nightly"
    assert span[0] == INSTALLED and span[-1] == newest
    assert list(span[1:]) == sorted(span[1:], key=Version)
    assert all(Version(v).is_devrelease and Version(v) > Version(INSTALLED) for v in span[1:])
    root = engines.root()
    with pytest.raises(engines.EngineError) as said:
        engines.create("keras-nightly==3.16.0.dev2026102799", progress=False)
    assert "no such build" in str(said.value) and "3.16.0.dev2026102704" in str(said.value)
    assert not [p for p in root.iterdir() if "2026102799" in p.name]


def test_offline_nightly_is_the_newest_created_here_said_in_a_warning(
    keras_nightly_engine, monkeypatch
):
    offline = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}
    offline |= {"PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "", "PIP_RETRIES": "0"}
    for name, value in offline.items():
        monkeypatch.setenv(name, value)
    index_releases.cache_clear()  # asked once per process: ask again, offline
    try:
        with pytest.warns(UserWarning, match="could not be reached"):
            pinned = engines.pin("nightly")
    finally:
        index_releases.cache_clear()
    made = [Version(e.version) for e in engines.list() if e.package == "keras-nightly"]
    assert pinned == f"keras-nightly=={max(made)}"
    assert Version(keras_nightly_engine.version) in made


def test_is_it_fixed_on_main_side_by_side_as_raw_keras_answers(keras_nightly_engine, raw):
    build = keras_nightly_engine.spec
    assert raw["installed"]["keras"] == INSTALLED
    assert raw["nightly"]["keras"] == keras_nightly_engine.version
    assert raw["installed"]["dtype"] != raw["nightly"]["dtype"], "the case must differ"
    both = dx.probe(**QUESTION, engine=[None, build])
    installed, nightly = both.results
    assert (installed.output_dtype, nightly.output_dtype) == (
        raw["installed"]["dtype"],
        raw["nightly"]["dtype"],
    )
    assert both.axis == "engines" and both.verdict == "diverges"
    assert both["nightly"] is nightly and nightly.spec.engine == build
    assert nightly.versions["keras"] == raw["nightly"]["keras"]
    assert nightly.versions["nightly"] == "2026-10-27 04h"  # the build's date, in the answer
    assert both.label(nightly) == f"keras {raw['nightly']['keras']} (nightly 2026-10-27 04h)"
    assert both.label(installed) == f"keras {INSTALLED} (installed)"
    named = "keras-nightly==3.16.0.dev2026102704 (Keras main, nightly of 2026-10-27 04h)"
    assert named in str(nightly) and named in nightly._repr_html_()
    assert "across engines: diverges" in str(both)
    asked = ["ops.leaky_relu", "--input-dtype", "int32", "--backend", "numpy", "--json"]
    out = CliRunner().invoke(app, ["probe", *asked, "--engine", f"installed,{build}"])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert [r["output_dtype"] for r in shown] == [
        raw["installed"]["dtype"],
        raw["nightly"]["dtype"],
    ]


#: Whether this Keras has an openvino backend, raw: its module found or not (no import).
RAW_OPENVINO = """
import importlib.util, json, keras
print(json.dumps({"keras": keras.__version__,
                  "openvino": importlib.util.find_spec("keras.src.backend.openvino") is not None}))
"""


def test_openvino_on_the_nightly_is_not_supported_this_keras_has_none(keras_nightly_engine):
    """keras-nightly has dropped the openvino backend: asked there, openvino answers "not
    supported here" saying this Keras has none (no worker is started for it), beside the
    installed Keras's openvino answer and the nightly's numpy answer."""
    build = keras_nightly_engine.spec
    raw = json_on("numpy", RAW_OPENVINO, site=keras_nightly_engine.site)
    assert raw == {"keras": keras_nightly_engine.version, "openvino": False}
    rs = dx.probe("Dense", "uint8", backend=["numpy", "openvino"], engine=build)
    assert rs["numpy"].ok
    missing = rs["openvino"]
    assert missing.unsupported and rs.verdict != "diverges"
    assert missing.headline.startswith("not supported here: this Keras (keras-nightly==")
    assert "has no openvino backend" in missing.headline
    both = dx.probe("Dense", "uint8", backend="openvino", engine=[None, build])
    assert both.results[0].ok and both.results[1].unsupported
    with pytest.raises(InvalidSpecError, match="has no openvino backend"):
        dx.pool.warm(["openvino"], engine=build)


def test_bisect_from_the_release_to_the_nightly_names_the_build(keras_nightly_engine, raw):
    """Both ends only (each further build is an engine to make: ``good``/``bad`` spans every
    build between, as the test above reads from the index)."""
    build = keras_nightly_engine.version
    b = dx.bisect(**QUESTION, versions=[INSTALLED, keras_nightly_engine.spec], progress=False)
    assert b.versions == (INSTALLED, build)
    assert b.answers() == {INSTALLED: raw["installed"]["dtype"], build: raw["nightly"]["dtype"]}
    change = b.first_change
    assert (change.before_version, change.after_version) == (INSTALLED, build)
    for probe in b.probes:
        assert probe.result.versions["keras"] == probe.version
        assert probe.engine == (None if probe.version == INSTALLED else keras_nightly_engine.spec)
    assert f"first changed in Keras {build} (nightly 2026-10-27 04h)" in str(b)
    with pytest.raises(InvalidSpecError, match="not both"):
        dx.bisect(**QUESTION, versions=[INSTALLED, build], good=INSTALLED, bad="nightly")


#: A model Keras's main quantizes (Embedding, EinsumDense, Dense) with one it skips (Flatten),
#: built the same way here and in raw keras-nightly.
BUILD = """
import keras
def build():
    inputs = keras.Input((4,), dtype="int32", name="ids")
    x = keras.layers.Embedding(10, 8, name="emb")(inputs)
    x = keras.layers.EinsumDense("abc,cd->abd", (4, 6), bias_axes="d", name="ed")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    return keras.Model(inputs, keras.layers.Dense(3, name="head")(x), name="net")
"""
RAW_SUMMARY = (
    BUILD
    + """
import json
said = {}
for mode in ("int8", "int4"):
    model = build()
    model.quantize(mode)
    said[mode] = model.quantization_summary(verbose=False)
print(json.dumps(said))
"""
)


def test_the_quantize_audit_shows_keras_mains_quantization_summary_and_agrees(
    keras_nightly_engine,
):
    raw = json_on("numpy", RAW_SUMMARY, site=keras_nightly_engine.site)
    scope: dict = {}
    exec(BUILD, scope)
    model, sample = scope["build"](), [[1, 2, 3, 4], [5, 6, 7, 8]]
    for mode in ("int8", "int4"):
        report = dx.check_model(model, sample, quantize=mode, engine=keras_nightly_engine.spec)
        q = report.quantization
        assert report.keras == keras_nightly_engine.version
        shown = keras_summary_rows(q.keras_summary or "")
        assert shown == keras_summary_rows(raw[mode]) and len(shown) == 3  # raw Keras's own
        assert q.summary_disagreements() == ()  # beside the tool's own per-layer rows
        ours = {r.path.split("/")[-1]: r for r in q.layers if r.status == "quantized"}
        assert {row.path: row.policy for row in shown} == {p: r.policy for p, r in ours.items()}
        assert "agreeing with the rows" in str(report) and "| Layer: head" in str(report)
    installed = dx.check_model(model, sample, quantize="int8")  # 3.15.1 has no summary
    assert installed.quantization.keras_summary is None
