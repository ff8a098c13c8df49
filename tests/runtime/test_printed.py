"""The command's printed answers (``runtime.printed``): kept signed under the command line and
what answers it, read with the standard library alone, refused when moved, edited, signed
with another key, asked in the Keras 2 kernel or on a backend not allowed; counted apart from
the stored answers and cleared with them. A real cache database and a temporary key file; no
Keras (what the command prints, and what its process imports, are tested with the real
command: tests/frontends/test_cli_front.py)."""

from __future__ import annotations

import os
import sqlite3
from importlib import metadata

import pytest

from dtype_explorer import cache
from dtype_explorer.frontends import command
from dtype_explorer.runtime import _mac, printed
from dtype_explorer.runtime._kernelspec import KERNEL_ENGINE
from tests.cache_rows import forge_rows

ASKED = {"target": "Dense", "backend": "numpy", "kwargs": '{"units": 4}'}
TEXT = "Dense on numpy (cpu), policy float32: ok, as-documented\n  output float32\n\n"


@pytest.fixture(autouse=True)
def fresh_cache_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.setenv(_mac.ENV_KEY_FILE, str(tmp_path / "config" / "cache.key"))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))  # keras.json: Keras's defaults
    for name in ("JAX_ENABLE_X64", "DTYPE_EXPLORER_BACKENDS", KERNEL_ENGINE):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def keep(asked=ASKED, text=TEXT) -> str:
    found = printed.key(asked)
    cache.put_printed(found, text)
    return found


def test_a_kept_answer_is_read_back_for_the_same_question_only():
    assert printed.read(ASKED) is None  # no database yet
    keep()
    assert printed.read(ASKED) == TEXT
    assert printed.read(dict(ASKED)) == TEXT  # the options' order is not the question
    assert printed.read({**ASKED, "kwargs": '{"units": 5}'}) is None
    assert printed.read({**ASKED, "trace": True}) is None
    assert printed.read({**ASKED, "backend": "jax"}) is None


def test_what_can_change_the_answer_is_in_the_key(fresh_cache_and_key, monkeypatch):
    found = printed.key(ASKED)
    assert found.startswith(printed.PREFIX) and '"dtype_explorer":' in found
    assert '"keras":' in found and '"numpy":' in found and '"gpus":' in found
    keep()
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    assert printed.key(ASKED) != found and printed.read(ASKED) is None
    monkeypatch.delenv("JAX_ENABLE_X64")
    keras_json = fresh_cache_and_key / "keras" / "keras.json"
    keras_json.parent.mkdir()
    keras_json.write_text('{"floatx": "float16"}')
    assert printed.read(ASKED) is None  # another keras.json: asked again
    keras_json.unlink()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert printed.read(ASKED) is None  # another placement
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert printed.read(ASKED) == TEXT


def test_a_moved_edited_or_foreign_row_is_refused(fresh_cache_and_key, monkeypatch):
    found = keep()
    other = printed.key({**ASKED, "kwargs": '{"units": 5}'})
    db = sqlite3.connect(cache.path() / "cache.db", isolation_level=None)
    db.execute("UPDATE Cache SET key = ? WHERE key = ?", (other, found))
    db.close()
    assert printed.read({**ASKED, "kwargs": '{"units": 5}'}) is None  # moved: its MAC is not
    keep()
    assert forge_rows(cache.path() / "cache.db", "float32", "float16")  # edited under its MAC
    assert printed.read(ASKED) is None
    keep()
    assert printed.read(ASKED) == TEXT
    monkeypatch.setenv(_mac.ENV_KEY_FILE, str(fresh_cache_and_key / "another.key"))
    assert printed.read(ASKED) is None  # another user's key: nothing of theirs is believed


def test_not_read_in_the_keras_2_kernel_for_a_backend_not_allowed_or_several(monkeypatch):
    keep()
    monkeypatch.setenv("DTYPE_EXPLORER_BACKENDS", "jax")
    assert printed.read(ASKED) is None
    monkeypatch.setenv("DTYPE_EXPLORER_BACKENDS", "numpy,jax")
    assert printed.read(ASKED) == TEXT
    monkeypatch.setenv(KERNEL_ENGINE, "keras==2.15.0")
    assert printed.read(ASKED) is None
    assert printed.key({**ASKED, "backend": "numpy,jax"}) is None
    assert printed.key({**ASKED, "backend": "all"}) is None
    assert printed.key({"target": "Dense"}) is None


def test_a_printed_answer_is_not_a_stored_one_and_is_cleared_with_them():
    with pytest.raises(ValueError, match="received: 'Dense"):
        cache.put_printed("Dense|numpy", TEXT)
    keep()
    refused = cache.stats()["rejected"]
    assert list(cache.results()) == []
    assert cache.stats()["rejected"] == refused  # skipped, not refused
    info = cache.info()
    assert (info["entries"], info["printed"]) == (0, 1)
    assert cache.clear() == 1
    assert printed.read(ASKED) is None


def test_a_dataset_probe_keys_tensorflow_s_version_on_any_backend():
    dataset = printed.key({**ASKED, "mode": "dataset"})
    assert '"tensorflow":' in dataset and '"tensorflow":' not in printed.key(ASKED)
    assert f'"tensorflow":"{metadata.version("tensorflow")}"' in dataset


def test_an_edited_layout_is_laid_out_anew(tmp_path, monkeypatch):
    view = tmp_path / "views" / "_text.py"
    view.parent.mkdir()
    view.write_text("# a view\n")
    monkeypatch.setattr(printed, "_LAYOUT", (view.parent, tmp_path / "errors.py"))
    keep()
    assert printed.read(ASKED) == TEXT
    os.utime(view, ns=(view.stat().st_atime_ns, view.stat().st_mtime_ns + 10**9))
    assert printed.read(ASKED) is None  # the text view changed: the stored answer's lane
    keep()
    (view.parent / "_more.py").write_text("")
    assert printed.read(ASKED) is None  # a module more


def test_while_another_process_writes_the_command_keeps_nothing_and_does_not_wait():
    keep({**ASKED, "target": "ReLU"})  # the database exists
    writer = sqlite3.connect(cache.path() / "cache.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert printed.busy()  # found in 0.2 s: the keep is skipped, not left to wait
        command._keep(ASKED, TEXT)  # raises nothing
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert not printed.busy()
    assert printed.read(ASKED) is None
    command._keep(ASKED, TEXT)
    assert printed.read(ASKED) == TEXT
