"""Workers forked from a zygote (``runtime/_zygote.py``): they answer as spawned workers do,
start without importing their backend again, and leave no process behind when the kernel
goes."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from dtype_explorer import engines, pool
from dtype_explorer.records import ProbeSpec
from dtype_explorer.runtime import _spawn, _zygote


def test_a_forked_worker_answers_as_a_spawned_one_and_its_parent_is_the_zygote(monkeypatch):
    answers = {}
    for start in ("spawn", "zygote"):
        monkeypatch.setenv(_zygote.WORKER_START_VARIABLE, start)
        pool.shutdown()
        for backend in ("numpy", "jax"):
            spec = ProbeSpec(
                target="Dense", input_dtypes=("float16",), backend=backend, kwargs={"units": 3}
            )
            result = pool.submit(spec, use_cache=False).result(timeout=300)
            worker = psutil.Process(pool.call(backend, os.getpid).result(timeout=300))
            zygotes = {z.process.pid for z in _zygote._zygotes.values()}
            assert (worker.ppid() in zygotes) == (start == "zygote"), (start, worker.ppid())
            assert (worker.ppid() == os.getpid()) == (start == "spawn")
            answers[start, backend] = (
                result.status,
                result.output_dtype,
                result.cast_path,
                result.variables,
                result.verdict,
            )
    pool.shutdown()
    assert not _zygote._zygotes
    for backend in ("numpy", "jax"):
        assert answers["zygote", backend] == answers["spawn", backend]
        assert answers["zygote", backend][0] == "ok"


def test_a_replaced_worker_is_forked_again_and_imports_nothing_anew(monkeypatch):
    """After a retire, the next worker comes from the same zygote (whose imports were done
    before it said it was ready)."""
    monkeypatch.delenv(_zygote.WORKER_START_VARIABLE, raising=False)
    pool.shutdown()
    first = pool.call("numpy", os.getpid).result(timeout=300)
    (zygote,) = _zygote._zygotes.values()
    for slot in list(_spawn.pools):
        _spawn.retire(slot)
    second = pool.call("numpy", os.getpid).result(timeout=300)
    assert second != first
    assert psutil.Process(second).ppid() == zygote.process.pid
    pool.shutdown()


def test_a_shutdown_that_keeps_the_zygotes_gives_new_workers_forked_from_them(monkeypatch):
    """``shutdown(zygotes=False)`` ends every worker and keeps the zygote: the next worker is
    a new process forked from it; a plain ``shutdown()`` ends the zygote too."""
    monkeypatch.delenv(_zygote.WORKER_START_VARIABLE, raising=False)
    pool.shutdown()
    first = pool.call("numpy", os.getpid).result(timeout=300)
    (zygote,) = _zygote._zygotes.values()
    pool.shutdown(zygotes=False)
    assert not _spawn.pools and not _alive(first)
    assert list(_zygote._zygotes.values()) == [zygote] and _alive(zygote.process.pid)
    second = pool.call("numpy", os.getpid).result(timeout=300)
    assert second != first and psutil.Process(second).ppid() == zygote.process.pid
    pool.shutdown()
    assert not _zygote._zygotes and not _alive(zygote.process.pid) and not _alive(second)


KILLED_KERNEL = """
import json, os, sys
from dtype_explorer import engines, pool
from dtype_explorer.records import ProbeSpec
from dtype_explorer.runtime import _zygote
worker = pool.call("numpy", os.getpid).result(timeout=300)
zygotes = [z.process.pid for z in _zygote._zygotes.values()]
print(json.dumps({"worker": worker, "zygotes": zygotes}), flush=True)
os.kill(os.getpid(), 9)
"""


def test_the_zygote_and_its_workers_go_when_the_kernel_is_killed(tmp_path):
    env = {**os.environ, "DTYPE_EXPLORER_CACHE_DIR": str(tmp_path)}
    env.pop(_zygote.WORKER_START_VARIABLE, None)
    done = subprocess.run(
        [sys.executable, "-c", KILLED_KERNEL], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    pids = json.loads(done.stdout.strip().splitlines()[-1])
    assert pids["zygotes"], "no zygote was started"
    left = [pids["worker"], *pids["zygotes"]]
    deadline = time.monotonic() + 30  # the worker's parent watch polls once a second
    while time.monotonic() < deadline and any(_alive(pid) for pid in left):
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in left), [p for p in left if _alive(p)]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("value", ["spawn", "SPAWN "])
def test_spawn_is_chosen_by_the_environment(monkeypatch, value):
    monkeypatch.setenv(_zygote.WORKER_START_VARIABLE, value)
    assert not _zygote.available()
    monkeypatch.delenv(_zygote.WORKER_START_VARIABLE)
    assert _zygote.available() == (sys.platform == "linux" and sys.version_info < (3, 14))


def _engine_worker(spec: str, backend: str) -> dict:
    """What an engine's worker is: its pid, its parent, and where its Keras came from."""
    return pool.call(backend, _where_keras_is, engine=spec).result(timeout=300)


