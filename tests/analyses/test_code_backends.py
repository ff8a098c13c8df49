"""``dx.trace(backend=...)(fn, ...)``: the user's function and its arguments sent by value to
each backend's user-code worker (real workers), traced there with the user's lines (its helpers'
too), compared with the same function run untraced in a worker of that backend; and the
user-code worker that ran traced code is a fresh process for the next one, so that what a cell
changed there (Keras's global policy) does not reach the next cell."""

from __future__ import annotations

import inspect

import keras
import numpy as np
import pytest
from on_backend import json_on

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import CodeComparison, TraceResult

BACKENDS = ["jax", "numpy"]


def scaled(x):  # a helper of the user's: its lines travel with the function
    return keras.ops.cast(x, "float16") * 2


def forward(x, *, offset):
    y = keras.ops.add(scaled(x), offset)
    return keras.ops.exp(y)


def untraced(x, offset):
    """What raw Keras gives there: dtype and bytes of ``forward`` run untraced."""
    out = np.asarray(keras.ops.convert_to_numpy(forward(x, offset=offset)))
    return str(out.dtype), out.tobytes()


def _line(fn, text):
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_a_function_on_two_backends_equals_raw_keras_there_with_the_users_lines():
    x = np.array([1.0, 5.0], "float64")
    raw = {b: dx.pool.call(b, untraced, x, 1).result(timeout=600) for b in BACKENDS}
    compared = dx.trace(backend=BACKENDS)(forward, x, offset=1)
    assert isinstance(compared, CodeComparison) and compared.statuses() == dict.fromkeys(
        BACKENDS, "ok"
    )
    for backend, result in compared.results.items():
        assert result.environment.where == f"{backend}~user worker"
        (returned,) = result.returned
        assert (returned.dtype, returned.shape) == (raw[backend][0], (2,))
        raw_values = np.frombuffer(raw[backend][1], raw[backend][0]).astype("float64")
        assert returned.sample == tuple(raw_values.tolist())
        cast = next(s for s in result.steps if s.op == "ops.cast")
        src = result.user_line(cast)
        assert (src.file, src.line) == (__file__, _line(scaled, "ops.cast"))
        assert "keras.ops.cast" in src.text
    assert compared.dtype_part() is None  # the same ops and dtypes on both
    one = dx.trace(backend="numpy", max_steps=1)(forward, x, offset=1)
    assert isinstance(one, TraceResult) and len(one.steps) == 1 and one.dropped >= 1


def spaced_by_backend():  # a detokenizer's answer: its whitespace is the value
    return "a b  a\t" if keras.backend.backend() == "jax" else "a b a\t"


def spaced():
    return "a b  a\t"


def test_a_returned_string_is_shown_and_compared_exactly():
    """A returned string was shown with its runs of whitespace joined ('a b  a' as 'a b a'),
    and two different strings compared as agreeing values."""
    raw = {b: dx.pool.call(b, spaced_by_backend).result(timeout=600) for b in BACKENDS}
    assert raw["jax"] != raw["numpy"]
    compared = dx.trace(backend=BACKENDS)(spaced_by_backend)
    for backend, result in compared.results.items():
        (returned,) = result.returned
        assert returned.describe() == f"{raw[backend]!r} (builtins str)"
    assert compared.value_part() == (
        f"The values the function returned part (out: {raw['jax']!r} on jax, "
        f"{raw['numpy']!r} on numpy)."
    )
    assert "agree" in dx.trace(backend=BACKENDS)(spaced).headline()


def registers_and_sets_floatx():
    """Sets floatx and registers classes, as ``import keras_hub`` registers hundreds."""
    keras.config.set_floatx("bfloat16")
    for i in range(12):
        keras.saving.register_keras_serializable("wt_test")(
            type(f"Made{i}", (), {"get_config": lambda self: {}})
        )
    return keras.config.floatx(), len(keras.saving.get_custom_objects())


def test_the_floatx_the_code_set_and_the_objects_put_back_after_it_are_said_in_short():
    """The header said the floatx from before the call (float32) where the function set
    bfloat16, and the note listed every registry entry put back after it (tens of kB after
    ``import keras_hub``): the header now says both, the note a count and the first few, the
    record every name."""
    raw = dx.pool.call("numpy", registers_and_sets_floatx).result(timeout=600)
    result = dx.trace(backend="numpy")(registers_and_sets_floatx)
    assert result.status == "ok", result.error
    floatx, registered = (v.text for v in result.returned)
    assert (floatx.strip("'"), int(registered)) == tuple(raw) and raw[0] == "bfloat16"
    env = result.environment
    assert (env.floatx, env.floatx_after, env.policy_after) == ("float32", "bfloat16", None)
    assert "floatx float32 -> bfloat16 (set by the code), policy float32" in str(result)
    assert "floatx float32 -&gt; bfloat16 (set by the code)" in result._repr_html_()
    objects = {n for n in result.put_back if n.startswith("GLOBAL_CUSTOM_OBJECTS['wt_test>")}
    names = {n for n in result.put_back if n.startswith("GLOBAL_CUSTOM_NAMES[")}
    assert len(objects) == len(names) == 12 and len(result.put_back) >= 24
    assert f"put back after the function: {len(result.put_back)} of Keras's objects (" in (
        result.note
    )
    assert sum(name in result.note for name in result.put_back) == 3


