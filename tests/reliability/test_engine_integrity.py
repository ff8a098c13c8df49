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


def test_a_worker_forked_from_a_zygote_made_before_the_change_refuses_too(engine_copy):
    """An engine's zygote (``runtime/_zygote.py``) imported the engine's code while it was
    intact; a worker forked from it after a file changed checks the files at its own start and
    refuses, as a spawned one does."""
    from dtype_explorer.runtime import _zygote

    assert probe_engine().ok  # the engine's first worker: spawned
    pool.shutdown(zygotes=False)
    assert dx.probe("Dense", backend="numpy", engine=SPEC, timeout=240, use_cache=False).ok
    before = {z.process.pid for z in _zygote._zygotes.values()}  # the second: its zygote
    init = engine_copy / "site" / "keras" / "__init__.py"
    with init.open("a") as file:
        file.write("\nimport os  # planted\n")
    pool.shutdown(zygotes=False)  # new workers, the same zygotes
    result = dx.probe("Dense", backend="numpy", engine=SPEC, timeout=240, use_cache=False)
    assert (result.status, result.error.where) == ("error", "engine"), result.summary()
    assert "site/keras/__init__.py (changed)" in result.error.message
    if _zygote.available():
        assert before and {z.process.pid for z in _zygote._zygotes.values()} == before


def test_an_engine_changed_before_its_zygote_gets_no_zygote_and_runs_nothing(engine_copy):
    """The zygote checks the engine's files before it imports anything: a changed engine's
    zygote says its imports failed, the worker spawns and refuses (naming the file), and no
    zygote is made again for that engine; the planted code never runs anywhere."""
    from dtype_explorer.runtime import _zygote

    marker = engine_copy.parent / "ran"
    with (engine_copy / "site" / "keras" / "__init__.py").open("a") as file:
        file.write("\n" + planted(marker))
    for _ in range(3):  # the first spawned, the second asks a zygote, the third none
        result = dx.probe("Dense", backend="numpy", engine=SPEC, timeout=240, use_cache=False)
        assert_refused(result, "site/keras/__init__.py (changed)")
        pool.shutdown(zygotes=False)
    key = _zygote.key_of("numpy", engines.require(SPEC).to_dict())
    if _zygote.available():
        assert key in _zygote._failed_keys and key not in _zygote._zygotes
    assert not marker.exists()


def _keras_version():
    import keras

    return keras.__version__


def test_a_changed_engine_runs_no_cell_and_never_the_installed_keras(engine_copy, shell):
    """``pool.call`` (what ``%%dtype_trace --engine`` runs a cell with) in a worker whose
    engine refused to start raises, naming the file: before, it ran on the installed Keras."""
    init = engine_copy / "site" / "keras" / "__init__.py"
    with init.open("a") as file:
        file.write("\nimport os  # planted\n")
    with pytest.raises(RuntimeError, match=r"site/keras/__init__\.py \(changed\)"):
        pool.call("numpy", _keras_version, engine=SPEC, timeout=240).result()
    result = shell.run_cell_magic(
        "dtype_trace", f"--engine {SPEC} --backend numpy", "import keras\nkeras.__version__"
    ).results["numpy"]
    assert (result.status, result.error.type, result.returned) == ("raised", "RuntimeError", ())
    assert "site/keras/__init__.py (changed)" in result.error.message
    assert result.environment.where == f"numpy~user worker of engine {SPEC}"


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


# Issue 43: the record is signed with the user's key kept outside the folder, and a site holds
# regular files only. Each planted module writes a marker file when imported: it must not exist.


def planted(marker) -> str:
    return f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"


def rehash(engine_dir) -> None:
    """What a tamperer who can write the folder does: the hashes rewritten to match the site."""
    from dtype_explorer.runtime import _site

    path = engine_dir / "engine.json"
    info = json.loads(path.read_text())
    info["site_files"] = _site.digest(engine_dir / "site")
    info["site_sha256"] = _site.total(info["site_files"])
    path.write_text(json.dumps(info))


def assert_refused(result, *words):
    assert (result.status, result.error.type, result.error.where) == (
        "error",
        "EngineError",
        "engine",
    ), result.summary()
    for word in words:
        assert word in result.error.message, result.error.message
    assert not pool.storable(result)


