"""The worker pool with real workers on every installed backend: answers, faults, shutdown.
The sweeps run on the four the general tests sweep (``tests/swept.py``); ``"all"`` and
``pool.warm()`` take every installed backend, openvino too where it is installed.

The tests share one set of warm workers (started once, in file order); the fault tests use the
numpy worker, the cheapest to restart. Custom layers are defined inside functions so that
cloudpickle ships them by value, as it does for classes defined in a notebook.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import keras
import psutil
import pytest
from swept import SWEPT

import dtype_explorer as dx
from dtype_explorer import pool
from dtype_explorer.backends import BACKENDS
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import ProbeResult, ProbeSet, ProbeSpec
from tests.on_backend import tool_children

CONV1D = {"filters": 2, "kernel_size": 3}
ROOT = Path(__file__).resolve().parents[2]


def conv1d_uint8(backend: str) -> ProbeSpec:
    return ProbeSpec(target="Conv1D", input_dtypes=("uint8",), backend=backend, kwargs=CONV1D)


def dense(backend: str, units: int = 3) -> ProbeSpec:
    return ProbeSpec(
        target="Dense", input_dtypes=("float32",), backend=backend, kwargs={"units": units}
    )


def workers() -> list[psutil.Process]:
    """The processes the tool started under this test process (``tool_children``)."""
    return tool_children()


def until(condition, seconds: float = 300) -> bool:
    """Wait until ``condition()`` holds, at most ``seconds`` (a bound against hanging, never a
    timed assertion); returns whether it held."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def custom(name: str, body: str) -> type:
    """A Layer subclass whose ``call`` runs ``body`` first; local, so pickled by value."""
    namespace: dict = {}
    exec(
        textwrap.dedent(f"""
        import ctypes, os, sys, time
        import keras

        class {name}(keras.layers.Layer):
            def call(self, x):
                {body}
                return x * 2
        """),
        namespace,
    )
    return namespace[name]


@pytest.fixture(scope="module", autouse=True)
def warm_workers():
    installed = pool.installed_backends()
    assert set(SWEPT) <= set(installed), "the four array backends must be installed"
    pool.configure(workers_per_backend=1)  # one worker each: the faults below are that one's
    described = pool.warm()  # openvino's too, where it is installed
    assert set(described) == set(installed)
    assert all(d["init_error"] is None for d in described.values()), described
    yield described


def test_each_backend_runs_in_its_own_process(warm_workers):
    pids = {d["pid"] for d in warm_workers.values()}
    assert len(pids) == len(warm_workers) and os.getpid() not in pids
    assert {d["backend"] for d in warm_workers.values()} == set(pool.installed_backends())
    assert keras.backend.backend() == os.environ["KERAS_BACKEND"]  # the kernel's is untouched