def test_what_cannot_travel_is_named_before_anything_runs():
    lock = __import__("threading").Lock()
    with pytest.raises(InvalidSpecError) as info:
        dx.trace(backend="numpy")(forward, lock, offset=1)
    assert "argument 0 (_thread.lock) cannot travel" in str(info.value)


def ends_its_worker(x):
    import os

    keras.ops.add(x, 1)
    os._exit(0)


def test_a_function_that_ends_its_worker_is_said_and_the_next_one_runs():
    # exit code 0: pebble took such a worker for one that ended as asked and left its task
    # unanswered, so dx.trace waited to its time limit (here 60 s: then "timeout")
    ended = dx.trace(backend="numpy", timeout=60)(ends_its_worker, np.ones(2))
    assert isinstance(ended, TraceResult) and ended.status == "exited", ended.error
    message = ended.error.message
    assert ended.error.type == "WorkerExited" and "numpy~user worker exited with code 0" in message
    assert str(dx.pool.log_path(dx.pool.user_slot("numpy"))) in message
    assert dx.trace(backend="numpy")(forward, np.ones(2), offset=1).status == "ok"


def jitted_twice(x):
    import jax

    grows = jax.jit(lambda y: keras.ops.exp(keras.ops.cast(y, "float16")))
    grows(x)  # compiled: its ops get tracers (dtypes, no values)
    return grows(x)  # the compiled function runs: no Python, no step


def test_eager_travels_to_the_workers_and_opens_the_jit():
    x = np.array([1.0, 12.0], "float32")  # exp(12) > 65504: inf in float16
    plain = dx.trace(backend="jax")(jitted_twice, x)
    assert [s.op for s in plain.steps] == ["ops.cast", "ops.exp"]  # the first call's, traced
    assert all(s.abstract for s in plain.steps) and plain.first_nonfinite_step() is None
    eager = dx.trace(backend="jax", eager=True)(jitted_twice, x)
    assert [s.op for s in eager.steps] == ["ops.cast", "ops.exp"] * 2
    assert eager.first_nonfinite_step().op == "ops.exp" and eager.environment.eager
    (returned,) = eager.returned
    assert returned.sample[0] == pytest.approx(np.exp(1.0), rel=1e-3)
    assert returned.sample[1] == float("inf")


SETS_POLICY = "import os\nkeras.config.set_dtype_policy('mixed_float16')\nos.getpid()"
READS = "import os\n(os.getpid(), keras.layers.Dense(2).compute_dtype)"


def test_the_worker_that_ran_a_cell_is_fresh_for_the_next(shell):
    """Raw Keras in a fresh process makes a float32 Dense; a cell that set the global policy
    in the numpy worker must not make the next cell's Dense float16 there."""
    shell.user_ns["keras"] = keras
    first = shell.run_cell_magic("dtype_trace", "--backend numpy", SETS_POLICY)
    second = shell.run_cell_magic("dtype_trace", "--backend numpy", READS)
    pid, dtype = (v.text.strip("'") for v in second.results["numpy"].returned)
    assert pid != first.results["numpy"].returned[0].text
    assert dtype == keras.layers.Dense(2).compute_dtype == "float32"


COMPILED_TRACED_AGAIN = """
import json, warnings
import keras, numpy as np, torch
from torch._dynamo.utils import counters
import dtype_explorer as dx

@torch.compile
def f(x):
    return keras.ops.tanh(keras.ops.matmul(x, x) * 0.5)

x = keras.ops.convert_to_tensor(np.linspace(-1, 1, 16, dtype="float32").reshape(4, 4))
raw = f(x).numpy().tobytes()  # compiled once, untraced
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    traced = [dx.trace(f, x) for _ in range(10)]
eager = dx.trace(eager=True)(f, x)
print(json.dumps({
    "compiled": counters["frames"]["total"],
    "same": [np.asarray(r.value).tobytes() == raw for r in traced],
    "after": f(x).numpy().tobytes() == raw,
    "ours": [str(w.message)[:200] for w in caught if "dtype_explorer" in str(w.message)],
    "notes": [r.note for r in traced],
    "steps": [len(r.steps) for r in traced],
    "eager": [s.op for s in eager.steps],
    "eager_abstract": any(s.abstract for s in eager.steps),
}))
"""


def test_a_torch_compiled_function_traced_again_and_again_stays_compiled():
    # the trace's operator mode was a class made afresh for each trace: Dynamo, which guards a
    # compiled function on the modes' types, compiled the user's function again under every
    # trace until its recompile limit (8) left it uncompiled for the rest of the session; and
    # it traced the recorder itself, with two dozen warnings naming this package
    got = json_on("torch", COMPILED_TRACED_AGAIN)
    assert got["compiled"] == 2, got  # the first call, then once under the first trace
    assert all(got["same"]) and got["after"] and got["ours"] == [], got
    assert got["notes"][0].startswith("torch.compile compiled a function while the code ran")
    assert "eager=True" in got["notes"][0] and got["steps"][0] == 0
    # the traces after it run the compiled graph: nothing seen, and said
    assert all(n.startswith("no Keras op ran where the trace sees it") for n in got["notes"][1:])
    assert got["eager"] == ["ops.matmul", "operator.mul", "ops.tanh"], got
    assert not got["eager_abstract"]