def _where_keras_is() -> dict:
    import os
    import sys

    names = ("keras", "tf_keras", "tensorflow")
    files = {n: getattr(sys.modules.get(n), "__file__", None) for n in names}
    legacy = os.environ.get("TF_USE_LEGACY_KERAS")
    return {"pid": os.getpid(), "ppid": os.getppid(), "files": files, "legacy": legacy}


@pytest.mark.parametrize("engine", ["keras_3_11_engine", "tf_keras_engine"])
def test_an_engines_workers_fork_from_its_own_zygote_and_answer_as_spawned_ones(
    monkeypatch, request, engine
):
    """An engine's first worker spawns; its second start makes the engine's zygote, which
    enters the engine before it imports (its Keras, or tf_keras after the installed
    TensorFlow, from the engine's folder); the forked worker answers a probe as the spawned one
    did, and the next worker is forked from the same zygote."""
    record = request.getfixturevalue(engine)
    backend = "numpy" if record.package == "keras" else "tensorflow"
    spec = ProbeSpec(
        target="Dense",
        input_dtypes=("float16",),
        backend=backend,
        kwargs={"units": 3},
        engine=record.spec,
    )
    key = _zygote.key_of(backend, engines.require(record.spec).to_dict())
    monkeypatch.setattr(_zygote, "_engine_keys_started", set())
    monkeypatch.delenv(_zygote.WORKER_START_VARIABLE, raising=False)
    pool.shutdown()
    answers = [pool.submit(spec, use_cache=False).result(timeout=300)]  # spawned
    assert not _zygote._zygotes
    pool.shutdown(zygotes=False)
    answers.append(pool.submit(spec, use_cache=False).result(timeout=300))  # the 2nd start
    (zygote,) = _zygote._zygotes.values()
    assert zygote.key == key and key != _zygote.key_of(backend)
    forked = _engine_worker(record.spec, backend)  # its user-code worker: the 3rd start
    assert forked["ppid"] == zygote.process.pid and list(_zygote._zygotes.values()) == [zygote]
    first, second = ((r.status, r.output_dtype, r.cast_path, r.verdict) for r in answers)
    assert second == first and first[0] == "ok", answers
    files = forked["files"]
    assert files[record.package].startswith(record.site), files
    if record.package == "tf_keras":  # the installed TensorFlow, told to import tf_keras
        assert files["tensorflow"] == importlib.util.find_spec("tensorflow").origin
        assert files["keras"] is None and forked["legacy"] == "1"
    else:
        assert files["tf_keras"] is None and forked["legacy"] is None
    pool.stop_engine(record.spec)  # as a bisect does after each release: its zygote goes too
    assert not _zygote._zygotes and not _alive(zygote.process.pid)


def test_a_forked_worker_takes_the_kernels_environment_of_when_it_was_asked_for(monkeypatch):
    """dtype-explorer's own settings are left out of the zygote's key (no import reads them)
    but reach the worker as the kernel has them now, as with spawn; a variable Keras may
    read at import (``KERAS_*``) gets a zygote of its own."""
    monkeypatch.delenv(_zygote.WORKER_START_VARIABLE, raising=False)
    pool.shutdown()
    pool.call("numpy", os.getpid).result(timeout=300)
    (first,) = _zygote._zygotes.values()
    monkeypatch.setenv("DTYPE_EXPLORER_TEST_SETTING", "seen")
    monkeypatch.delenv("DTYPE_EXPLORER_WORKER_MIB", raising=False)
    for slot in list(_spawn.pools):
        _spawn.retire(slot)
    got = pool.call("numpy", os.environ.get, "DTYPE_EXPLORER_TEST_SETTING").result(timeout=300)
    assert got == "seen"
    assert list(_zygote._zygotes.values()) == [first]
    monkeypatch.setenv("KERAS_TEST_SETTING", "1")
    for slot in list(_spawn.pools):
        _spawn.retire(slot)
    assert pool.call("numpy", os.environ.get, "KERAS_TEST_SETTING").result(timeout=300) == "1"
    assert len(_zygote._zygotes) == 2
    pool.shutdown()


def test_a_zygote_closed_twice_closes_no_descriptor_another_pipe_took_since(tmp_path):
    """A zygote given up on while importing is closed, then closed again when it is replaced
    or shut down. The second close closed its descriptors' numbers again: by then the next
    pipes made had them (a pool's channels), so that pool broke ("Bad file descriptor") and
    the next worker "died before answering" (test_pool's worker that hangs while starting,
    now and then)."""
    zygote = _zygote.Zygote("test-close-twice", "numpy", tmp_path / "zygote.log")
    held = {zygote._alive_w, zygote._dummy_alive, zygote._ready_r}
    zygote.close()
    taken = []  # open files until every number the zygote held is another file's
    while not held <= set(taken) and len(taken) < 256:
        taken.append(os.open(os.devnull, os.O_RDONLY))
    try:
        assert held <= set(taken)
        zygote.close()  # replaced, or shut down
        assert not zygote.ready(timeout=1)  # closed: no read of another pipe's number
        for fd in taken:
            os.fstat(fd)  # still open: OSError (EBADF) where the zygote closed it again
    finally:
        for fd in taken:
            with contextlib.suppress(OSError):
                os.close(fd)