ROUND_TRIP = {
    "Dense": ProbeSpec(target="Dense", input_dtypes=("float32",), kwargs={"units": 4}),
    "LSTM": ProbeSpec(target="LSTM", input_dtypes=("float32",), kwargs={"units": 2}),
    "MultiHeadAttention": ProbeSpec(
        target="MultiHeadAttention",
        input_dtypes=("float32", "float32"),
        kwargs={"num_heads": 2, "key_dim": 4},
    ),
    "Embedding": ProbeSpec(
        target="Embedding", input_dtypes=("int32",), kwargs={"input_dim": 50, "output_dim": 4}
    ),
    # its autocast overflows float16: the trace's cast losses hold inf, which JSON cannot
    "float16 overflow": ProbeSpec(
        target="Dense",
        input_dtypes=("float32",),
        kwargs={"units": 3},
        policy="mixed_float16",
        values="large",
    ),
}


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name", list(ROUND_TRIP))
def test_a_workers_answer_read_back_is_the_record_the_worker_made(backend, name):
    """A worker sends its ProbeResult as compact JSON without the computed facts (or, when
    JSON cannot hold it, as its fields): the record the front reads back is the one the
    worker built, every field and every computed fact (headline, each trace step's flags).
    The worker's own record comes back beside its answer, pickled whole by the pool."""
    from dtype_explorer.runtime import _worker

    def answer_and_record(spec: dict) -> tuple[dict, ProbeResult]:  # runs in the worker
        from dtype_explorer.runtime import _worker as here

        made = []
        send = here.answer_of
        here.answer_of = lambda result: made.append(result) or send(result)
        try:
            answer = here.run(spec)
        finally:
            here.answer_of = send
        return answer, made[0]

    spec = ROUND_TRIP[name].model_copy(update={"backend": backend})
    answer, made = pool.call(backend, answer_and_record, spec.to_dict()).result(timeout=300)
    assert made.ok and made.trace and made.backend == backend, made.summary()
    back = _worker.read_answer(answer)
    everything = [json.dumps(r.model_dump(mode="json"), sort_keys=True) for r in (back, made)]
    assert back == made and everything[0] == everything[1]
    assert back.headline == made.headline
    assert [s.flags for s in back.trace] == [s.flags for s in made.trace]
    if name == "float16 overflow":  # an inf JSON would have written as null
        assert _worker.ANSWER_FIELDS in answer, sorted(answer)
        losses = [x for s in back.trace for x in s.losses if x.overflowed]
        assert losses and any(math.isinf(a) for x in losses for _, a in x.examples)
    else:
        assert _worker.ANSWER in answer, sorted(answer)


def test_scenario_1_conv1d_uint8_diverges_across_backends():
    results = ProbeSet(
        results=tuple(pool.run_many([conv1d_uint8(b) for b in SWEPT], use_cache=False))
    )
    assert sorted(results.backends) == sorted(SWEPT)
    assert results["jax"].status == "ok" and results["jax"].output_dtype == "float32"
    for backend in ("tensorflow", "torch", "numpy"):
        assert results[backend].status == "error", results[backend].summary()
        assert results[backend].error.where == "call"
    assert results.verdict == "diverges"
    assert all(r.device.startswith("cpu") for r in results)  # no GPU here, and it says so
    assert all(r.versions.get("keras") == keras.__version__ for r in results)


def test_dx_probe_all_returns_a_probe_set():
    results = dx.probe("Conv1D", input_dtype="uint8", backend="all", kwargs=CONV1D, use_cache=False)
    assert isinstance(results, ProbeSet)
    assert list(results.backends) == pool.installed_backends()
    assert results.verdict == "diverges"
    assert results["jax"].output_dtype == "float32"
    assert "across backends: diverges" in results.summary()


def gate_body(gate: Path, backend: str) -> str:
    """A layer body that, on ``backend``, waits until the test creates the file ``gate`` (at
    most 10 minutes, then raises: a test that never opens it fails, never hangs)."""
    return (
        f"if keras.backend.backend() == {backend!r}:\n"
        "                    deadline = time.monotonic() + 600\n"
        f"                    while not os.path.exists({str(gate)!r}):\n"
        "                        if time.monotonic() > deadline:\n"
        "                            raise RuntimeError('the test never opened the gate')\n"
        "                        time.sleep(0.05)"
    )


def test_results_stream_as_they_arrive(tmp_path):
    """A result is yielded while a slower probe is still running: numpy's answer is held back
    (its layer waits on a file) until every other backend's answer came out of ``run_many``;
    were they held until all finished, numpy would never be let go (and would raise)."""
    gate = tmp_path / "gate"
    held_on_numpy = custom("HeldOnNumpy", gate_body(gate, "numpy"))
    specs = [
        ProbeSpec(target="custom:HeldOnNumpy", input_dtypes=("float16",), backend=b) for b in SWEPT
    ]
    arrived = []
    for result in pool.run_many(specs, target=held_on_numpy, use_cache=False):
        assert result.status == "ok", result.summary()
        arrived.append(result.backend)
        if len(arrived) == len(SWEPT) - 1:
            assert not gate.exists() and "numpy" not in arrived
            gate.touch()  # numpy may finish now
    assert sorted(arrived) == sorted(SWEPT)
    assert arrived[-1] == "numpy"


