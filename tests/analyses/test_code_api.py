"""``dx.trace``'s two forms, in this process: every keyword given with the function is the
function's (``policy=`` too), the tool's options come first (``dx.trace(policy=...)(fn, x)``,
``with dx.trace(floatx=...)``), each checked with a clear error; compared with the same code
run untraced under raw Keras with the same settings."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError


def dense(x, policy="float32"):
    keras.utils.set_random_seed(3)
    return keras.layers.Dense(2, dtype=policy)(x)


def no_options(x):
    return keras.ops.add(x, 1)


def _bytes(t):
    a = np.asarray(keras.ops.convert_to_numpy(t))
    return a.dtype, a.tobytes()


def test_a_keyword_named_like_an_option_is_the_functions():
    x = np.ones((1, 3))
    raw = dense(x, policy="mixed_float16")
    r = dx.trace(dense, x, policy="mixed_float16")
    assert r.status == "ok" and r.environment.policy == "float32"  # the tool set no policy
    assert r.returned_dtype == keras.backend.standardize_dtype(raw.dtype) == "float16"
    assert _bytes(r.value) == _bytes(raw)


def test_the_tools_options_first_set_and_put_back():
    x = np.ones((1, 3))
    keras.config.set_dtype_policy("mixed_float16")
    try:
        raw = dense(x, policy=None)  # raw Keras under the global policy
    finally:
        keras.config.set_dtype_policy("float32")
    r = dx.trace(policy="mixed_float16")(dense, x, policy=None)
    assert r.environment.policy == "mixed_float16" and r.status == "ok"
    assert r.returned_dtype == keras.backend.standardize_dtype(raw.dtype) == "float16"
    assert _bytes(r.value) == _bytes(raw)
    assert keras.config.dtype_policy().name == "float32"
    with dx.trace(floatx="float16", max_steps=1) as t:
        ones = keras.ops.ones(2)
        keras.ops.add(ones, 1)
    assert t.result.environment.floatx == "float16" and keras.config.floatx() == "float32"
    assert [s.signature() for s in t.steps] == ["ops.ones() -> float16"] and t.dropped == 1
    assert keras.backend.standardize_dtype(ones.dtype) == "float16"


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda: dx.trace(no_options, 1, backend="all"), "dx.trace(backend='all')(no_options"),
        (lambda: dx.trace(no_options, 1, max_steps=3), "takes no keyword 'max_steps'"),
        (lambda: dx.trace(backnd="jax"), "did you mean 'backend'"),
        (lambda: dx.trace(floatx="float8"), "unknown floatx 'float8'"),
        (lambda: dx.trace(policy="mixed_float17"), "unknown dtype policy 'mixed_float17'"),
        (lambda: dx.trace(precision="max"), "unknown precision 'max'"),
        (lambda: dx.trace(max_steps=-1), "received: -1"),
        (lambda: dx.trace(timeout=0), "Received: 0"),
        (lambda: dx.trace(backend="jaxx"), "'jaxx'"),
        (lambda: dx.trace(engine="tf_keras"), "Keras 2 (tf_keras)"),
        (lambda: dx.trace(policy="float16")("Dense"), "received: 'Dense' (str)"),
    ],
)
def test_bad_options_are_named(call, said):
    with pytest.raises(InvalidSpecError) as info:
        call()
    assert said in str(info.value)


def test_a_block_cannot_travel_and_says_so():
    with pytest.raises(InvalidSpecError) as info, dx.trace(backend="jax,numpy"):
        pass
    assert "received: backend='jax,numpy'" in str(info.value)


def test_code_that_runs_only_later_is_said_not_traced():
    # a generator's body runs as it is iterated, a coroutine's when awaited: after the trace
    # closed, so "0 steps, no dtype change" alone would read as code with no dtype change
    x = np.ones(2, "float16")

    def doubled(x):
        yield keras.ops.multiply(x, 2.0)

    async def doubled_later(x):
        return keras.ops.multiply(x, 2.0)

    gen = dx.trace(doubled, x)
    assert gen.status == "ok" and gen.steps == ()
    assert "returned a generator: its body runs only as it is iterated" in gen.note
    assert "note: the code returned a generator" in str(gen)
    iterated = dx.trace(lambda: list(doubled(x)))
    assert [s.op for s in iterated.steps] == ["ops.multiply"] and "generator" not in iterated.note
    coroutine = dx.trace(doubled_later, x)
    assert "returned a coroutine: its body runs only when it is awaited" in coroutine.note
    coroutine.value.close()  # never awaited here: closed, as the user would


def test_eager_runs_compiled_functions_op_by_op_and_puts_the_switch_back():
    # a tf.function's second call runs its graph: no Python, no step the trace could see;
    # eager=True runs it op by op (tf.config.run_functions_eagerly), every step with values
    import tensorflow as tf  # this session's backend (conftest)

    @tf.function
    def grows(x):
        return keras.ops.exp(keras.ops.cast(x, "float16"))

    x = np.array([1.0, 12.0], "float32")
    raw = np.asarray(grows(x))  # compiled here, as the user's own call did; exp(12) > 65504
    assert np.isinf(raw[1]) and not np.isinf(raw[0])
    plain = dx.trace(grows, x)
    assert plain.steps == () and not plain.environment.eager
    assert plain.note.startswith("no Keras op ran where the trace sees it")
    eager = dx.trace(eager=True)(grows, x)
    assert [s.op for s in eager.steps] == ["ops.cast", "ops.exp"]
    assert eager.first_nonfinite_step().op == "ops.exp" and eager.environment.eager
    assert np.array_equal(np.asarray(eager.value), raw, equal_nan=True)
    assert "compiled functions run eagerly" in str(eager)
    assert tf.config.functions_run_eagerly() is False  # put back
    # Keras's own compiled predict step: its Dense seen with values
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, dtype="mixed_float16")])
    model.predict(x[None], verbose=0)
    seen = dx.trace(eager=True)(model.predict, x[None], verbose=0)
    assert any(s.op == "Dense.__call__" for s in seen.steps)
    with dx.trace(eager=True) as block:
        grows(x)
    assert [s.op for s in block.steps] == ["ops.cast", "ops.exp"]
    with pytest.raises(InvalidSpecError, match="eager must be True or False; received: 'yes'"):
        dx.trace(eager="yes")


def test_a_tf_function_traced_names_the_users_lines_not_autographs_file():
    # a tf.function's first call runs the code AutoGraph generated from it: each step's line
    # was that temporary file's ("ag__.converted_call(...)"), where TensorFlow's own errors
    # name the user's line
    import inspect

    import tensorflow as tf  # this session's backend (conftest)

    dense = keras.layers.Dense(3)

    @tf.function
    def step(x):
        y = dense(x)
        return keras.ops.multiply(y, 2.0)

    r = dx.trace(step, np.ones((1, 2), "float32"))
    lines, start = inspect.getsourcelines(step.python_function)
    wanted = {
        "Dense.__call__": start + next(i for i, t in enumerate(lines) if "dense(x)" in t),
        "ops.multiply": start + next(i for i, t in enumerate(lines) if "multiply" in t),
    }
    seen = {s.op: s.user for s in r.steps if s.op in wanted}
    assert {op: (u.file, u.line) for op, u in seen.items()} == {
        op: (__file__, line) for op, line in wanted.items()
    }
    assert "dense(x)" in seen["Dense.__call__"].text
    assert not any("autograph" in (s.source.file if s.source else "") for s in r.steps)


def test_ops_on_other_threads_are_said_not_traced():
    # the trace follows the thread that runs the code: a pool's ops are no steps, and the
    # result says they ran rather than answering "no dtype change" for them
    from concurrent.futures import ThreadPoolExecutor

    def pooled(x):
        with ThreadPoolExecutor(2) as pool:
            halves = list(pool.map(lambda v: keras.ops.cast(v, "float16"), [x, x]))
        return keras.ops.multiply(halves[0], 2)

    x = np.ones(2, "float32")
    result = dx.trace(pooled, x)
    assert [s.op for s in result.steps] == ["ops.multiply"]
    assert result.returned_dtype == "float16"  # what the pool's casts made, raw Keras's
    said = result.note
    assert "times on other threads while the code ran" in said and "none of them is a step" in said
    assert int(said.split("called ")[1].split(" times")[0]) >= 2  # the two casts at least
    assert "other threads" not in dx.trace(lambda: keras.ops.cast(x, "float16")).note
