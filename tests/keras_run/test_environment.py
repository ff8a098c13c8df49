"""The settings that change numbers (issue 28): recorded in every answer, keyed, set by
``precision=`` and put back; the device of each trace step and the kernel path where the
backend tells. Real Keras on real backends: the in-process one (tensorflow) and workers."""

from __future__ import annotations

import os

import pytest

import dtype_explorer as dx
from dtype_explorer import cache, pool
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import describe_settings, global_settings, restore_settings
from dtype_explorer.keras_run._environment import read_environment
from dtype_explorer.keras_run.trace._placement import placed, torch_int8_kernel
from dtype_explorer.records import ProbeSpec, TraceStep, TraceTensor

ANSWER_WITHIN = 240


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))


def dense(backend: str, precision: str | None = None) -> ProbeSpec:
    return ProbeSpec(target="Dense", backend=backend, kwargs={"units": 3}, precision=precision)


# ------------------------------------------------------------------------- the cache key


def test_precision_is_keyed_and_left_out_of_the_key_when_not_given():
    keys = {p: cache.key(dense("jax", p)) for p in (None, "highest", "tf32", "default")}
    assert len(set(keys.values())) == 4  # each precision its own answer
    assert '"precision"' not in keys[None]  # as before: older rows still answer
    assert '"precision":"highest"' in keys["highest"]
    old = ProbeSpec.model_validate({k: v for k, v in dense("jax").to_dict().items()})
    assert cache.key(old) == keys[None]


def test_the_tf_variables_that_change_numbers_key_a_workers_answers(monkeypatch):
    before = cache.key(dense("tensorflow"))
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=2")
    assert cache.key(dense("tensorflow")) != before