def test_custom_layer_from_a_notebook_reaches_every_worker():
    doubler = custom("Doubler", "pass")
    results = ProbeSet(
        results=tuple(
            pool.run_many(
                [
                    ProbeSpec(
                        target="custom:Doubler",
                        input_dtypes=("float16",),
                        policy="mixed_float16",
                        backend=b,
                    )
                    for b in SWEPT
                ],
                target=doubler,
            )
        )
    )
    for result in results:
        assert result.status == "ok", result.summary()
        assert result.output_dtype == "float16"
        assert not result.cached


def test_a_layer_instance_travels_as_its_config():
    layer = keras.layers.Dense(5)
    spec = ProbeSpec(target="custom:Dense", input_dtypes=("float32",), backend="torch")
    result = pool.submit(spec, target_payload=pool.target_payload(layer)).result()
    assert result.status == "ok", result.summary()
    assert result.output_dtype == "float32"


def test_a_layer_that_cannot_travel_fails_per_backend_not_the_set():
    unpicklable = custom("Unpicklable", "pass")
    unpicklable.lock = __import__("threading").Lock()  # cloudpickle cannot pickle a lock
    results = list(
        pool.run_many(
            [ProbeSpec(target="custom:Unpicklable", backend=b) for b in ("jax", "numpy")],
            target=unpicklable,
        )
    )
    assert len(results) == 2
    for result in results:
        assert result.status == "error"
        assert result.error.where == "transfer"
        assert "could not be pickled" in result.error.message


def test_a_class_only_the_kernel_can_import_is_reported_by_the_worker(monkeypatch):
    module = types.ModuleType("dx_kernel_only")
    module.KernelOnly = custom("KernelOnly", "pass")
    module.KernelOnly.__module__ = "dx_kernel_only"
    monkeypatch.setitem(sys.modules, "dx_kernel_only", module)  # pickled by reference
    spec = ProbeSpec(target="custom:KernelOnly", backend="jax")
    result = pool.submit(spec, target_payload=pool.target_payload(module.KernelOnly)).result()
    assert result.status == "error" and result.error.where == "transfer"
    assert "dx_kernel_only" in result.error.message
    assert pool.submit(dense("jax"), use_cache=False).result().ok


@pytest.mark.parametrize(
    ("name", "body", "signal_or_code", "in_log"),
    [
        ("ExitsHard", "os._exit(3)", "code 3", "numpy worker"),
        # pebble takes a worker that exits with 0 for one that ended as asked: the probe was
        # left unanswered (to its time limit) until the workers' exit code 0 read as lost
        ("ExitsZero", "os._exit(0)", "code 0", "numpy worker"),
        ("Segfaults", "ctypes.string_at(0)", "SIGSEGV", "Segmentation fault"),
    ],
)
def test_a_crashing_layer_reports_crashed_and_the_worker_comes_back(
    name, body, signal_or_code, in_log
):
    fine = ProbeSpec(target="custom:Fine", backend="numpy")
    fine_layer = pool.target_payload(custom("Fine", "pass"))
    assert pool.submit(fine, target_payload=fine_layer).result().ok  # both workers are up
    assert pool.submit(dense("numpy"), use_cache=False).result().ok
    before = {p.pid for p in workers()}
    spec = ProbeSpec(target=f"custom:{name}", backend="numpy")
    result = pool.submit(spec, target_payload=pool.target_payload(custom(name, body))).result()
    assert result.status == "crashed", result.summary()
    assert result.verdict == "error"
    assert signal_or_code in result.error.message
    # a user's layer runs in the backend's user-code worker, never in the built-in one
    assert str(pool.log_path(pool.user_slot("numpy"))) in result.error.message
    assert in_log in pool.log_path(pool.user_slot("numpy")).read_text(errors="replace")
    assert pool.submit(dense("numpy"), use_cache=False).result().ok
    assert pool.submit(fine, target_payload=fine_layer).result().ok
    assert len(workers()) <= len(before)  # the user worker restarted, not duplicated
    assert before - {p.pid for p in workers()}  # the crashed one is gone


