"""A cache directory shared with others (issue 31): a forged row is not believed, and a cache
folder that is read-only, damaged or too deep for SQLite is used as far as it can be, with one
warning that says what is wrong. Real numpy workers, a real cache, a temporary key file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import dtype_explorer as dx
from dtype_explorer import cache, pool
from dtype_explorer.records import ProbeSpec
from dtype_explorer.runtime import _mac, _store
from tests.cache_rows import forge_rows

ROOT = Path(__file__).resolve().parents[2]
ANSWER_WITHIN = 240


@pytest.fixture(autouse=True)
def fresh_cache_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.setenv(_mac.ENV_KEY_FILE, str(tmp_path / "config" / "cache.key"))
    return tmp_path


def uint8_dense():
    return dx.probe("Dense", input_dtype="uint8", backend="numpy")


def rejected(reason: str) -> int:
    return dx.cache.stats()["rejected"][reason]


def edit_rows(sql: str, *args) -> None:
    db = sqlite3.connect(cache.path() / "cache.db", isolation_level=None)
    db.execute(sql, args)
    db.close()


def forge() -> None:
    """A well-formed lie under the row's own MAC: the stored answer says float16."""
    assert forge_rows(
        cache.path() / "cache.db", '"output_dtype":"float32"', '"output_dtype":"float16"'
    )


def test_a_forged_row_is_a_counted_miss_and_the_live_answer_is_served(fresh_cache_and_key):
    """The regression (issue 31, poisoning 3). On the old code (main at 075193c) this is served:

    >>> uint8_dense().output_dtype                  # live, stored    # doctest: +SKIP
    'float32'
    >>> forge()                                     # a well-formed lie  # doctest: +SKIP
    >>> r = uint8_dense(); r.output_dtype, r.cached                   # doctest: +SKIP
    ('float16', True)

    Now the row's MAC does not match: a miss, counted, and the live answer replaces it.
    """
    first = uint8_dense()
    assert first.output_dtype == "float32" and not first.cached
    assert uint8_dense().cached
    key_file = fresh_cache_and_key / "config" / "cache.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600  # made on the first write
    assert not (cache.path() / "cache.key").exists()  # never beside the rows
    forge()
    before = dx.cache.stats()
    again = uint8_dense()
    assert (again.output_dtype, again.cached) == ("float32", False)
    after = dx.cache.stats()
    assert after["rejected"]["mac"] == before["rejected"]["mac"] + 1
    assert after["misses"] == before["misses"] + 1
    assert uint8_dense().cached  # the live answer was stored, signed, in its place


def test_rows_signed_with_another_key_or_unsigned_are_misses(fresh_cache_and_key, monkeypatch):
    spec = ProbeSpec(target="Dense", backend="numpy", kwargs={"units": 3})
    assert pool.submit(spec).result(timeout=ANSWER_WITHIN).ok
    assert cache.get(spec) is not None and len(list(cache.results())) == 1
    # Another user's key (a cache copied from elsewhere): their rows are not ours.
    monkeypatch.setenv(_mac.ENV_KEY_FILE, str(fresh_cache_and_key / "other" / "cache.key"))
    mac = rejected("mac")
    assert cache.get(spec) is None and rejected("mac") == mac + 1
    assert list(cache.results()) == []
    # A row stored before rows were signed: the body without its MAC.
    monkeypatch.setenv(_mac.ENV_KEY_FILE, str(fresh_cache_and_key / "config" / "cache.key"))
    edit_rows("UPDATE Cache SET value = substr(value, 69)")
    unsigned = rejected("unsigned")
    assert cache.get(spec) is None and rejected("unsigned") == unsigned + 1
    assert not pool.submit(spec).result(timeout=ANSWER_WITHIN).cached


def test_a_damaged_key_file_is_named_and_the_probe_runs_live(fresh_cache_and_key):
    key_file = fresh_cache_and_key / "config" / "cache.key"
    key_file.parent.mkdir()
    key_file.write_text("not a key")
    with pytest.raises(_mac.CacheKeyError, match=r"cache\.key is not a key.*received 9"):
        _mac.secret(create=True)
    with pytest.warns(UserWarning, match="is not a key"):
        result = uint8_dense()
    assert result.ok and not result.cached


def test_two_processes_creating_the_key_at_once_agree_on_one(fresh_cache_and_key):
    script = "from dtype_explorer.runtime import _mac; print(_mac.secret(create=True).hex())"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    keys = {run.communicate(timeout=120)[0].strip() for run in runs}
    assert len(keys) == 1 and len(keys.pop()) == 64


def test_a_path_too_long_for_sqlite_says_so_once_and_the_probe_runs_live(monkeypatch, tmp_path):
    deep = tmp_path.joinpath(*["d" * 100] * 5)
    monkeypatch.setenv(cache.ENV_DIR, str(deep))
    with pytest.warns(UserWarning) as seen:
        first, second = uint8_dense(), uint8_dense()
    assert first.ok and not first.cached and not second.cached
    (warning,) = [w for w in seen if "cache" in str(w.message)]
    text = str(warning.message)
    length = len(os.fsencode(str(deep / "cache.db-journal")))
    assert "too long for SQLite" in text and f"is {length} bytes" in text
    assert "SQLite allows 512" in text and "writable" not in text


