"""Hostile user layers against real workers: exceptions that are not ``Exception``, layers that
change process-wide settings of Keras or its backend, a worker squeezed for memory, and a
crash whose log was long. Each case asserts a clear answer, and that this process (the
kernel) goes on answering.

Custom layers are defined inside functions (``custom``), so cloudpickle ships them by value,
as it does for a notebook's classes.
"""

from __future__ import annotations

import os
import resource
import textwrap
from pathlib import Path

import pytest

from dtype_explorer import cache, pool
from dtype_explorer.keras_run import describe_settings
from dtype_explorer.records import ErrorInfo, ProbeResult, ProbeSpec

#: Longest wait for any one answer: a hang fails the test instead of blocking it.
ANSWER_WITHIN = 240


def custom(name: str, body: str, where: str = "call") -> type:
    """A Layer subclass that runs ``body`` in ``call`` (or ``build``), then doubles its input."""
    namespace: dict = {}
    exec(
        textwrap.dedent(f"""
        import ctypes, os
        import keras

        class {name}(keras.layers.Layer):
            def build(self, input_shape):
                if {where!r} == "build":
                    {body}

            def call(self, x):
                if {where!r} == "call":
                    {body}
                return x * 2
        """),
        namespace,
    )
    return namespace[name]


def probe_custom(layer: type, backend: str) -> ProbeResult:
    spec = ProbeSpec(target=f"custom:{layer.__name__}", backend=backend)
    future = pool.submit(spec, target_payload=pool.target_payload(layer))
    return future.result(timeout=ANSWER_WITHIN)


def answer(spec: ProbeSpec, **options) -> ProbeResult:
    return pool.submit(spec, **options).result(timeout=ANSWER_WITHIN)


def same_answer(a: ProbeResult, b: ProbeResult) -> bool:
    """Equal in everything Keras decided: not timings, not whether it came from the cache, and
    not the magnitudes of outputs and trace steps (a layer's weights are drawn afresh in each
    run)."""
    magnitudes = {"__all__": {"max_abs": True, "children": {"__all__": {"max_abs"}}}}
    ignored = {
        "timings": True,
        "cached": True,
        "numerics": {"max_abs_output", "max_rel_error"},
        "trace": magnitudes,
    }
    return a.model_dump(exclude=ignored) == b.model_dump(exclude=ignored)


def dense(backend: str) -> ProbeSpec:
    return ProbeSpec(
        target="Dense", input_dtypes=("float64",), backend=backend, kwargs={"units": 3}
    )


# ------------------------------------------------------------- exceptions that are not Exception


@pytest.mark.parametrize("where", ["call", "build"])
@pytest.mark.parametrize(
    "raised", ["SystemExit(3)", "KeyboardInterrupt()", "GeneratorExit()", "BaseException('x')"]
)
def test_a_base_exception_in_a_user_layer_is_that_probes_result(raised, where):
    layer = custom(f"Raises{where.title()}", f"raise {raised}", where)
    result = probe_custom(layer, "numpy")  # the old pool never resolved this future
    assert result.status == "error", result.summary()
    assert result.error.type == raised.split("(")[0]
    assert not pool.storable(result)
    assert answer(dense("numpy"), use_cache=False).ok  # the worker still answers


# ------------------------------------------------------------------ a polluted worker


POLLUTERS = [
    # (backend, what the layer does, the setting it changes or None when every probe already
    #  puts it back, a built-in probe whose answer must not change)
    ("numpy", "keras.config.set_epsilon(0.5)", "keras.epsilon", "BatchNormalization"),
    (
        "numpy",
        "keras.config.set_image_data_format('channels_first')",
        "keras.image_data_format",
        "Conv2D",
    ),
    ("numpy", "keras.config.enable_unsafe_deserialization()", "keras.safe_mode_saving", "Dense"),
    ("numpy", "keras.config.set_floatx('float16')", None, "Dense"),
    ("numpy", "keras.config.set_dtype_policy('mixed_float16')", None, "Dense"),
    ("numpy", "import numpy; numpy.seterr(all='raise')", "numpy.errstate", "Dense"),
    (
        "jax",
        "import jax; jax.config.update('jax_enable_x64', True)",
        "jax.jax_enable_x64",
        "Dense",
    ),
    (
        "torch",
        "import torch; torch.set_default_dtype(torch.float64)",
        "torch.default_dtype",
        "Dense",
    ),
    # The matmul precision (issue 28): TF32 switched on by a user's layer is caught.
    (
        "jax",
        "import jax; jax.config.update('jax_default_matmul_precision', 'tensorfloat32')",
        "jax.jax_default_matmul_precision",
        "Dense",
    ),
    (
        "torch",
        "import torch; torch.set_float32_matmul_precision('high')",
        "torch.float32_matmul_precision",
        "Dense",
    ),
]


def builtin(target: str, backend: str) -> ProbeSpec:
    kwargs = {"Dense": {"units": 3}, "Conv2D": {"filters": 2, "kernel_size": 3}}.get(target, {})
    return ProbeSpec(target=target, input_dtypes=("float64",), backend=backend, kwargs=kwargs)