def test_a_hanging_layer_times_out_and_the_next_probe_succeeds(monkeypatch):
    monkeypatch.setitem(pool._config, "timeout", 60.0)
    pool.configure(timeout=1.5)  # the configured default applies
    hangs = custom("Hangs", "time.sleep(600)")
    spec = ProbeSpec(target="custom:Hangs", backend="numpy")
    result = pool.submit(spec, target_payload=pool.target_payload(hangs)).result()
    assert result.status == "timeout", result.summary()
    assert "1.5 s" in result.error.message
    assert pool.submit(dense("numpy"), use_cache=False, timeout=120).result().ok


@pytest.mark.parametrize(
    ("importing_keras", "deadline", "status", "kind", "said"),
    [
        # the watchdog starts where the backend's import does: a start it stops is one that
        # hangs, however slowly it got there
        ("time.sleep(600)", 1, "timeout", "WorkerStartTimeout", "within 1 s"),
        # no deadline a loaded machine could reach before the import dies
        (
            "os._exit(3)",
            pool.DEFAULT_START_TIMEOUT,
            "crashed",
            "WorkerCrashed",
            "died while starting",
        ),
    ],
    ids=["hangs", "dies"],
)
def test_a_worker_that_fails_while_starting_is_reported_and_replaced(
    importing_keras, deadline, status, kind, said, tmp_path, monkeypatch
):
    fake_keras = tmp_path / "keras"
    fake_keras.mkdir()
    (fake_keras / "__init__.py").write_text(f"import os, time\n{importing_keras}\n")
    monkeypatch.setitem(pool._config, "start_timeout", pool.DEFAULT_START_TIMEOUT)
    monkeypatch.setitem(pool._config, "backends", None)
    pool.configure(backends=[b for b in BACKENDS if b != "numpy"])  # stops the numpy worker only
    pool.configure(backends=BACKENDS)
    with monkeypatch.context() as patched:
        patched.syspath_prepend(tmp_path)  # spawned workers start with this sys.path
        pool.configure(start_timeout=deadline)
        results = [
            f.result(timeout=120)
            for f in [pool.submit(dense("numpy", units), use_cache=False) for units in (2, 3)]
        ]
        with pytest.raises(pool.WorkerStartError, match=said):
            pool.warm(["numpy"])
    for result in results:  # the queued probe too: the worker's start failed, not a shutdown
        assert result.status == status and result.error.type == kind, result
        assert said in result.error.message
    if status == "timeout":
        assert "in _import_backend" in pool.log_path("numpy").read_text()  # where it hung
    pool.configure(start_timeout=pool.DEFAULT_START_TIMEOUT)
    assert pool.submit(dense("numpy"), use_cache=False).result().ok  # a new worker starts


def test_a_custom_layer_may_import_what_workers_keep_out_of_keras():
    uses = custom("UsesPandas", "import pandas, IPython")  # kept out of Keras's import only
    spec = ProbeSpec(target="custom:UsesPandas", backend="numpy")
    result = pool.submit(spec, target_payload=pool.target_payload(uses)).result()
    assert result.ok, result.summary()


def test_a_worker_killed_while_idle_is_replaced_for_the_next_probe():
    numpy_worker = pool.warm(["numpy"])["numpy"]["pid"]
    os.kill(numpy_worker, signal.SIGKILL)  # as the out-of-memory killer would
    time.sleep(1)  # pebble notices within its 0.1 s poll (and reaps it: no psutil wait here)
    result = pool.submit(dense("numpy"), use_cache=False).result()
    assert result.ok, result.summary()
    assert pool.warm(["numpy"])["numpy"]["pid"] != numpy_worker


