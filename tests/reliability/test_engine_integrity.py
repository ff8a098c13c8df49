"""An engine's installed code is what was installed (issue 31): ``engine.json`` records a hash
of every file under ``site/``, and a worker of an engine whose files changed refuses to start,
naming the file; the probe answers that error (``where="engine"``), never from the cache.

Each test works on a copy of the session's real ``keras==3.11.3`` engine in an engines folder
of its own (``$DTYPE_EXPLORER_ENGINES_DIR``), so the session's engine stays intact.
"""

from __future__ import annotations

import json
import shutil

import pytest

import dtype_explorer as dx
from dtype_explorer import cache, engines, pool

SPEC = "keras==3.11.3"


@pytest.fixture
def engine_copy(keras_3_11_engine, tmp_path, monkeypatch):
    """The engine copied into an engines folder (and a cache) of this test's own."""
    folder = tmp_path / "engines"
    shutil.copytree(keras_3_11_engine.path, folder / keras_3_11_engine.name, symlinks=True)
    monkeypatch.setenv(engines.ENV_DIR, str(folder))
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    pool.shutdown()  # no worker of the session's engine answers for the copy
    yield folder / keras_3_11_engine.name
    pool.shutdown()


def probe_engine():
    return dx.probe("Dense", backend="numpy", engine=SPEC, timeout=240)


def test_the_engine_records_a_hash_of_its_files(engine_copy):
    info = json.loads((engine_copy / "engine.json").read_text())
    assert len(info["site_sha256"]) == 64
    assert "keras/__init__.py" in info["site_files"]
    assert engines.verify_site(engines.get(SPEC)) == len(info["site_files"])
    assert probe_engine().ok  # its workers start, and write no file under site/ meanwhile
    assert engines.verify_site(engines.get(SPEC)) == len(info["site_files"])


def test_an_engine_whose_file_changed_refuses_to_start_naming_it(engine_copy):
    init = engine_copy / "site" / "keras" / "__init__.py"
    with init.open("a") as file:
        file.write("\nimport os  # planted\n")
    result = probe_engine()
    assert (result.status, result.error.type, result.error.where) == (
        "error",
        "EngineError",
        "engine",
    ), result.summary()
    assert "site/keras/__init__.py (changed)" in result.error.message
    assert "create it again" in result.error.message
    assert not pool.storable(result)
    assert cache.get(result.spec) is None
    assert probe_engine().cached is False  # asked again: refused again, never from the cache
    with pytest.raises(engines.EngineError, match=r"keras/__init__\.py \(changed\)"):
        engines.verify_site(engines.get(SPEC))


def test_an_added_file_is_named_too(engine_copy):
    (engine_copy / "site" / "sitecustomize.py").write_text("print('planted')\n")
    result = probe_engine()
    assert result.error is not None and result.error.where == "engine", result.summary()
    assert "site/sitecustomize.py (added)" in result.error.message


def test_an_engine_from_before_the_hash_is_refused(engine_copy):
    """An engine.json without the hash (made before this change, or with the hash deleted on
    purpose) is refused: trusting it on first use would trust whatever its site holds now."""
    path = engine_copy / "engine.json"
    info = json.loads(path.read_text())
    del info["site_sha256"], info["site_files"]
    path.write_text(json.dumps(info))
    result = probe_engine()
    assert result.error is not None and result.error.where == "engine", result.summary()
    assert "created before" in result.error.message
    assert f"dx.engines.remove({SPEC!r}) and create it again" in result.error.message


def test_remove_removes_an_engine_whose_engine_json_is_unreadable(tmp_path, monkeypatch):
    folder = tmp_path / "engines"
    broken = folder / "keras-3.11.3"
    (broken / "site").mkdir(parents=True)
    (broken / "engine.json").write_text("{not json")
    monkeypatch.setenv(engines.ENV_DIR, str(folder))
    with pytest.raises(engines.EngineError, match="unreadable"):
        engines.create(SPEC, progress=False)  # the dead end: "remove it and create again"
    assert engines.remove(SPEC) is True
    assert not broken.exists()
    assert engines.remove(SPEC) is False
