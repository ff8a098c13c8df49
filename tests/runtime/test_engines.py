"""Engines: other Keras releases and Keras 2, created with pip beside the installed Keras, run in
their own real worker processes, checked against the raw release run in a subprocess.

The engines are created once per session (``tests/conftest.py``), in the session's cache dir.
Creating one needs the package index: a test that needs it fails when it is unreachable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psutil
import pytest

import dtype_explorer as dx
from dtype_explorer import engines
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import ProbeSpec, engine_spec
from dtype_explorer.runtime import _plan as plans
from dtype_explorer.versions import library_version

pytestmark = pytest.mark.timeout(900)

#: The answer that changed at Keras 3.12.0 (research/engines/NOTES.md §3.1): float32 up to
#: 3.11.3, int32 from 3.12.0, on every backend.
DISCRETIZATION = {"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"}


@pytest.fixture(scope="module", autouse=True)
def _engine_workers_stopped():
    """Other modules count the pool's workers: the engines' are stopped after this one."""
    yield
    for engine in engines.list():
        dx.pool._stop_engine(engine.spec)


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name != ".locks") if root.exists() else []


def _raw(site: str, code: str, backend: str, *, legacy: bool = False) -> dict:
    """Run ``code`` with the engine's release alone first on sys.path (no dtype-explorer),
    in a fresh process; it prints one JSON line."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = site
    if legacy:
        env["TF_USE_LEGACY_KERAS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- names


def test_engine_names_are_checked_before_pip_sees_them():
    assert engine_spec("3.11.3") == engine_spec(" keras == 3.11.3 ") == "keras==3.11.3"
    assert engine_spec("tf-keras") == "tf_keras"
    assert ProbeSpec(target="Dense", engine="3.11.3").engine == "keras==3.11.3"
    for bad in ("keras==3.1.0 --index-url=http://evil", "keras", "torch==2.0.0", "3.11", 3.11):
        with pytest.raises(InvalidSpecError, match="engine must be None"):
            engine_spec(bad)
    with pytest.raises(InvalidSpecError, match="tensorflow backend only"):
        dx.probe("Dense", backend="numpy", engine="tf_keras")


def test_the_default_engine_stays_out_of_the_cache_key():
    plain = ProbeSpec(target="Dense")
    assert "engine" not in plain.cache_key()
    assert '"engine":"keras==3.11.3"' in ProbeSpec(target="Dense", engine="3.11.3").cache_key()


# ---------------------------------------------------------------- creation


def test_creating_twice_reuses_the_first(keras_3_11_engine):
    lines: list[str] = []
    again = engines.create("3.11.3", progress=lines.append)
    assert again.path == keras_3_11_engine.path
    assert again.created == keras_3_11_engine.created
    assert lines == []  # no pip ran
    listed = {e.spec: e for e in engines.list()}
    assert listed["keras==3.11.3"].disk_bytes > 5 * 2**20
    assert listed["keras==3.11.3"].packages == ("keras==3.11.3",)
    assert keras_3_11_engine.base["keras"] == library_version("keras")


def test_two_creators_at_once_make_one_engine(monkeypatch, tmp_path):
    """The second creator waits on the engine's file lock, then reuses the first one's."""
    monkeypatch.setenv(engines.ENV_DIR, str(tmp_path))
    lines: list[str] = []
    made: list = []

    def creator() -> None:
        made.append(engines.create("keras==3.10.0", progress=lines.append))

    threads = [threading.Thread(target=creator) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert len(made) == 2 and made[0].path == made[1].path
    assert sum(line.startswith("[engine] installing") for line in lines) == 1
    assert any(line.startswith("waiting for another process") for line in lines)
    assert _leftovers(tmp_path) == ["keras-3.10.0"]


def test_a_release_that_does_not_exist_leaves_nothing(keras_3_11_engine):
    root = engines.root()  # the machine's engines, which other sessions may add to meanwhile
    with pytest.raises(engines.EngineError, match=r"no such release.*3\.9\.0"):
        engines.create("keras==3.99.0", progress=False)
    assert engines.get("keras==3.99.0") is None
    assert [name for name in _leftovers(root) if "3.99.0" in name] == []


def test_offline_is_a_clear_error_that_leaves_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv(engines.ENV_DIR, str(tmp_path))
    for name, value in {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "",
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "2",
    }.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(engines.EngineError, match="package index could not be reached"):
        engines.create("keras==3.10.0", progress=False)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("how", ["cancel", "ctrl-c"])
def test_a_cancel_kills_pip_and_leaves_nothing(how, monkeypatch, tmp_path):
    """``cancel`` set from another thread, or Ctrl-C (KeyboardInterrupt in the main thread)
    while pip is installing: pip's whole process group is killed, nothing is left."""
    monkeypatch.setenv(engines.ENV_DIR, str(tmp_path))
    cancel = threading.Event()
    started: list[int] = []

    seen: list[str] = []

    def stop_once_pip_runs(line: str) -> None:
        seen.append(line)
        if not line.startswith("[engine]") and not started:  # pip's output: installing
            started.extend(_pip_processes())
            if how == "cancel":
                threading.Thread(target=cancel.set).start()
            else:
                # Ctrl-C: a KeyboardInterrupt in the main thread, here while it reads pip's
                # lines. Raised, not simulated with _thread.interrupt_main(): once in a whole
                # run that raised nothing (it does nothing while SIGINT is not Python's own
                # handler, and its exception is lost when it lands in a __del__).
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engines.create("keras==3.10.0", progress=stop_once_pip_runs, cancel=cancel)
    assert started, f"pip never started; lines seen: {seen}"
    assert not [p for p in map(_alive, started) if p], "a pip process survived the cancel"
    assert _leftovers(tmp_path) == []


def _pip_processes() -> list[int]:
    """This process's children running pip (not the pool's workers)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "pip" in child.cmdline():
                found.append(child.pid)
        except psutil.Error:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_release_that_would_replace_an_installed_package_is_refused():
    installed = library_version("tensorflow")  # read from metadata: nothing imported
    assert installed != "missing", "tensorflow is installed by the test command"
    plan = [("tf_keras", "2.20.1"), ("tensorflow", "2.20.0")]  # what pip resolves for it
    with pytest.raises(engines.EngineError) as raised:
        plans.refuse_replacements("tf_keras==2.20.1", "tf_keras", plan)
    assert f"tensorflow==2.20.0 (installed: {installed})" in str(raised.value)
    assert "cannot run with the installed backends" in str(raised.value)
    # the same release installed already replaces nothing (tensorflow-hub in the Keras 2
    # kernel, where the engine's own site is installed)
    plans.refuse_replacements("tf_keras==2.20.1", "tf_keras", [("tensorflow", installed)])


def test_remove_deletes_the_engine_and_list_shows_disk_use(
    keras_3_11_engine, monkeypatch, tmp_path
):
    shutil.copytree(keras_3_11_engine.path, tmp_path / "keras-3.11.3")
    monkeypatch.setenv(engines.ENV_DIR, str(tmp_path))
    (listed,) = engines.list()
    assert listed.spec == "keras==3.11.3" and listed.disk_bytes > 5 * 2**20
    described = dx.pool.warm(["numpy"], engine="keras==3.11.3")
    assert described["numpy"]["engine"] == "keras==3.11.3"
    assert "numpy@keras==3.11.3" in dx.pool._pools
    assert engines.remove("keras==3.11.3") is True
    assert "numpy@keras==3.11.3" not in dx.pool._pools  # its workers were stopped first
    assert engines.list() == [] and _leftovers(tmp_path) == []
    assert engines.remove("keras==3.11.3") is False


# ---------------------------------------------------------------- a Keras 3 release


def test_an_older_release_answers_as_raw_keras_of_that_release(keras_3_11_engine):
    """Discretization(dtype="float32") on float32 (2, 3): float32 in Keras 3.11.3, int32 from
    3.12.0 (found with the engine itself; NOTES.md §3.1). The installed Keras answers first
    (cached), and its answer is not served for the engine."""
    kwargs = dict(kwargs=DISCRETIZATION, shape=(2, 3), backend="numpy")
    dx.cache.clear()  # other tests of the session ask this too (test_cli's engine test)
    installed = dx.probe("Discretization", **kwargs)
    old = dx.probe("Discretization", engine="keras==3.11.3", **kwargs)
    raw = _raw(
        keras_3_11_engine.site,
        """
        import json, numpy as np, keras
        layer = keras.layers.Discretization(bin_boundaries=[0.5, 1.5, 2.5], dtype="float32")
        y = layer(np.array([[0, 1, 2], [3, 0, 1]], dtype="float32"))
        print(json.dumps({"version": keras.__version__,
                          "dtype": keras.backend.standardize_dtype(y.dtype)}))
        """,
        "numpy",
    )
    assert raw == {"version": "3.11.3", "dtype": "float32"}
    assert (old.status, old.output_dtype) == ("ok", raw["dtype"])
    assert not old.cached
    assert old.versions["keras"] == "3.11.3" and old.versions["engine"] == "keras==3.11.3"
    assert installed.output_dtype == "int32" and installed.versions["keras"] != "3.11.3"
    again = dx.probe("Discretization", engine="keras==3.11.3", **kwargs)
    assert again.cached and again.output_dtype == "float32"
    assert again.versions["keras"] == "3.11.3"


def test_a_script_whose_main_imports_keras_still_gets_the_engine(keras_3_11_engine, tmp_path):
    """spawn re-imports a script's ``__main__`` in a child before its initializer runs: a
    ``import keras`` there would load the installed Keras before the engine's path is set.
    Our workers never re-import ``__main__`` (``_spawn.WorkerContext``); the answer is
    3.11.3's."""
    script = tmp_path / "uses_keras.py"
    script.write_text(
        textwrap.dedent(
            """
            import keras  # the installed Keras, in the script's own process
            import dtype_explorer as dx
            r = dx.probe("Discretization", backend="numpy", engine="keras==3.11.3",
                         kwargs={"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"},
                         shape=(2, 3), use_cache=False)
            print(keras.__version__, r.versions["keras"], r.output_dtype, r.status)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    installed, answered, dtype, status = done.stdout.split()[-4:]
    assert installed != "3.11.3"
    assert (answered, dtype, status) == ("3.11.3", "float32", "ok")


def test_a_worker_whose_keras_was_imported_early_says_so(keras_3_11_engine):
    """If the installed Keras got into a worker before its initializer (a sitecustomize), the
    worker refuses to answer for the engine, and says why: a probe (``run``) and a
    ``pool.call`` (``%%dtype_trace --engine``'s cell) alike, never answering with the installed
    Keras."""
    code = f"""
        import json, keras, cloudpickle
        from dtype_explorer.records import Engine
        from dtype_explorer.runtime import _worker
        _worker._enter_engine(Engine.from_json({keras_3_11_engine.to_json()!r}))
        try:
            _worker.call(cloudpickle.dumps((len, ([1],))), False)
            called = "ran"
        except RuntimeError as error:
            called = str(error)
        print(json.dumps([_worker._state["init_error"], called]))
    """
    env = dict(os.environ, KERAS_BACKEND="numpy")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    message, called = json.loads(done.stdout.strip().splitlines()[-1])
    assert "keras was imported from the installed environment" in message
    assert "keras==3.11.3" in message
    assert called.startswith("this worker cannot run engine keras==3.11.3: ") and message in called


# ---------------------------------------------------------------- Keras 2


#: What raw tf_keras says: the output, what call() received, the first variable as stored and
#: as read inside call().
RAW_KERAS2 = """
    import json, numpy as np, tensorflow as tf, tf_keras
    assert "keras" not in __import__("sys").modules, "Keras 3 was imported"
    seen = {}
    def probe(cls, kwargs, dtype, policy, shape):
        tf_keras.mixed_precision.set_global_policy(policy)
        def record(layer, inputs):
            v = layer.weights[0]
            seen.update(received=inputs.dtype.name, read=v.dtype.name,
                        stored=getattr(v, "true_dtype", v.dtype).name)
        class Probe(cls):  # Keras 2 passes `training` only to a call() that names it
            if cls is tf_keras.layers.BatchNormalization:
                def call(self, inputs, training=None):
                    record(self, inputs)
                    return super().call(inputs, training=training)
            else:
                def call(self, inputs):
                    record(self, inputs)
                    return super().call(inputs)
        x = (np.arange(np.prod(shape)) % 4).reshape(shape).astype(dtype)
        y = Probe(**kwargs)(x)
        tf_keras.mixed_precision.set_global_policy("float32")
        return dict(seen, output=y.dtype.name)
    print(json.dumps({
        "bn_uint8": probe(tf_keras.layers.BatchNormalization, {}, "uint8", "float32", (2, 3)),
        "dense_float64": probe(tf_keras.layers.Dense, {"units": 4}, "float64", "float32", (2, 3)),
        "dense_mixed": probe(tf_keras.layers.Dense, {"units": 4}, "float64", "mixed_float16",
                             (2, 3)),
        "version": tf_keras.__version__,
    }))
"""

KERAS2_CASES = {
    "bn_uint8": ("BatchNormalization", {}, "uint8", "float32"),
    "dense_float64": ("Dense", {"units": 4}, "float64", "float32"),
    "dense_mixed": ("Dense", {"units": 4}, "float64", "mixed_float16"),
}


@pytest.fixture(scope="module")
def raw_keras2(tf_keras_engine):
    return _raw(tf_keras_engine.site, RAW_KERAS2, "tensorflow", legacy=True)


@pytest.mark.parametrize("case", list(KERAS2_CASES))
def test_keras2_engine_answers_as_raw_tf_keras(case, raw_keras2, tf_keras_engine):
    target, kwargs, dtype, policy = KERAS2_CASES[case]
    raw = raw_keras2[case]
    r = dx.probe(target, dtype, policy, kwargs=kwargs, shape=(2, 3), engine="tf_keras")
    assert r.status == "ok", r.error
    assert r.backend == "tensorflow"
    assert r.versions["tf_keras"] == raw_keras2["version"] == tf_keras_engine.version
    assert r.output_dtype == raw["output"]
    stages = {s.stage: s for s in r.cast_path if s.index in (0, None)}
    assert stages["input"].dtype == dtype
    assert stages["autocast"].dtype == raw["received"]
    assert "converted" not in stages  # no such stage in Keras 2: said in the basis
    assert any("converted: no such stage in Keras 2" in b for b in r.basis)
    first = next(iter(r.variables.values()))
    assert (first.stored, first.read) == (raw["stored"], raw["read"])
    # tf_keras's policy rule (issue 39 item 7): a float input is cast to the compute dtype (what
    # raw call() received) and the output is documented in it; a uint8 input is not cast
    floating = dtype.startswith("float")
    assert r.documented_dtype == (raw["received"] if floating else None)
    assert r.verdict == ("as-documented" if floating else "undocumented")


def test_keras2_under_mixed_float16_reads_float32_variables_as_float16(raw_keras2):
    """The facts behind the comparison (research NOTES.md §4): AutoCastVariable."""
    assert raw_keras2["dense_mixed"] == {
        "received": "float16",
        "read": "float16",
        "stored": "float32",
        "output": "float16",
    }
    assert raw_keras2["bn_uint8"]["received"] == "uint8"


def test_keras2_refusing_an_input_is_its_answer_not_a_tool_failure(tf_keras_engine):
    """tf_keras filters its traceback down to the caller's frames, so the innermost frame of
    its error is the call recorder: a pass-through, whose callee's error is Keras 2's (the
    old code named the recorder ``call`` and said ``where="tool"``, status invalid)."""
    raw = _raw(
        tf_keras_engine.site,
        """
        import json, numpy as np, tf_keras
        layer = tf_keras.layers.Discretization(bin_boundaries=[0.5, 1.5])
        try:
            layer(np.array([[0, 1, 2]], dtype="uint8"))
        except Exception as error:
            print(json.dumps({"type": type(error).__name__}))
        """,
        "tensorflow",
        legacy=True,
    )
    r = dx.probe("Discretization", "uint8", engine="tf_keras")
    assert (r.status, r.error.type, r.error.where) == ("error", raw["type"], "call"), r.error


def test_keras2_says_what_has_no_counterpart(tf_keras_engine):
    op = dx.probe("ops.add", engine="tf_keras")
    assert op.status == "invalid" and "no counterpart in Keras 2" in op.error.message
    training = dx.probe("Dense", kwargs={"units": 2}, engine="tf_keras", mode="training")
    assert training.status == "invalid" and "Keras 2" in training.error.message


def test_surveys_and_promotion_tables_run_on_an_engine(keras_3_11_engine):
    survey = dx.survey(
        ["Discretization", "Dense"],
        ["float32"],
        ["float32"],
        backends="numpy",
        engine="3.11.3",
        progress=False,
    )
    assert survey.engine == "keras==3.11.3"
    assert {r.versions["keras"] for r in survey.results} == {"3.11.3"}
    table = dx.promotion_table(
        "add",
        dtypes=["int8", "uint8"],
        backends="numpy",
        references=["numpy"],
        engine="keras==3.11.3",
        progress=False,
    )
    assert table.engine == "keras==3.11.3"
    assert {r.versions["keras"] for r in table.results} == {"3.11.3"}
    assert table.cell("int8", "uint8").results["numpy"].output_dtype == "int16"
    with pytest.raises(InvalidSpecError, match="no counterpart in Keras 2"):
        dx.promotion_table("add", dtypes=["int8"], backends="tensorflow", engine="tf_keras")


def test_check_model_on_an_engine_rebuilds_the_model_there(keras_3_11_engine):
    """The model (built with the installed Keras) is rebuilt from its config in 3.11.3's
    worker, on this process's backend: Discretization's output is float32 there, int32 here
    (its ``dtype="float32"`` was given by the user, so it is sent, issue 23.7). Dense's
    ``quantization_config``, unknown to 3.11.3, was left at its default: it is not sent at all
    (3.11.3 would refuse it), so no note needs to say it was dropped."""
    import keras

    inputs = keras.Input((3,), dtype="float32")
    x = keras.layers.Dense(4)(inputs)
    out = keras.layers.Discretization(bin_boundaries=[0.5, 1.5, 2.5], dtype="float32")(x)
    model = keras.Model(inputs, out)
    here = dx.check_model(model)
    there = dx.check_model(model, engine="keras==3.11.3")
    assert (here.engine, there.engine, there.keras) == (None, "keras==3.11.3", "3.11.3")
    assert here.layers[-1].outputs[0].dtype == "int32"
    assert there.layers[-1].outputs[0].dtype == "float32"
    assert not any("quantization_config" in n for n in there.notes)
