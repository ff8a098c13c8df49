"""The op trace of a probe's eager call, on real Keras, on every backend.

In-process tests run on this session's backend (see conftest.py); the others go through the
worker pool (``dx.probe(..., backend=...)``).
"""

import sys
import threading
from pathlib import Path

import keras
import numpy as np
import pytest
from swept import SWEPT

import dtype_explorer as dx
from dtype_explorer import dtypes
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run.trace._op_trace import op_trace
from dtype_explorer.records import ProbeResult

ALL = list(SWEPT)
KERAS_BLOB = f"https://github.com/keras-team/keras/blob/v{keras.__version__}/keras/src/"


def casts(steps, source, target):
    """Steps (or children) that cast ``source`` to ``target`` explicitly."""
    return [
        s
        for s in steps
        if s.change == "cast"
        and s.inputs
        and s.inputs[0].dtype == source
        and s.outputs
        and s.outputs[0].dtype == target
    ]


# ------------------------------------------------------------ normalization statistics


@pytest.mark.parametrize("backend", ALL)
def test_batchnorm_mixed_float16_computes_in_float32_and_casts_back(backend):
    r = dx.probe(
        "BatchNormalization", input_dtype="float32", policy="mixed_float16", backend=backend
    )
    assert r.status == "ok", r.error
    steps = r.call_trace()
    up = casts(steps, "float16", "float32")
    down = casts(steps, "float32", "float16")
    bn_file = "layers/normalization/batch_normalization.py"
    assert up and up[0].source.file.endswith(bn_file), [s.signature() for s in steps]
    # the statistics (moving mean and variance) are read in float32 by ops.cast in that file
    stats = [
        s
        for s in steps
        if s.op == "ops.cast" and s.source.file.endswith(bn_file) and "moving" in s.source.text
    ]
    assert stats and all(s.outputs[0].dtype == "float32" for s in stats)
    norm = next(s for s in steps if s.op == "ops.nn.batch_normalization")
    assert {t.dtype for t in norm.inputs} == {"float32"}
    # the cast back to float16 is the layer's own last line, after the normalization
    back = [s for s in down if s.source.file.endswith(bn_file)]
    assert back and back[-1].index > norm.index and "downcast" in back[-1].conversions
    assert back[-1].source.url.startswith(KERAS_BLOB + bn_file + "#L")
    assert back[-1].source.url.endswith(f"#L{back[-1].source.line}")
    assert "ops.cast" in back[-1].source.text


@pytest.mark.parametrize("backend", ALL)
def test_layernorm_mixed_float16_statistics_in_float32_inside_the_op(backend):
    r = dx.probe(
        "LayerNormalization", input_dtype="float16", policy="mixed_float16", backend=backend
    )
    assert r.status == "ok", r.error
    ln = next(s for s in r.call_trace() if s.op == "ops.nn.layer_normalization")
    assert ln.source.file.endswith("layers/normalization/layer_normalization.py")
    assert ln.inputs[0].dtype == "float16" and ln.outputs[0].dtype == "float16"
    # one level down: the op itself goes up to float32 and back, in keras/src/ops/nn.py
    up = casts(ln.children, "float16", "float32")
    down = casts(ln.children, "float32", "float16")
    assert up and down, [c.signature() for c in ln.children]
    for step in (up[0], down[-1]):
        assert step.source.file.endswith("keras/src/ops/nn.py")
        assert step.source.url.startswith(KERAS_BLOB + "ops/nn.py#L")
    assert up[0].index < down[-1].index


# ------------------------------------------------------------------ NaN provenance


def _hand_run(x):
    """Softmax under mixed_float16, step by step: the autocast cast, then the softmax."""
    steps = []
    y = keras.ops.cast(x, "float16")
    steps.append(("cast", x, y))
    z = keras.ops.softmax(y)
    steps.append(("softmax", y, z))
    for name, given, got in steps:
        given_ok = np.isfinite(keras.ops.convert_to_numpy(given).astype("float32")).all()
        if given_ok and not np.isfinite(keras.ops.convert_to_numpy(got).astype("float32")).all():
            return name
    return None


