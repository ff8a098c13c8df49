"""The last unclear or wrong errors of issue 31, each on the real thing: a function from the
user's script through ``pool.call``, a time limit an in-process probe cannot keep, bisect's
arguments checked before any engine is made, a tampered ``ProbeSpec.structure``, and a worker
that a user's layer left holding memory past its budget.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pydantic
import pytest

import dtype_explorer as dx
from dtype_explorer import cache, engines, pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import make_spec
from dtype_explorer.records import ProbeSpec
from dtype_explorer.runtime import _spawn as spawn

ROOT = Path(__file__).resolve().parents[2]
ANSWER_WITHIN = 240

SCRIPT = """
import dtype_explorer as dx
from dtype_explorer import cache, pool

def triple(x):
    return x * 3

print("answer", pool.call("numpy", triple, 14).result(timeout=240))
dense = dx.probe("Dense", backend="numpy")
print("dense", dense.output_dtype, cache.get(dense.spec) is None)
"""


def test_pool_call_runs_a_function_from_the_users_script(tmp_path):
    """On the old code the worker died (``BrokenProcessPool``): the function was pickled by
    reference to ``__main__``, which a worker never imports. Now it travels by value, and runs
    in the backend's user-code worker: the built-in worker never ran it, so its later answer is
    stored as usual."""
    script = tmp_path / "mine.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DTYPE_EXPLORER_CACHE_DIR": str(tmp_path / "c")}
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "answer 42" in done.stdout, done.stdout
    assert "dense float32 False" in done.stdout, done.stdout


def test_pool_call_refuses_what_is_not_a_function():
    with pytest.raises(InvalidSpecError, match=r"needs a callable function\. Received: 42"):
        pool.call("numpy", 42)


def test_a_timeout_for_an_in_process_probe_is_refused():
    with pytest.raises(InvalidSpecError, match=r"cannot be timed out.*Received: timeout=5"):
        dx.probe("Dense", timeout=5)
    with pytest.raises(InvalidSpecError, match="timeout must be a number of seconds"):
        dx.probe("Dense", timeout=-1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": -1}, r"timeout must be a number of seconds.*Received: -1"),
        ({"timeout": "abc"}, r"timeout must be a number of seconds.*Received: 'abc'"),
        ({"exhaustive": "yes"}, "exhaustive must be True or False; received: 'yes'"),
        ({"versions": ["3.12", "3.13"]}, "final release X.Y.Z.*received: '3.12'"),
        ({"versions": ["3.12.0rc1", "3.13.0"]}, "final release X.Y.Z.*received: '3.12.0rc1'"),
        ({"versions": "3.12.0rc1..3.13.0"}, "final release X.Y.Z.*received: '3.12.0rc1'"),
    ],
)
def test_bisect_checks_every_argument_before_any_engine_is_made(
    options, message, tmp_path, monkeypatch
):
    """On the old code ``timeout=-1`` was refused only after pip had created an engine, and
    ``"3.12"`` or ``"3.12.0rc1"`` passed the check and failed later with an engine error."""
    folder = tmp_path / "engines"
    monkeypatch.setenv(engines.ENV_DIR, str(folder))
    asked = {"versions": ["3.10.0", "3.12.0"], **options}
    with pytest.raises(InvalidSpecError, match=message):
        dx.bisect("Dense", progress=False, **asked)
    assert not folder.exists() or not any(folder.iterdir())  # nothing was installed


def structured_spec() -> ProbeSpec:
    values = [{"images": np.zeros((1, 4, 4, 3), "float32"), "mask": np.ones((1, 4), "int32")}]
    return make_spec("Identity", None, None, "numpy", values=values)


def test_a_tampered_structure_is_refused():
    """On the old code ``structure=[0, 0]`` was answered as ``target(x, x)``, and a structure
    given to an op was silently ignored."""
    spec = structured_spec()
    tampered = spec.model_copy(update={"structure": [0, 0]})  # model_copy skips the checks
    with pytest.raises(InvalidSpecError, match="each of the 2 values exactly once"):
        pool.submit(tampered, use_cache=False)
    with pytest.raises(pydantic.ValidationError, match="exactly once"):
        ProbeSpec(**{**spec.model_dump(), "structure": [0, 0]})
    with pytest.raises(pydantic.ValidationError, match="takes one value per input"):
        ProbeSpec(**{**spec.model_dump(), "target": "ops.add", "structure": [0, 1]})
    with pytest.raises(pydantic.ValidationError, match="without them it must be None"):
        ProbeSpec(target="Dense", structure=[0])
    assert pool.submit(spec, use_cache=False).result(timeout=ANSWER_WITHIN).ok


HOG = """
import builtins, keras

class KeepsMemory(keras.layers.Layer):
    def call(self, x):
        builtins._dx_kept = getattr(builtins, "_dx_kept", []) + [b"x" * (300 << 20)]
        return x * 2
"""


def test_a_worker_past_its_memory_budget_is_replaced(tmp_path, monkeypatch):
    """On the old code a user layer's memory stayed with the worker for its life (487 ->
    1,511 MB). Now a worker that holds more than its budget after a probe is replaced."""
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    pool.shutdown(zygotes=False)
    before = pool.warm(["numpy"])["numpy"]["pid"]
    import psutil

    held = psutil.Process(before).memory_info().rss >> 20
    pool.shutdown(zygotes=False)
    monkeypatch.setenv("DTYPE_EXPLORER_WORKER_MIB", str(held + 200))  # read at worker start
    first = pool.warm(["numpy"])["numpy"]["pid"]
    namespace: dict = {}
    exec(HOG, namespace)
    assert dx.probe(namespace["KeepsMemory"], backend="numpy").ok
    # the layer ran in the user-code worker, which held too much and was retired
    assert pool.user_slot("numpy") not in spawn.pools
    assert pool.warm(["numpy"])["numpy"]["pid"] == first  # the built-in one never ran it
    assert dx.probe(namespace["KeepsMemory"], backend="numpy").ok  # a new user worker answers
    assert dx.probe("Dense", backend="numpy").ok
    pool.shutdown(zygotes=False)
