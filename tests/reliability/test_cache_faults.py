"""A cache directory nobody should trust: rows tampered to run code, rows corrupt or cut
short, a database file truncated under a running kernel, and a cache shared by sessions whose
Keras is configured differently. A probe must answer correctly in each case, run nothing it
read, and leave the calling process alive.
"""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dtype_explorer import cache, pool
from dtype_explorer.records import ProbeSpec
from tests.cache_rows import forged

ROOT = Path(__file__).resolve().parents[2]
ANSWER_WITHIN = 240


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    return tmp_path / "cache"


def dense(units: int = 3) -> ProbeSpec:
    return ProbeSpec(target="Dense", backend="numpy", kwargs={"units": units})


def answer(spec: ProbeSpec):
    return pool.submit(spec).result(timeout=ANSWER_WITHIN)


def stored(spec: ProbeSpec) -> sqlite3.Connection:
    """A live answer to ``spec`` stored, and a raw connection to the cache's database."""
    first = answer(spec)
    assert first.ok and not first.cached and answer(spec).cached
    return sqlite3.connect(cache.path() / "cache.db", isolation_level=None)


class RunsCommand:
    """What an attacker puts in a row: unpickling it runs a shell command."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_a_tampered_row_runs_nothing_and_the_probe_answers_live(tmp_path):
    marker = tmp_path / "pwned"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    spec = dense()
    db = stored(spec)
    payload = pickle.dumps(RunsCommand(f"touch {marker}"))
    db.execute("UPDATE Cache SET mode = 4, value = ?", (payload,))  # 4: diskcache's pickle
    db.execute(  # a pickled key, and a row naming a file outside the cache
        "INSERT INTO Cache (key, raw, store_time, access_time, mode, filename, value)"
        " VALUES (?, 0, 0, 0, 3, ?, NULL)",
        (payload, str(victim)),
    )
    db.close()
    assert cache.get(spec) is None
    assert list(cache.results()) == []
    again = answer(spec)
    assert again.ok and not again.cached  # answered live, and stored afresh
    assert answer(spec).cached
    cache.clear()
    assert not marker.exists()  # nothing was unpickled
    assert victim.read_text() == "keep me"  # nothing a row names was deleted


CORRUPT = {
    "not json": b"\x80\x04garbage",
    "cut short": None,  # the stored JSON's first half
    "valid json, not a result": json.dumps({"status": "ok"}),
    "wrong types": None,  # the stored JSON with status 7
    "another spec's answer": None,
    "nested a million deep": "[" * 1_000_000 + "]" * 1_000_000,
    "null": None,
    "not utf-8": b"\xff\xfe\xfd",
}


@pytest.mark.parametrize("damage", list(CORRUPT))
def test_a_corrupt_row_is_a_miss_never_an_error(damage):
    spec = dense()
    db = stored(spec)
    (text,) = db.execute("SELECT value FROM Cache").fetchone()
    value = CORRUPT[damage]
    if damage == "cut short":
        value = text[: len(text) // 2]
    elif damage == "wrong types":
        value = forged(text, '"status":"ok"', '"status":7')
    elif damage == "another spec's answer":
        value = forged(text, '"units":3', '"units":4')
    db.execute("UPDATE Cache SET value = ?", (value,))
    db.close()
    assert cache.get(spec) is None
    again = answer(spec)
    assert again.ok and not again.cached and again.spec == spec
    assert answer(spec).cached  # the bad row was replaced


def test_the_key_holds_keras_json_and_the_jax_variables(tmp_path, monkeypatch):
    spec = ProbeSpec(target="Conv2D", backend="jax", kwargs={"filters": 2, "kernel_size": 3})
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    default = cache.key(spec)
    (tmp_path / "keras.json").write_text(json.dumps({"image_data_format": "channels_first"}))
    channels_first = cache.key(spec)
    assert channels_first != default
    (tmp_path / "keras.json").write_text(json.dumps({"epsilon": 0.001}))
    assert cache.key(spec) not in (default, channels_first)
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "torch"}))  # the worker's own
    assert cache.key(spec) == default
    (tmp_path / "keras.json").write_text("{not json")  # Keras ignores it, so does the key
    assert cache.key(spec) == default
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    assert cache.key(spec) != default


SESSION = """
import json, sys
from dtype_explorer import pool
from dtype_explorer.keras_run import describe_settings
from dtype_explorer.records import ProbeSpec