@pytest.mark.parametrize("backend", [None, *ALL])
def test_softmax_large_first_nonfinite_step_is_where_it_first_appears(backend):
    r = dx.probe(
        "Softmax", input_dtype="float32", policy="mixed_float16", values="large", backend=backend
    )
    assert r.status == "ok", r.error
    shape = catalog.entry("Softmax").shapes[0]
    first_by_hand = _hand_run(dtypes.sample("float32", shape, preset="large", seed=r.spec.seed))
    assert first_by_hand == "cast"  # 1e5 does not fit float16 (max 65504)
    first = r.first_nonfinite_step()
    assert first is not None and first.op.endswith(".cast"), [s.signature() for s in r.trace]
    assert first.float16_overflow and first.source.file.endswith("dtype_policies/dtype_policy.py")
    assert [s for s in r.trace if s.first_nonfinite] == [first]
    assert all(not s.nonfinite for s in r.trace if s.index < first.index)
    softmax = next(s for s in r.call_trace() if s.op == "ops.nn.softmax")
    assert softmax.index > first.index and not softmax.first_nonfinite


class HiddenOverflow(keras.layers.Layer):
    def call(self, x):
        y = keras.ops.exp(x)  # 12.0 -> inf in float16
        return keras.ops.tanh(y)  # tanh(inf) = 1: the overflow is hidden


def test_float16_overflow_is_marked_even_when_a_later_op_hides_it():
    r = dx.probe(HiddenOverflow, input_dtype="float32", policy="mixed_float16", values="default")
    assert r.status == "ok", r.error
    exp = next(s for s in r.call_trace() if s.op == "ops.exp")
    tanh = next(s for s in r.call_trace() if s.op == "ops.tanh")
    # the default sample stays within +-3: exp does not overflow; the same layer on 12.0 does
    assert not exp.float16_overflow
    layer = HiddenOverflow(dtype="mixed_float16")
    with op_trace() as trace:
        out = layer(np.array([[3.0, 12.0]], dtype="float32"))
    assert np.isfinite(keras.ops.convert_to_numpy(out).astype("float32")).all()
    steps = {s.op: s for s in trace.steps()}
    assert steps["ops.exp"].float16_overflow and steps["ops.exp"].first_nonfinite
    assert not steps["ops.tanh"].nonfinite
    assert tanh.source.file == __file__


# ------------------------------------------------------------- the user's own line


class ScaleByConstant(keras.layers.Layer):
    def call(self, x):
        c = keras.ops.convert_to_tensor(np.float32(0.5), dtype="float32")
        return keras.ops.multiply(x, c)  # MARK: the float32 constant


MARK_LINE = next(
    i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if "# MARK: the" in line
)


@pytest.mark.parametrize("backend", [None, "jax", "torch"])
def test_custom_layer_line_multiplying_by_float32_constant_is_named(backend):
    r = dx.probe(ScaleByConstant, input_dtype="float32", policy="mixed_bfloat16", backend=backend)
    assert r.status == "ok", r.error
    step = next(s for s in r.call_trace() if s.op == "ops.multiply")
    assert step.source.file == __file__ and step.source.line == MARK_LINE
    assert step.source.function == "call" and "keras.ops.multiply(x, c)" in step.source.text
    assert step.source.url is None
    assert ProbeResult.from_json(r.to_json()) == r  # every trace field round-trips
    assert [t.dtype for t in step.inputs] == ["bfloat16", "float32"]
    if step.outputs[0].dtype == "float32":  # jax and tensorflow promote; the step says so
        assert step.change == "promoted" and step.result_type == "float32"
        assert step.result_type_args == ("bfloat16", "float32")
        assert r.first_dtype_change().index <= step.index


# ---------------------------------------------------------- backends part at the conv


def test_conv1d_uint8_traces_of_jax_and_torch_part_at_the_convolution():
    rs = dx.probe(
        "Conv1D",
        input_dtype="uint8",
        backend=["jax", "torch"],
        kwargs={"filters": 2, "kernel_size": 3},
    )
    part = rs.first_divergence()
    assert part is not None and part.op == "ops.nn.conv", [r.call_trace() for r in rs]
    assert part.outcomes["jax"] == "float32"
    assert part.outcomes["torch"].startswith("raises ")
    jax_conv = next(s for s in rs["jax"].trace if s.index == part.steps["jax"])
    assert jax_conv.change == "promoted" and jax_conv.result_type_args == ("uint8", "float32")
    torch_conv = next(s for s in rs["torch"].trace if s.index == part.steps["torch"])
    assert torch_conv.error and torch_conv.source.file.endswith("convolutional/conv1d.py")
    # and every field came back through JSON from the workers
    for r in rs:
        assert ProbeResult.from_json(r.to_json()) == r


