"""Several workers per backend (issue 17): how many, checked where they are set; probes and
survey cells spread over all of them; a crash costs one worker's probe and names its own log;
fewer workers stop the extra ones. Real numpy workers (the cheapest to start)."""

from __future__ import annotations

import re

import psutil
import pytest
from test_pool import custom, gate_body  # a Layer subclass whose call runs a body first

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import ProbeSpec
from dtype_explorer.runtime import _sizing

ANSWER_WITHIN = 240


def worker_pids() -> set[int]:
    """The workers running: spawned ones, and those forked from a zygote (not the zygotes)."""
    found = set()
    zygote = "_zygote import serve"
    for child in psutil.Process().children(recursive=True):
        try:
            line = " ".join(child.cmdline())
            forked = zygote in line and zygote in " ".join(child.parent().cmdline())
            if "spawn_main" in line or forked:
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture
def two_numpy_workers(monkeypatch):
    monkeypatch.setitem(pool._config, "workers_per_backend", pool._config["workers_per_backend"])
    pool.shutdown(zygotes=False)
    pool.configure(workers_per_backend=2)
    yield
    pool.configure(workers_per_backend=1)


@pytest.mark.parametrize("bad", [0, -1, 65, 1.5, True, "many", None.__class__])
def test_workers_per_backend_is_checked_and_nothing_changes(bad, monkeypatch):
    monkeypatch.setitem(pool._config, "workers_per_backend", 3)
    with pytest.raises(InvalidSpecError, match=r"from 1 to 64, or 'auto'.*Received: ") as error:
        pool.configure(workers_per_backend=bad, timeout=5)
    assert repr(bad)[:20] in str(error.value)
    assert pool.workers_per_backend() == 3
    assert pool._config["timeout"] != 5  # the valid argument beside it did not apply either


def test_the_environment_sets_it_unless_configured(monkeypatch):
    monkeypatch.setitem(pool._config, "workers_per_backend", None)
    monkeypatch.setenv(pool.ENV_WORKERS, "3")
    assert pool.workers_per_backend() == 3
    monkeypatch.setenv(pool.ENV_WORKERS, "auto")
    assert pool.workers_per_backend() == pool.default_workers_per_backend()
    monkeypatch.setenv(pool.ENV_WORKERS, "lots")
    with pytest.raises(InvalidSpecError, match=r"\$DTYPE_EXPLORER_WORKERS_PER_BACKEND must be"):
        pool.workers_per_backend()
    pool.configure(workers_per_backend=2)  # the call wins over the environment
    assert pool.workers_per_backend() == 2


def test_the_default_follows_cores_and_memory(monkeypatch):
    monkeypatch.setitem(pool._config, "workers_per_backend", None)
    default = pool.default_workers_per_backend()
    assert 1 <= default <= pool.MAX_DEFAULT_WORKERS
    cores_each = _sizing.cpus() // len(pool.installed_backends())
    assert default <= max(1, cores_each)  # never more workers than cores (but one each)
    per_round = sum(pool.WORKER_MIB[b] for b in pool.installed_backends()) << 20
    assert default == 1 or default * per_round <= _sizing.available_memory() * pool.MEMORY_SHARE
    pool.configure(workers_per_backend="auto")
    assert pool.workers_per_backend() == default


def test_probes_spread_over_every_worker_and_a_crash_costs_one(two_numpy_workers, tmp_path):
    described = pool.warm(["numpy"])["numpy"]
    assert len(set(described["pids"])) == 2
    gate = tmp_path / "gate"  # every probe waits until all four were submitted
    said = 'print("dx-probe-in", os.getpid(), flush=True)\n                '
    says_pid = custom("SaysPid", said + gate_body(gate, "numpy"))
    payload = pool.target_payload(says_pid)
    spec = ProbeSpec(target="custom:SaysPid", backend="numpy")
    futures = [pool.submit(spec, target_payload=payload) for _ in range(4)]
    gate.touch()
    assert all(f.result(timeout=ANSWER_WITHIN).ok for f in futures)
    # a user's layer runs in the user-code workers, spread over as many as the backend has
    logs = pool.log_paths("numpy", user=True)
    assert [p.name for p in logs] == ["numpy~user.log", "numpy~user-1.log"]
    ran_in = [
        set(re.findall(r"dx-probe-in (\d+)", log.read_text(errors="replace"))) for log in logs
    ]
    assert all(ran_in) and not ran_in[0] & ran_in[1]  # each answered, in a process of its own
    assert not (ran_in[0] | ran_in[1]) & {str(p) for p in described["pids"]}  # not built-in

    exits = custom("ExitsOnOne", "os._exit(3)")
    crashing = pool.submit(
        ProbeSpec(target="custom:ExitsOnOne", backend="numpy"),
        target_payload=pool.target_payload(exits),
    )
    meanwhile = pool.submit(spec, target_payload=payload)
    crashed = crashing.result(timeout=ANSWER_WITHIN)
    assert crashed.status == "crashed" and "code 3" in crashed.error.message
    assert str(logs[0]) in crashed.error.message  # the slot it ran on: the first (fewest waiting)
    assert meanwhile.result(timeout=ANSWER_WITHIN).ok  # the other worker answered
    assert pool.warm(["numpy"])["numpy"]["pids"] == described["pids"]  # built-in: untouched


def test_a_survey_uses_every_worker_and_fewer_workers_stop_the_rest(two_numpy_workers):
    survey = dx.survey(
        ["Dense", "Flatten", "ReLU"],
        ["float32", "int8", "uint8", "float16"],
        ["float32"],
        backends="numpy",
        use_cache=False,
        progress=False,
    )
    assert len(survey.results) == 12 and all(r.ok for r in survey.results)
    second = pool.log_paths("numpy")[1]
    assert "--- numpy worker" in second.read_text()  # the second worker started and took cells
    assert {"numpy", "numpy-1"} <= set(pool._pools)
    before = worker_pids()
    pool.configure(workers_per_backend=1)
    assert set(pool._pools) <= {"numpy"}
    assert len(worker_pids()) == len(before) - 1
