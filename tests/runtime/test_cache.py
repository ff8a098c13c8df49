"""The persistent result cache: keys, hits, bypass, inspection, and what is never stored."""

from __future__ import annotations

import keras
import platformdirs
import psutil
import pytest

import dtype_explorer as dx
from dtype_explorer import cache, pool
from dtype_explorer.keras_run import run_probe as run
from dtype_explorer.records import ProbeSpec


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    return tmp_path


def dense(backend: str, units: int = 3) -> ProbeSpec:
    return ProbeSpec(target="Dense", backend=backend, kwargs={"units": units})


def test_the_cache_lives_where_the_env_var_says_else_in_the_user_cache_dir(
    fresh_cache, monkeypatch
):
    assert cache.path() == fresh_cache.resolve()
    info = dx.cache.info()
    assert info["path"] == str(fresh_cache.resolve())
    assert info["entries"] == 0
    monkeypatch.delenv(cache.ENV_DIR)
    assert str(cache.path()) == platformdirs.user_cache_dir("dtype-explorer", appauthor=False)


def test_the_key_is_the_full_spec_and_the_versions():
    key = cache.key(dense("jax"))
    assert f'"keras":"{keras.__version__}"' in key
    assert '"jax":' in key
    assert cache.key(dense("jax")) == key
    assert cache.key(dense("jax", units=4)) != key
    assert cache.key(dense("torch")) != key


def test_the_key_tells_apart_where_the_answer_was_computed(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    seen_gpus = cache.key(dense("tensorflow"))
    assert '"gpus":' in seen_gpus
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # every GPU hidden: a CPU answer
    assert cache.key(dense("tensorflow")) != seen_gpus


def test_a_stored_answer_is_served_without_starting_a_worker():
    backend = keras.backend.backend()  # the kernel's own: the answer is made here
    answer = run(dense(backend))
    assert answer.ok
    cache.put(answer)
    children = len(psutil.Process().children())
    future = pool.submit(dense(backend))
    assert future.done()
    hit = future.result()
    assert hit.cached
    assert hit.model_copy(update={"cached": False}) == answer
    assert len(psutil.Process().children()) == children
    assert [r.spec for r in cache.results()] == [answer.spec]


def test_a_live_probe_is_stored_then_hit_and_use_cache_false_leaves_the_cache_out():
    spec = dense("numpy")
    first = pool.submit(spec).result()
    assert first.ok and not first.cached
    assert cache.info()["entries"] == 1
    second = pool.submit(spec).result()
    assert second.cached
    assert second.model_copy(update={"cached": False}) == first
    assert dx.cache.clear() == 1
    live = pool.submit(spec, use_cache=False).result()
    assert live.ok and not live.cached
    assert cache.info()["entries"] == 0
    assert not pool.submit(spec).result().cached
    assert pool.submit(spec, use_cache=False).result().timings != first.timings  # a live run


def test_keras_errors_are_stored_but_custom_layers_and_timeouts_are_not():
    error = pool.submit(
        ProbeSpec(
            target="Conv1D",
            input_dtypes=("uint8",),
            backend="numpy",
            kwargs={"filters": 2, "kernel_size": 3},
        )
    ).result()
    assert error.status == "error"
    assert cache.info()["entries"] == 1

    class Doubler(keras.layers.Layer):
        def call(self, x):
            return x * 2

    spec = ProbeSpec(target="custom:Doubler", backend="numpy")
    payload = pool.target_payload(Doubler)
    assert pool.submit(spec, target_payload=payload).result().ok
    assert not pool.submit(spec, target_payload=payload).result().cached

    slow = ProbeSpec(
        target="Conv2D",
        backend="numpy",
        shapes=((4, 512, 512, 3),),
        kwargs={"filters": 64, "kernel_size": 7},
    )
    assert pool.submit(slow, timeout=0.2).result().status == "timeout"
    assert cache.get(slow) is None
    assert cache.info()["entries"] == 1


def test_an_unusable_cache_warns_and_the_probe_runs_live(tmp_path, monkeypatch):
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    monkeypatch.setenv(cache.ENV_DIR, str(not_a_dir / "cache"))
    with pytest.warns(UserWarning, match="cache is unusable"):
        result = pool.submit(dense("numpy")).result()
    assert result.ok and not result.cached


def test_a_row_is_stored_compressed_signed_over_what_is_stored_and_old_rows_miss():
    """An answer's JSON is stored compressed and version-tagged, the MAC over the stored
    text: an uncompressed row of the format before (signed, well-formed) misses cleanly, an
    edited compressed body is refused by its MAC, and the live answer replaces either."""
    from dtype_explorer.runtime import _mac, _rows

    backend = keras.backend.backend()
    answer = run(ProbeSpec(target="LSTM", backend=backend, kwargs={"units": 4}))
    assert answer.ok and answer.trace is not None
    cache.put(answer)
    found = cache.key(answer.spec)
    store = cache._store()
    row = store.run(lambda db: db.get(found))
    verdict, body = _mac.verify(_mac.secret(create=False), found, row)
    assert verdict == "ok" and body.startswith(_rows.TAG)
    plain = answer.to_json()
    assert len(row) < len(plain) / 3  # the trace repeats itself: a third or less
    assert cache.get(answer.spec).model_copy(update={"cached": False}) == answer

    rejected = dict(cache.stats()["rejected"])
    old = _mac.sign(_mac.secret(create=False), found, plain)  # the format before
    store.run(lambda db: db.set(found, old))
    assert cache.get(answer.spec) is None
    assert cache.stats()["rejected"]["invalid"] == rejected["invalid"] + 1
    edited = row[:-8] + ("0" if row[-8] != "0" else "1") + row[-7:]
    store.run(lambda db: db.set(found, edited))
    assert cache.get(answer.spec) is None
    assert cache.stats()["rejected"]["mac"] == rejected["mac"] + 1
    cache.put(answer)
    assert cache.get(answer.spec) is not None
