"""Workers' memory stays bounded: a worker that holds more than its budget after a task is
replaced, with every task answered once, and the replacement logged. Real numpy workers."""

from __future__ import annotations

import logging
import re
import time

import psutil
import pytest

from dtype_explorer import pool
from dtype_explorer.analyses import _run
from dtype_explorer.records import ProbeSpec
from dtype_explorer.runtime import _sizing as sizing
from dtype_explorer.runtime import _spawn as spawn
from dtype_explorer.runtime import cache


def test_the_default_budget_fits_the_machine(monkeypatch):
    """Twice what a worker holds once started, no more than its share of the machine, never
    under what it holds once started; the environment's figure wins."""
    monkeypatch.delenv(sizing.ENV_WORKER_MIB, raising=False)
    monkeypatch.setattr(sizing, "physical_memory", lambda: 64 << 30)
    monkeypatch.setattr(sizing, "cpus", lambda: 4)
    assert sizing.memory_budget("tensorflow") == 2000 << 20
    monkeypatch.setattr(sizing, "physical_memory", lambda: 6 << 30)
    monkeypatch.setattr(sizing, "cpus", lambda: 2)
    assert sizing.memory_budget("tensorflow") == 1536 << 20  # 6 GiB x 0.5 / 2 CPUs
    assert sizing.memory_budget("numpy") == 800 << 20  # twice 400 fits under the cap
    monkeypatch.setattr(sizing, "physical_memory", lambda: 2 << 30)
    assert sizing.memory_budget("tensorflow") == 1000 << 20  # never under what it holds
    monkeypatch.setenv(sizing.ENV_WORKER_MIB, "300")
    assert sizing.memory_budget("tensorflow") == 300 << 20
    assert sizing.resident_bytes() == psutil.Process().memory_info().rss


def specs(count: int) -> list[ProbeSpec]:
    return [
        ProbeSpec(target="Dense", input_dtypes=("float32",), backend="numpy", kwargs={"units": u})
        for u in range(1, count + 1)
    ]


@pytest.fixture
def small_budget(tmp_path, monkeypatch):
    """Fresh numpy workers whose budget is just under what one holds once started: the first
    answer puts it over."""
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    pool.shutdown(zygotes=False)
    held = psutil.Process(pool.warm(["numpy"])["numpy"]["pid"]).memory_info().rss >> 20
    pool.shutdown(zygotes=False)
    monkeypatch.setenv(sizing.ENV_WORKER_MIB, str(max(1, held - 20)))  # read by new workers
    yield
    pool.shutdown(zygotes=False)


def test_a_worker_over_its_budget_is_replaced_and_no_task_is_lost_or_repeated(
    small_budget, caplog, monkeypatch
):
    """On the old code each answer of the bloated worker's queue retired the slot's pool
    again, the new one included (a worker start per queued probe). Now the worker that ran a
    task over budget is replaced once; its queued tasks are answered by it, each once."""
    first = pool.warm(["numpy"])["numpy"]["pid"]
    monkeypatch.setattr(_run, "WINDOW", 4)  # probes queued per worker: later ones wait
    asked = specs(10)
    with caplog.at_level(logging.INFO, logger="dtype_explorer.pool"):
        results = _run.run_specs(asked, use_cache=False, progress=False)
    assert [r.spec.kwargs["units"] for r in results] == list(range(1, 11))
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    replaced = [r.getMessage() for r in caplog.records if "replaced" in r.getMessage()]
    # the first worker once, then the one that took the probes sent after: not once per
    # answer the first gave to its queue
    assert len(replaced) <= 3, replaced
    assert re.search(r"resident memory \d+ MiB is over the budget of \d+ MiB", replaced[0])
    log = pool.log_path("numpy").read_text()
    assert f"dtype-explorer worker {first}: resident memory" in log
    assert pool.warm(["numpy"])["numpy"]["pid"] != first
    assert _ends(first)  # the old worker ends once its queue is answered
    # the new worker answers too, and is replaced in its turn
    with caplog.at_level(logging.INFO, logger="dtype_explorer.pool"):
        more = _run.run_specs(specs(2), use_cache=False, progress=False)
    assert [r.ok for r in more] == [True, True]
    assert sum("replaced" in r.getMessage() for r in caplog.records) == len(replaced) + 1
    assert "numpy" not in spawn.pools


def _ends(pid: int, seconds: float = 60) -> bool:
    """Whether process ``pid`` ends within ``seconds`` (a zombie counts as ended)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False