# --------------------------------------------------------- nothing left installed


def _bindings():
    """id of every attribute of every loaded keras module, and of this test module."""
    out = {}
    for name, module in list(sys.modules.items()):
        if module is not None and (name.startswith("keras") or name == __name__):
            for key, value in list(vars(module).items()):
                out[(name, key)] = id(value)
    return out


class Raises(keras.layers.Layer):
    def call(self, x):
        keras.ops.multiply(x, 2.0)
        raise ValueError("after one op")


def test_trace_leaves_keras_unpatched_also_when_the_call_raises():
    layer = keras.layers.Dense(2)
    before = _bindings()
    with op_trace():
        inside = _bindings()
        layer(np.ones((1, 3), "float32"))
    changed = [k for k in before if inside.get(k) != before[k]]
    assert len(changed) > 100 and (("keras.src.ops.numpy", "multiply") in changed)
    assert _bindings() == before
    with pytest.raises(ValueError, match="after one op"), op_trace() as trace:
        Raises()(np.ones((1, 3), "float32"))
    assert _bindings() == before
    assert len(trace) > 0
    # and through the probe, with Keras's error turned into a result
    r = dx.probe("Conv1D", input_dtype="float32", kwargs={"filters": 2, "kernel_size": 9})
    assert r.status in ("error", "invalid")
    assert _bindings() == before


def test_kept_installed_a_wrapper_outside_a_trace_passes_through_and_records_the_same():
    from dtype_explorer.keras_run.trace import _in_place
    from dtype_explorer.keras_run.trace import _op_trace as _trace

    layer = keras.layers.LayerNormalization(dtype="mixed_float16")
    x = np.random.default_rng(0).normal(size=(2, 8)).astype("float32")
    layer(x)  # built: each trace below records the same call
    with op_trace() as trace:
        layer(x)
    once = [(s.op, s.note, len(s.children)) for s in trace.steps()]
    before = _bindings()
    _in_place.keep_installed()
    try:
        assert _trace._TRACING.bound and _bindings() != before  # in place between traces
        # user code outside a trace: the same answers, nothing recorded, no trace open
        y = keras.ops.add(keras.ops.ones((2,), dtype="int8"), 1.5)
        assert keras.backend.standardize_dtype(y.dtype) == "float32"
        assert keras.ops.convert_to_numpy(y).tolist() == [2.5, 2.5]
        assert keras.ops.add.__name__ == "add" and _trace._TRACING.trace is None
        for _ in range(2):  # the second opens without putting anything in place again
            with op_trace() as trace:
                layer(x)
            assert [(s.op, s.note, len(s.children)) for s in trace.steps()] == once
    finally:
        _in_place.keep_installed(False)
    assert _bindings() == before and not _trace._TRACING.bound


def test_trace_does_not_change_what_the_layer_computes():
    keras.utils.set_random_seed(0)
    layer = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, dtype="mixed_float16")
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    with op_trace() as trace:
        traced = keras.ops.convert_to_numpy(layer(x, x))
    bare = keras.ops.convert_to_numpy(layer(x, x))
    assert np.array_equal(traced, bare)
    assert len([s for s in trace.steps() if s.phase == "call"]) > 10


def test_only_the_tracing_thread_is_recorded():
    done = threading.Event()
    seen = []

    def other():
        while not done.is_set():
            seen.append(keras.ops.subtract(np.ones(2), np.ones(2)))

    worker = threading.Thread(target=other)
    layer = keras.layers.Dense(2)
    layer(np.ones((1, 3), "float32"))
    with op_trace() as trace:
        worker.start()
        for _ in range(20):
            layer(np.ones((1, 3), "float32"))
        done.set()
        worker.join()
    ops = {s.op for s in trace.steps()}
    assert seen and "ops.subtract" not in ops and "ops.matmul" in ops


def test_symbolic_calls_are_not_recorded():
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    with op_trace() as trace:
        layer(keras.KerasTensor((None, 3)))
    assert len(trace) == 0