def test_the_backend_cap_limits_workers(monkeypatch):
    for setting in ("backends", "timeout", "start_timeout"):
        monkeypatch.setitem(pool._config, setting, pool._config[setting])
    monkeypatch.setitem(pool._config, "backends", None)
    # Other tests of this process may have left processes of their own (an engine's workers,
    # a kernel), which may end meanwhile: the pool's own workers are the ones followed
    started = pool.warm(["torch", "numpy", "jax", "tensorflow"])
    torch_workers = set(started.pop("torch")["pids"])
    kept = {pid for described in started.values() for pid in described["pids"]}
    assert torch_workers | kept <= {p.pid for p in workers()}
    monkeypatch.setenv(pool.ENV_BACKENDS, "jax,numpy")
    assert pool.installed_backends() == ["jax", "numpy"]
    with pytest.raises(InvalidSpecError, match="torch"):
        pool.submit(dense("torch"))
    monkeypatch.setenv(pool.ENV_BACKENDS, "jax,nunpy")
    with pytest.raises(InvalidSpecError, match="did you mean 'numpy'"):
        pool.installed_backends()
    pool.configure(backends=["numpy", "jax", "tensorflow"])  # stops the torch worker
    assert pool.installed_backends() == ["numpy", "jax", "tensorflow"]
    alive = {p.pid for p in workers()}
    assert kept <= alive and not torch_workers & alive  # the torch worker alone was stopped
    for bad in (0, -1, float("nan"), 1e12):
        with pytest.raises(InvalidSpecError, match=r"math\.inf"):
            pool.configure(backends=["numpy"], start_timeout=bad)
    assert pool.installed_backends() == ["numpy", "jax", "tensorflow"]  # nothing changed
    pool.configure(timeout=math.inf, start_timeout=math.inf)  # no limits


def test_shutdown_answers_running_and_queued_probes_and_leaves_no_process(tmp_path):
    pool.warm(["numpy"])
    started = tmp_path / "started"
    body = f"open({str(started)!r}, 'w').close(); time.sleep(600)"
    hangs = pool.target_payload(custom("HangsAgain", body))
    spec = ProbeSpec(target="custom:HangsAgain", backend="numpy")
    running = pool.submit(spec, target_payload=hangs)
    queued = pool.submit(spec, target_payload=hangs)
    assert until(started.exists), "the first probe never started"  # running, not queued
    pool.shutdown()
    for pending in (running, queued):
        result = pending.result(timeout=10)
        assert result.status == "error" and result.error.type == "WorkerShutdown", result
    assert workers() == []


def test_shutdown_right_after_submit_is_not_a_crash():
    """pebble may not yet know which worker took the task and report the pool as broken."""
    hangs = pool.target_payload(custom("HangsToo", "time.sleep(600)"))
    for dispatched_for in (0.0, 0.01, 0.02, 0.05):
        pool.warm(["numpy"])
        pending = pool.submit(
            ProbeSpec(target="custom:HangsToo", backend="numpy"), target_payload=hangs
        )
        time.sleep(dispatched_for)
        pool.shutdown()
        result = pending.result(timeout=10)
        assert result.status == "error" and result.error.type == "WorkerShutdown", result


def test_no_orphans_after_interpreter_exit_and_main_classes_travel(tmp_path):
    script = textwrap.dedent("""
        import json, psutil, keras
        import dtype_explorer as dx

        class Doubler(keras.layers.Layer):
            def call(self, x):
                return x * 2

        result = dx.probe(Doubler, input_dtype="float16", policy="mixed_float16",
                          backend="jax")
        print(json.dumps({"result": result.to_dict(),
                          "children": [p.pid for p in psutil.Process().children()]}))
    """)
    env = {
        **os.environ,
        "KERAS_BACKEND": "numpy",
        "PYTHONPATH": str(ROOT),
        "DTYPE_EXPLORER_CACHE_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["result"]["status"] == "ok", report["result"]
    assert report["result"]["output_dtype"] == "float16"
    assert report["children"]

    def alive() -> list[int]:
        return [
            pid
            for pid in report["children"]
            if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        ]

    until(lambda: not alive())  # they end as the interpreter exits, however loaded the machine
    assert alive() == []
