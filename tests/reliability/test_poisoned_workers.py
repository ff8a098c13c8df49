"""A worker that ran user code never feeds the shared cache (issue 31, cache poisoning).

A user layer can change Keras itself inside a worker: patch a class's method, or put its own
class into the custom-object registry. The settings check after each probe (floatx, policy,
flags) does not see such a change. These tests run real user layers on a real numpy worker
and read the test session's real cache afterwards.

Custom layers are defined inside functions (``exec``), so cloudpickle ships them by value,
as it does for a notebook's classes.
"""

from __future__ import annotations

import textwrap

import pytest

import dtype_explorer as dx
from dtype_explorer import cache, pool
from dtype_explorer.records import ProbeResult

#: Longest wait for any one answer: a hang fails the test instead of blocking it.
ANSWER_WITHIN = 240


def custom(name: str, body: str) -> type:
    """A Layer subclass whose ``call`` runs ``body`` (once), then returns its input doubled."""
    lines = textwrap.indent(textwrap.dedent(body).strip(), " " * 8)
    source = f"import keras\n\nclass {name}(keras.layers.Layer):\n    def call(self, x):\n"
    namespace: dict = {}
    exec(f"{source}{lines}\n        return x * 2\n", namespace)
    return namespace[name]


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An empty cache of its own, and fresh numpy workers (none tainted by an earlier test)."""
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    pool.shutdown(zygotes=False)
    yield
    pool.shutdown(zygotes=False)


def stored(result: ProbeResult) -> ProbeResult | None:
    """A fresh read of the cache for ``result``'s spec."""
    return cache.get(result.spec)


PATCH_DENSE = """
        def to_float16(self, inputs):
            return keras.ops.cast(inputs, "float16")
        keras.layers.Dense.call = to_float16
"""


def test_a_layer_that_patches_dense_poisons_no_later_answer(own_cache):
    """A user layer whose ``call`` sets ``keras.layers.Dense.call`` to a cast to float16.

    On the old code (main before this change) the later ``dx.probe("Dense")`` answered
    float16, that answer was stored, and the next session was served float16 with
    ``cached=True``.
    """
    patcher = custom("PatchesDense", PATCH_DENSE)
    assert dx.probe(patcher, backend="numpy").status == "ok"
    live = dx.probe("Dense", backend="numpy")
    assert (live.status, live.output_dtype, live.cached) == ("ok", "float32", False), live.summary()
    again = stored(live)
    assert again is None or again.output_dtype == "float32", again.summary()
    served = dx.probe("Dense", backend="numpy")  # from the cache or live: never float16
    assert served.output_dtype == "float32", served.summary()


REGISTER_DENSE = """
        class Impostor(keras.layers.Layer):
            def __init__(self, units=1, **kwargs):
                super().__init__(**kwargs)
            def call(self, x):
                return keras.ops.cast(x, "float16")
        keras.saving.get_custom_objects()["Dense"] = Impostor
"""


def test_a_layer_that_registers_a_dense_poisons_no_later_answer(own_cache):
    """A user layer that puts its own class into ``keras.saving.get_custom_objects()["Dense"]``
    (``GLOBAL_CUSTOM_OBJECTS``); ``TimeDistributed`` deserialises its ``{"class_name":
    "Dense", ...}`` sub-layer through that registry.

    On the old code (main before this change) the later built-in ``TimeDistributed`` probe
    answered with the impostor's float16, that answer was stored, and it was served with
    ``cached=True`` to every later session.
    """
    clean = dx.probe("TimeDistributed", backend="numpy", use_cache=False)
    pool.shutdown(zygotes=False)
    registrar = custom("RegistersDense", REGISTER_DENSE)
    assert dx.probe(registrar, backend="numpy").status == "ok"
    live = dx.probe("TimeDistributed", backend="numpy")
    assert (live.status, live.output_dtype) == (clean.status, clean.output_dtype), live.summary()
    assert live.output_dtype != "float16"
    again = stored(live)
    assert again is None or again.output_dtype == clean.output_dtype, again.summary()
    served = dx.probe("TimeDistributed", backend="numpy")
    assert served.output_dtype == clean.output_dtype, served.summary()


def patch_dense_to_float16() -> str:
    """User code run through ``pool.call``: ``keras.layers.Dense.call`` cast to float16."""
    import keras

    def to_float16(self, inputs):
        return keras.ops.cast(inputs, "float16")

    keras.layers.Dense.call = to_float16
    return "patched"


class _RunsOnLoad:
    """An argument whose unpickling patches Dense (its ``__reduce__``)."""

    def __reduce__(self):
        patch = "keras.layers.Dense.call = lambda s, x: keras.ops.cast(x, 'float16')"
        return (exec, (f"import keras\n{patch}",))


def _assert_dense_unpoisoned():
    live = dx.probe("Dense", backend="numpy", timeout=ANSWER_WITHIN)
    assert (live.status, live.output_dtype) == ("ok", "float32"), live.summary()
    again = stored(live)
    assert again is None or again.output_dtype == "float32", again.summary()
    pool.shutdown(zygotes=False)
    served = dx.probe("Dense", backend="numpy", timeout=ANSWER_WITHIN)
    assert served.output_dtype == "float32", served.summary()


def test_pool_call_of_the_workers_own_call_is_user_code(own_cache):
    """Issue 43: ``pool.call("numpy", _worker.call, <user payload>, True)`` named the worker's
    own (trusted) function, which then ran the user's payload in the normal worker, untainted:
    the next Dense answered float16, was stored and served to later runs."""
    import cloudpickle

    from dtype_explorer.runtime import _worker

    payload = cloudpickle.dumps((patch_dense_to_float16, ()))
    answer = pool.call("numpy", _worker.call, payload, True).result(timeout=ANSWER_WITHIN)
    assert answer == "patched"
    _assert_dense_unpoisoned()


def test_an_argument_that_runs_code_when_unpickled_taints_the_worker(own_cache):
    """A registered entry of the tool, but an argument whose unpickling runs code: user code."""
    from dtype_explorer.analyses import _survey

    future = pool.call("numpy", _survey.policy_compute_dtype, "float32", _RunsOnLoad())
    with pytest.raises(TypeError):  # the entry takes one argument; the patch ran on loading
        future.result(timeout=ANSWER_WITHIN)
    _assert_dense_unpoisoned()


def test_the_tools_own_entries_still_run_in_the_normal_worker(own_cache):
    from dtype_explorer.analyses import _survey

    assert (
        pool.call("numpy", _survey.policy_compute_dtype, "mixed_float16").result(
            timeout=ANSWER_WITHIN
        )
        == "float16"
    )
    live = dx.probe("Dense", backend="numpy", timeout=ANSWER_WITHIN)
    assert stored(live) is not None  # the worker stayed clean: its answer was kept