def test_xla_flags_key_and_are_said_where_xla_compiles(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    before = {b: cache.key(dense(b)) for b in ("jax", "tensorflow")}
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    assert all(cache.key(dense(b)) != key for b, key in before.items())
    said = read_environment("jax")
    assert said["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=true"
    assert "XLA_FLAGS" not in read_environment("torch")  # torch compiles nothing with XLA
    monkeypatch.delenv("XLA_FLAGS")
    assert "XLA_FLAGS" not in read_environment("jax")


def test_a_jax_workers_answer_says_the_xla_flags_it_ran_under():
    result = pool.submit(dense("jax"), use_cache=False).result(ANSWER_WITHIN)
    assert result.ok, result.summary()
    assert result.environment["XLA_FLAGS"] == os.environ["XLA_FLAGS"]  # tests/conftest.py's


def test_a_precision_keras_does_not_know_is_refused_with_the_valid_ones():
    with pytest.raises(InvalidSpecError, match=r"unknown precision 'fp32'; did you mean 'tf32'"):
        dx.probe("Dense", kwargs={"units": 2}, precision="fp32")
    with pytest.raises(InvalidSpecError, match="default, highest, tf32"):
        dx.probe("Dense", kwargs={"units": 2}, precision=32)


# ------------------------------------------------------------- in process (tensorflow)


def test_an_answer_says_its_device_and_precision_and_precision_is_put_back():
    import tensorflow as tf

    assert tf.config.experimental.tensor_float_32_execution_enabled()
    plain = dx.probe("Dense", kwargs={"units": 2})
    assert plain.environment["device"] == "CPU"
    assert plain.environment["tf.tensor_float_32_execution"] == "True"
    assert plain.environment["tf.xla_auto_jit"] == "off"
    off = dx.probe("Dense", kwargs={"units": 2}, precision="highest")
    assert off.spec.precision == "highest"
    assert off.environment["tf.tensor_float_32_execution"] == "False"  # during the probe
    assert tf.config.experimental.tensor_float_32_execution_enabled()  # and back after
    assert off.environment_text.startswith("CPU · ")
    assert " · tf.tensor_float_32_execution False · " in off.environment_text


def test_the_worker_watch_reads_and_puts_back_tf32_and_xla_auto_jit():
    import tensorflow as tf

    before = global_settings()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    tf.config.optimizer.set_jit("autoclustering")
    restored, lost = restore_settings(before)
    assert restored == ["tensorflow.tensor_float_32", "tensorflow.xla_auto_jit"] and not lost
    assert tf.config.experimental.tensor_float_32_execution_enabled()
    assert not tf.config.optimizer.get_jit()


def test_each_step_of_the_trace_says_where_it_ran():
    r = dx.probe("Dense", kwargs={"units": 2})
    assert r.call_trace() and {s.device for s in r.call_trace()} == {r.device}
    assert all(s.kernel is None for s in r.call_trace())  # eager: no kernel path told


# --------------------------------------------------------------------------- in workers


@pytest.mark.parametrize(
    ("backend", "precision", "name", "during", "after"),
    [
        ("torch", "tf32", "torch.float32_matmul_precision", "high", "'highest'"),
        ("jax", "highest", "jax_default_matmul_precision", "highest", "None"),
    ],
)
def test_precision_changes_the_workers_settings_for_the_probe_only(
    backend, precision, name, during, after
):
    settings = pool.call(backend, describe_settings).result(timeout=ANSWER_WITHIN)
    result = pool.submit(dense(backend, precision), use_cache=False).result(ANSWER_WITHIN)
    assert result.ok, result.summary()
    assert result.environment[name] == during
    assert result.environment["device"] == "CPU"
    assert not result.state_changed  # put back by the probe itself, not by the worker's watch
    now = pool.call(backend, describe_settings).result(timeout=ANSWER_WITHIN)
    assert now == settings
    key = name if name.startswith("torch") else f"jax.{name}"
    assert now[key] == after
    plain = pool.submit(dense(backend), use_cache=False).result(ANSWER_WITHIN)
    assert plain.environment[name] != during


def test_torch_int8_matmul_names_its_kernel_path_on_the_cpu():
    op = dx.probe(
        "ops.matmul",
        ["int8", "int8"],
        shape=[[32, 64], [64, 16]],
        backend="torch",
        use_cache=False,
    )
    assert op.ok and op.kernel == "int32 fallback (cpu: torch._int_mm is CUDA-only)"
    layer = dx.probe(
        "Dense",
        kwargs={"units": 16},
        shape=[32, 64],
        policy="int8_from_float32",
        backend="torch",
        use_cache=False,
    )
    matmuls = [s for s in layer.call_trace() if s.op == "ops.matmul"]
    assert layer.ok and [s.kernel for s in matmuls] == [op.kernel]
    assert {s.device for s in layer.call_trace()} == {"cpu"}


# ------------------------------------------------------- kernel paths, hand-built records


def matmul(a: tuple, b: tuple, device: str, dtype: str = "int8") -> TraceStep:
    inputs = (TraceTensor(dtype=dtype, shape=a), TraceTensor(dtype=dtype, shape=b))
    return TraceStep(index=0, op="ops.matmul", inputs=inputs, device=device)


def test_torch_int8_kernel_follows_keras_condition():
    assert torch_int8_kernel(matmul((32, 64), (64, 16), "cuda:0")) == "torch._int_mm"
    three_d = torch_int8_kernel(matmul((2, 32, 64), (64, 16), "cuda:0"))
    assert three_d.startswith("float fallback (cuda:0: 3-D input")
    small = torch_int8_kernel(matmul((8, 64), (64, 16), "cuda:0"))
    assert "x1 shape (8, 64)" in small
    assert torch_int8_kernel(matmul((32, 64), (64, 16), "cuda:0", "float32")) is None


def test_steps_of_an_xla_compiled_run_say_so_and_eager_ones_do_not():
    trace = (matmul((32, 64), (64, 16), "cpu", "float32"),)
    assert placed(trace, "jax", "model.predict, compiled by jax.jit", True)[0].kernel == (
        "XLA (model.predict, compiled by jax.jit)"
    )
    assert placed(trace, "tensorflow", "model.predict, compiled by tf.function", True) == trace
    assert placed(trace, "jax", "eager call", None) == trace