@pytest.mark.parametrize(("backend", "body", "setting", "target"), POLLUTERS)
def test_a_layer_that_changes_global_settings_pollutes_no_later_answer(
    backend, body, setting, target, tmp_path, monkeypatch
):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))  # an empty cache of its own
    spec = builtin(target, backend)
    clean = answer(spec, use_cache=False)
    settings = pool.call(backend, describe_settings).result(timeout=ANSWER_WITHIN)

    result = probe_custom(custom("Polluter", body), backend)
    assert result.ok, result.summary()
    if setting is not None:
        assert setting in result.state_changed  # reported, and never cached
        assert not pool.storable(result)

    after = pool.call(backend, describe_settings).result(timeout=ANSWER_WITHIN)
    assert after == settings  # the built-in worker never ran it
    later = answer(spec)
    assert not later.cached and same_answer(later, clean), later.summary()
    # The user's layer ran in the backend's user-code worker (issue 31): the built-in worker
    # that answers ``spec`` never ran it, and whatever the cache holds for ``spec`` is the
    # clean answer, never the polluted one.
    stored = cache.get(spec)
    assert stored is None or same_answer(stored, clean), stored.summary()


def test_a_setting_that_cannot_be_put_back_replaces_the_worker(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    before = pool.warm(["numpy"])["numpy"]["pid"]
    layer = custom("SwitchesBackend", "keras.config.set_backend('jax')")
    result = probe_custom(layer, "numpy")
    assert "keras.backend" in result.state_changed
    later = answer(dense("numpy"))
    assert later.ok and later.backend == "numpy" and not later.cached
    assert pool.warm(["numpy"])["numpy"]["pid"] == before  # the built-in worker never ran it
    assert pool.call("numpy", describe_settings).result()["keras.backend"] == "'numpy'"
    # the user-code worker that could not put the backend back was replaced: a fresh one
    # answers the next user layer on numpy
    again = probe_custom(custom("Plain", "pass"), "numpy")
    assert again.ok and again.backend == "numpy", again.summary()


# ------------------------------------------------------------- transient failures


@pytest.mark.parametrize(
    ("kind", "message", "cacheable"),
    [
        ("MemoryError", "Unable to allocate 3.7 GiB", False),
        ("RecursionError", "maximum recursion depth exceeded", False),
        ("OSError", "[Errno 24] Too many open files", False),
        ("PermissionError", "denied", False),
        ("ResourceExhaustedError", "OOM when allocating tensor", False),
        ("OutOfMemoryError", "CUDA out of memory", False),
        ("XlaRuntimeError", "RESOURCE_EXHAUSTED: Out of memory allocating", False),
        ("RuntimeError", "DefaultCPUAllocator: can't allocate memory: out of memory", False),
        ("KeyboardInterrupt", "", False),
        ("ValueError", "Input 0 of layer is incompatible", True),
        ("TypeError", "lax.conv_general_dilated requires arguments to have the same dtypes", True),
        ("InvalidArgumentError", "Value for attr 'T' of uint8 is not in the list", True),
        ("NotImplementedError", '"addmm_impl_cpu_" not implemented for Half', True),
    ],
)
def test_only_answers_keras_gave_are_cacheable(kind, message, cacheable):
    result = ProbeResult(
        spec=dense("numpy"),
        status="error",
        backend="numpy",
        error=ErrorInfo(type=kind, message=message, where="call"),
    )
    assert pool.storable(result) is cacheable


def test_a_worker_out_of_memory_is_answered_and_not_cached(tmp_path, monkeypatch):
    """A real squeeze: the numpy worker's address space capped a little above its use, then a
    Dense layer whose kernel (4096 x 65536 float32, 1 GiB) cannot fit."""
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path))
    pid = pool.warm(["numpy"])["numpy"]["pid"]
    with open(f"/proc/{pid}/status") as status:
        vm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize"))
    limit = (vm_kb << 10) + (256 << 20)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.prlimit(pid, resource.RLIMIT_AS, (limit, hard))  # the built-in worker's, from here
    big = ProbeSpec(
        target="Dense",
        input_dtypes=("float32",),
        backend="numpy",
        kwargs={"units": 65536},
        shapes=((1, 4096),),
    )
    try:
        squeezed = answer(big)
    finally:
        if pool.warm(["numpy"])["numpy"]["pid"] == pid:  # not crashed: lift the cap again
            resource.prlimit(pid, resource.RLIMIT_AS, (hard, hard))
    assert squeezed.status in ("error", "invalid", "crashed"), squeezed.summary()
    if squeezed.status != "crashed":
        assert squeezed.error.type == "MemoryError", squeezed.error_text()
    assert cache.get(big) is None  # not served later as the answer
    assert answer(dense("numpy")).ok


# ------------------------------------------------------------------ the crash's log


def test_a_crash_keeps_its_log_when_the_log_was_long():
    log = pool.log_path(pool.user_slot("numpy"))  # where a user's layer runs
    probe_custom(custom("Plain", "pass"), "numpy")  # a worker is up and writing to ``log``
    with log.open("ab") as file:
        file.write(b"chatter\n" * (1 << 18))  # 2 MB: the next worker would start afresh
    layer = custom("Segfaults", "ctypes.string_at(0)")
    crashed = probe_custom(layer, "numpy")
    assert crashed.status == "crashed"
    named = crashed.error.message.rsplit("Its output is in ", 1)[1].strip()
    assert os.path.exists(named)
    assert answer(dense("numpy"), use_cache=False).ok  # the replacement has started
    assert "Segmentation fault" in Path(named).read_text(errors="replace")
    assert probe_custom(custom("Plain", "pass"), "numpy").ok  # the replacement has started
    assert pool.log_path(pool.user_slot("numpy")).stat().st_size < 1 << 20