def test_a_truncated_cache_db_warns_once_is_moved_aside_and_rebuilt():
    assert not uint8_dense().cached
    assert uint8_dense().cached
    file = cache.path() / "cache.db"
    with open(file, "r+b") as handle:
        handle.truncate(1000)
    with pytest.warns(UserWarning, match=r"is damaged .* moved to cache\.db\.broken-"):
        again = uint8_dense()
    assert again.ok and not again.cached
    (aside,) = cache.path().glob("cache.db.broken-*[0-9]")
    assert aside.stat().st_size == 1000
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning: the rebuilt cache serves
        assert uint8_dense().cached


@contextlib.contextmanager
def read_only(folder):
    """``folder`` made unwritable for real: its mode, and (for root, whom modes do not stop)
    the immutable attribute."""
    folder.chmod(0o555)
    immutable = not _store.writable(str(folder))
    if not immutable:
        immutable = subprocess.run(["chattr", "+i", str(folder)], check=False).returncode == 0
    try:
        assert not _store.writable(str(folder)), "could not make the cache folder read-only"
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=False, capture_output=True)
        folder.chmod(0o755)


def test_a_read_only_cache_folder_is_read_warned_about_once_and_not_written():
    stored = uint8_dense()
    assert not stored.cached
    other = ProbeSpec(target="Dense", backend="numpy", kwargs={"units": 5})
    cache._open.close()  # a new session, on the folder now read-only
    cache._open = None
    with read_only(cache.path()):
        with pytest.warns(UserWarning) as seen:
            hit = uint8_dense()
            live = pool.submit(other).result(timeout=ANSWER_WITHIN)
            assert not pool.submit(other).result(timeout=ANSWER_WITHIN).cached  # not stored
        assert hit.cached and hit.output_dtype == stored.output_dtype
        assert live.ok and not live.cached
        (warning,) = [w for w in seen if "cache" in str(w.message)]
        assert "is read-only: stored answers are read from it" in str(warning.message)
        with pytest.raises(PermissionError, match="read-only; nothing was removed"):
            dx.cache.clear()
    cache._open.close()
    cache._open = None


def _key_refusal(key_file) -> str:
    """What ``_mac.secret`` says of ``key_file``, in a thread: a read that blocks (a FIFO on
    main) fails the test instead of hanging it."""
    import threading

    said: list[BaseException | None] = []

    def read() -> None:
        try:
            _mac.secret(create=True)
            said.append(None)
        except BaseException as exc:  # reported below
            said.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(ANSWER_WITHIN)
    assert said, f"reading the key file {key_file} blocked"
    assert isinstance(said[0], _mac.CacheKeyError), said[0]
    assert str(key_file) in str(said[0]) and _mac.ENV_KEY_FILE in str(said[0])
    return str(said[0])


def test_a_key_file_that_is_a_fifo_is_refused_without_blocking(fresh_cache_and_key):
    """Issue 43: a FIFO as the key file blocked every probe forever (read under a lock)."""
    key_file = fresh_cache_and_key / "config" / "cache.key"
    key_file.parent.mkdir()
    os.mkfifo(key_file)
    assert "not a regular file" in _key_refusal(key_file)
    with pytest.warns(UserWarning, match="not a regular file"):
        result = uint8_dense()
    assert result.ok and not result.cached


def test_a_key_file_that_is_a_directory_names_the_key_variable(fresh_cache_and_key):
    key_file = fresh_cache_and_key / "config" / "cache.key"
    key_file.mkdir(parents=True)
    assert "is a directory" in _key_refusal(key_file)
    with pytest.warns(UserWarning) as seen:
        assert uint8_dense().ok
    text = " ".join(str(w.message) for w in seen)
    assert _mac.ENV_KEY_FILE in text and cache.ENV_DIR not in text, text


def test_a_world_writable_key_file_is_refused(fresh_cache_and_key):
    key_file = fresh_cache_and_key / "config" / "cache.key"
    key_file.parent.mkdir()
    key_file.write_text("ab" * 32 + "\n")
    key_file.chmod(0o666)
    assert "writable by others" in _key_refusal(key_file)


def test_a_key_file_inside_the_cache_folder_is_refused(fresh_cache_and_key, monkeypatch):
    key_file = fresh_cache_and_key / "cache" / "cache.key"
    key_file.parent.mkdir()
    key_file.write_text("ab" * 32 + "\n")
    key_file.chmod(0o600)
    monkeypatch.setenv(_mac.ENV_KEY_FILE, str(key_file))
    assert "inside the cache directory" in _key_refusal(key_file)