spec = ProbeSpec(target="Conv2D", backend="numpy", kwargs={"filters": 2, "kernel_size": 3})
result = pool.submit(spec).result(timeout=240)
format = pool.call("numpy", describe_settings).result()["keras.image_data_format"]
print(json.dumps({"cached": result.cached, "ok": result.ok, "format": format}))
"""


def run_session(code: str, cache_dir: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        cache.ENV_DIR: str(cache_dir),
        "KERAS_BACKEND": "numpy",
        "DTYPE_EXPLORER_BACKENDS": "numpy",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cache_dir.parent,
    )


def test_a_session_with_another_keras_json_does_not_read_the_others_answers(tmp_path):
    shared = tmp_path / "shared-cache"
    homes = {fmt: tmp_path / fmt for fmt in ("channels_last", "channels_first")}
    seen = {}
    for fmt, home in homes.items():
        home.mkdir()
        (home / "keras.json").write_text(json.dumps({"image_data_format": fmt}))
        done = run_session(SESSION, shared, KERAS_HOME=str(home))
        assert done.returncode == 0, done.stderr[-3000:]
        seen[fmt] = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["channels_last"] == {"cached": False, "ok": True, "format": "'channels_last'"}
    assert seen["channels_first"]["format"] == "'channels_first'"
    assert seen["channels_first"]["cached"] is False  # not the channels_last answer


TRUNCATES = """
import os, sys, threading, time, warnings
from dtype_explorer import cache, pool
from dtype_explorer.records import ProbeSpec

warnings.simplefilter("ignore")
specs = [ProbeSpec(target="Dense", backend="numpy", kwargs={"units": u}) for u in range(1, 9)]
for spec in specs:
    assert pool.submit(spec).result(timeout=240).ok
assert all(pool.submit(s).result().cached for s in specs)
files = [cache.path() / name for name in os.listdir(cache.path()) if name.startswith("cache.db")]
stop = threading.Event()

def truncate():
    while not stop.is_set():
        for path in files:
            try:
                with open(path, "r+b") as file:
                    file.truncate(os.path.getsize(path) // 2)
                    file.truncate(0)
            except OSError:
                pass
        time.sleep(0.001)

threading.Thread(target=truncate, daemon=True).start()
answered = 0
for _ in range(60):
    for spec in specs:
        answered += pool.submit(spec).result(timeout=240).ok
stop.set()
print("answered", answered)
"""


def test_a_cache_file_truncated_while_probes_run_does_not_kill_the_process(tmp_path):
    done = run_session(TRUNCATES, tmp_path / "cache")
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])  # SIGBUS: -7
    assert done.stdout.split()[-2:] == ["answered", str(60 * 8)]


def test_a_worker_started_under_other_settings_is_replaced(tmp_path, monkeypatch):
    """The key says the settings of now, so the worker must run under them: a session that
    points ``KERAS_HOME`` elsewhere gets workers that read that keras.json."""
    from dtype_explorer.keras_run import describe_settings

    def image_data_format() -> str:
        return pool.call("numpy", describe_settings).result()["keras.image_data_format"]

    assert image_data_format() == "'channels_last'"
    (tmp_path / "keras.json").write_text(json.dumps({"image_data_format": "channels_first"}))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert image_data_format() == "'channels_first'"
    spec = ProbeSpec(target="Conv2D", backend="numpy", kwargs={"filters": 2, "kernel_size": 3})
    first = answer(spec)
    assert first.ok and not first.cached and answer(spec).cached
    monkeypatch.delenv("KERAS_HOME")
    assert image_data_format() == "'channels_last'"
    assert not answer(spec).cached  # the channels_first answer is not this session's