def test_a_module_imported_during_the_trace_keeps_the_original_op(tmp_path, monkeypatch):
    import importlib

    (tmp_path / "dx_trace_late_module.py").write_text(
        "from keras.src.ops.numpy import multiply\n\ndef twice(x):\n    return multiply(x, 2)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with op_trace() as trace:
        late = importlib.import_module("dx_trace_late_module")
        late.twice(np.ones(2, "float32"))
    assert [s.op for s in trace.steps()] == ["ops.multiply"]  # bound while tracing: recorded
    assert late.multiply is keras.src.ops.numpy.multiply  # and given back afterwards
    del sys.modules["dx_trace_late_module"]


class ManyOps(keras.layers.Layer):
    def call(self, x):
        for _ in range(400):
            x = keras.ops.add(x, 1.0)
        return x


def test_a_call_running_many_ops_keeps_the_first_ones_and_counts_the_rest():
    from dtype_explorer.keras_run.trace._op_trace import MAX_STEPS

    r = dx.probe(ManyOps, input_dtype="float32")
    assert r.status == "ok", r.error
    assert len(r.trace) == MAX_STEPS and r.trace_dropped > 0
    assert len(r.trace) + r.trace_dropped >= 400
    assert f"{r.trace_dropped} more op(s), not recorded" in str(r)


# ------------------------------------------------------------ pydantic internals it relies on


def test_records_built_without_validation_are_the_records_pydantic_builds():
    """``_trace_records.built`` writes a pydantic model's instance slots itself (``__dict__``,
    ``__pydantic_fields_set__``, ``__pydantic_extra__``, ``__pydantic_private__``) to skip
    validation: this pins that layout, so a pydantic release that changes it fails here."""
    import pydantic

    from dtype_explorer.keras_run.trace import _records as _trace_records
    from dtype_explorer.records import TraceStep, TraceTensor

    validated = TraceTensor(name="x", dtype="float16", shape=(2, 3), kind="tensor", stored=None)
    for slot in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
        assert slot in pydantic.BaseModel.__slots__, slot  # the instance slots it sets
        assert hasattr(validated, slot), slot
    assert validated.__pydantic_extra__ is None and validated.__pydantic_private__ is None
    built = _trace_records.built(
        TraceTensor, name="x", dtype="float16", shape=(2, 3), kind="tensor", stored=None
    )
    assert type(built) is TraceTensor
    assert built == validated
    assert built.model_dump() == validated.model_dump()
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_fields_set == set(TraceTensor.model_fields)
    assert TraceTensor.model_validate_json(built.model_dump_json()) == validated
    assert built.model_copy(update={"dtype": "float32"}).dtype == "float32"
    with pytest.raises(pydantic.ValidationError):  # the records stay frozen
        built.dtype = "float32"

    with op_trace() as trace:
        keras.ops.add(keras.ops.ones((2,), dtype="int8"), 1.5)
    steps = trace.steps()
    assert steps, "the trace recorded nothing"
    for step in steps:  # every field given: nothing is left to a default pydantic would fill
        assert set(vars(step)) == set(TraceStep.model_fields)
        assert TraceStep.model_validate_json(step.model_dump_json()) == step


def test_the_trace_state_is_one_object_and_its_caches_are_bounded_lru_caches():
    """One state object (the open traces, the bindings, the wrappers); the caches are
    ``functools.lru_cache``\\ s, and those keyed by what a call saw are bounded."""
    import functools

    from dtype_explorer.keras_run.trace import _frames as _trace_frames
    from dtype_explorer.keras_run.trace import _op_trace as _trace
    from dtype_explorer.keras_run.trace import _records as _trace_records

    with op_trace() as trace:
        assert _trace._TRACING.installed >= 1 and _trace._TRACING.trace is not None
        keras.ops.add(keras.ops.ones((2,), dtype="int8"), 1.5)  # a promotion: result_type's
    assert _trace._TRACING.trace is None
    trace.steps()  # the records built here, not by a test that happened to run before
    assert _trace._TRACING.groups, "no binding was found to wrap"
    for cached in (
        _trace_frames.classify,
        _trace_records.type_kind,
        _trace_records.result_type,
        _trace_records._tensor_record,
        _trace_records._change_of,
    ):
        assert isinstance(cached, functools._lru_cache_wrapper)
        assert cached.cache_info().currsize > 0
    assert _trace_records._tensor_record.cache_info().maxsize == _trace_records.RECORDS_CACHED
    assert _trace_records._change_of.cache_info().maxsize == _trace_records.RECORDS_CACHED