def test_a_symlinked_folder_inside_the_site_is_refused_and_never_imported(engine_copy, tmp_path):
    """On main the check did not look inside a symlinked directory: the planted package ran
    in the worker while verify_site passed."""
    evil = tmp_path / "evil" / "namex"
    evil.mkdir(parents=True)
    marker = tmp_path / "ran.txt"
    (evil / "__init__.py").write_text(planted(marker))
    (engine_copy / "site" / "namex").symlink_to(evil, target_is_directory=True)  # keras imports it
    with pytest.raises(engines.EngineError, match=r"site/namex \(a symbolic link"):
        engines.verify_site(engines.get(SPEC))
    assert_refused(probe_engine(), "site/namex (a symbolic link")
    assert not marker.exists()


def test_a_symlinked_file_is_refused_too(engine_copy, tmp_path):
    marker = tmp_path / "ran.txt"
    outside = tmp_path / "outside.py"
    outside.write_text(planted(marker))
    (engine_copy / "site" / "sitecustomize.py").symlink_to(outside)
    assert_refused(probe_engine(), "site/sitecustomize.py (a symbolic link")
    assert not marker.exists()


def test_rewritten_hashes_are_refused_and_the_code_never_runs(engine_copy, tmp_path):
    """On main a tamperer who rewrote site_files and site_sha256 beside the change passed the
    check: the hashes lived beside the files they protect. Now the record is signed with the
    user's key (outside the folder): a rewritten record is refused, naming why."""
    marker = tmp_path / "ran.txt"
    init = engine_copy / "site" / "keras" / "__init__.py"
    init.write_text(planted(marker) + init.read_text())
    rehash(engine_copy)
    with pytest.raises(engines.EngineError, match="does not carry this user's signature"):
        engines.verify_site(engines.get(SPEC))
    assert_refused(probe_engine(), "does not carry this user's signature", "create it again")
    assert not marker.exists()
    assert probe_engine().cached is False


def test_a_record_signed_with_another_key_is_refused(engine_copy, tmp_path, monkeypatch):
    """Another user's engine (another key): refused, never trusted on first use."""
    other = tmp_path / "other.key"
    other.write_text("ab" * 32 + "\n")
    other.chmod(0o600)
    monkeypatch.setenv("DTYPE_EXPLORER_CACHE_KEY_FILE", str(other))
    pool.shutdown()
    assert_refused(probe_engine(), "does not carry this user's signature", str(other))


@pytest.fixture
def tf_keras_copy(tf_keras_engine, tmp_path, monkeypatch):
    folder = tmp_path / "engines"
    shutil.copytree(tf_keras_engine.path, folder / tf_keras_engine.name, symlinks=True)
    monkeypatch.setenv(engines.ENV_DIR, str(folder))
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    pool.shutdown()
    yield folder / tf_keras_engine.name
    pool.shutdown()


def test_tf_keras_with_rewritten_hashes_is_refused_in_workers_and_by_run(tf_keras_copy, tmp_path):
    import subprocess
    import sys

    marker = tmp_path / "ran.txt"
    init = tf_keras_copy / "site" / "tf_keras" / "__init__.py"
    init.write_text(planted(marker) + init.read_text())
    rehash(tf_keras_copy)
    result = dx.probe("Dense", engine="tf_keras", timeout=240)
    assert_refused(result, "does not carry this user's signature")
    script = tmp_path / "script.py"
    script.write_text("print('the script ran')\n")
    done = subprocess.run(
        [sys.executable, "-m", "dtype_explorer", "run", "--engine", "tf_keras", str(script)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0
    assert "does not carry this user's signature" in done.stderr, done.stderr[-2000:]
    assert "the script ran" not in done.stdout
    assert not marker.exists()


def test_bisect_over_a_tampered_engine_raises_no_answer(engine_copy):
    """Issue 43: on main the engine's refusal ("raises EngineError") was bisected as a Keras
    change to the installed release's int32; an engine's refusal is never Keras's answer."""
    from dtype_explorer.analyses import NoAnswerError
    from dtype_explorer.versions import library_version

    init = engine_copy / "site" / "keras" / "__init__.py"
    init.write_text(init.read_text() + "\n# planted\n")
    with pytest.raises(NoAnswerError, match="engine refused to start, not Keras"):
        dx.bisect(
            "Discretization",
            "float32",
            backend="numpy",
            kwargs={"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"},
            versions=[SPEC.removeprefix("keras=="), library_version("keras")],
            progress=False,
        )
