"""``dx.trace``: the user's own function or ``with`` block, run as written, every dtype step
recorded; compared with the same code run untraced beside it (dtypes and bytes equal), in this
process (TensorFlow) and on jax, torch and numpy in fresh processes."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import TraceResult
from tests.on_backend import json_on


def forward(x):
    dense = keras.layers.Dense(3, dtype="mixed_float16", kernel_initializer="ones")
    y = dense(x)  # the line of the layer call
    z = keras.ops.cast(y, "float32") * 2.0
    return z, keras.ops.sum(z)


def raises_at_step_three(x):
    a = keras.ops.add(x, 1)
    b = keras.ops.multiply(a, 2)
    c = keras.ops.subtract(b, 1)
    raise ValueError(f"the user's own error after {c.shape}")


def _line(fn, text):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_steps_lines_and_value_match_untraced_keras():
    x = np.arange(6, dtype="float64").reshape(2, 3)
    raw = forward(x)
    result = dx.trace(forward, x)
    assert isinstance(result, TraceResult) and result.status == "ok"
    ops = [s.op for s in result.steps]
    assert ops[0] == "Dense.__call__" and "ops.cast" in ops and "ops.sum" in ops
    layer = result.steps[0]
    assert layer.inputs[0].dtype == "float64" and layer.outputs[0].dtype == "float16"
    # the autocast of the float64 input to the layer's compute dtype, on the layer's line
    casts = [s for s in result.steps if s.inside == "Dense.__call__" and s.changes_dtype]
    assert casts and casts[0].inputs[0].dtype == "float64"
    assert result.user_line(casts[0]).line == _line(forward, "the line of the layer call")
    assert result.user_line(casts[0]).file == __file__
    # the values: the same dtypes and bytes as the untraced call
    assert [v.dtype for v in result.returned] == [
        keras.backend.standardize_dtype(t.dtype) for t in raw
    ]
    for traced, untraced in zip(result.value, raw, strict=True):
        a, b = keras.ops.convert_to_numpy(traced), keras.ops.convert_to_numpy(untraced)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert result.environment.backend == keras.backend.backend() == "tensorflow"
    assert result.environment.keras == keras.__version__


def test_json_round_trip_text_and_card():
    result = dx.trace(forward, np.ones((1, 3)))
    back = TraceResult.from_json(result.to_json())
    assert back.to_dict() == result.to_dict() and back.value is None
    text = str(result)
    assert "Dense.__call__(float64[1x3])" in text and "test_code.py" in text
    card = result._repr_html_()
    assert "dx-card" in card and "Dense.__call__" in card
    assert json.loads(result.to_json())["steps"][0]["user"]["file"] == __file__


def test_a_raise_keeps_the_steps_before_it_and_the_users_traceback():
    result = dx.trace(raises_at_step_three, keras.ops.ones((2,)))
    assert result.status == "raised" and result.error.type == "ValueError"
    assert [s.op for s in result.steps] == ["ops.add", "ops.multiply", "ops.subtract"]
    assert "the user's own error" in result.error.message
    assert __file__ in result.error.traceback
    assert "dtype_explorer" not in result.error.traceback
    assert "ValueError" in str(result)


def test_with_block_records_and_lets_the_error_through():
    x = keras.ops.full((2,), 100.0, dtype="float16")
    with dx.trace() as t:
        y = keras.ops.exp(x)
    assert [s.op for s in t.steps] == ["ops.exp"]
    assert t.first_nonfinite_step().op == "ops.exp"
    assert np.array_equal(
        keras.ops.convert_to_numpy(y), keras.ops.convert_to_numpy(keras.ops.exp(x))
    )
    with pytest.raises(ZeroDivisionError), dx.trace() as t2:
        keras.ops.ones(1)
        1 / 0  # noqa: B018
    assert t2.result.status == "raised" and [s.op for s in t2.steps] == ["ops.ones"]


def test_max_steps_keeps_the_first_and_counts_the_rest():
    def loop():
        x = keras.ops.zeros(())
        for _ in range(20):
            x = keras.ops.add(x, 1.0)
        return x

    with dx.trace(max_steps=5) as t:
        out = loop()
    assert len(t.steps) == 5 and t.dropped == 16
    assert float(out) == 20.0


def test_the_trace_leaves_keras_as_it_was():
    from keras.src.layers.layer import Layer

    call = Layer.__dict__["__call__"]
    add = keras.ops.add
    dx.trace(forward, np.ones((1, 3)))
    with pytest.raises(ValueError), dx.trace():
        raise ValueError("x")
    assert Layer.__dict__["__call__"] is call and keras.ops.add is add
    assert not hasattr(keras.ops.add, "__wrapped__")
    assert keras.config.dtype_policy().name == "float32"


def test_a_collection_in_the_traced_code_frees_what_it_frees_untraced():
    """The user's code runs as written: a cycle made before the trace, dropped and collected
    by the traced code, is gone when that code looks (the collector is not held back)."""
    import gc
    import weakref

    class Node:
        pass

    node = Node()
    node.self = node  # freed only by the cycle collector
    alive, holder = weakref.ref(node), [node]
    del node

    def drop(x):
        holder.clear()
        gc.collect()
        return keras.ops.add(x, 1), alive() is None

    result = dx.trace(drop, np.ones((2,)))
    assert result.status == "ok" and result.value[1] is True


def test_every_binding_and_class_is_back_after_each_trace():
    """What a trace replaces, found once and kept between traces (its module bindings, the
    tensor classes' operators, Keras's layer, variable and optimizer methods), is every bit
    Keras's own again after each trace, the second as the first."""
    from keras.src.backend.common.variables import Variable
    from keras.src.layers.layer import Layer

    from dtype_explorer.keras_run.trace import _op_trace as op_trace
    from dtype_explorer.keras_run.trace import _operators as operators

    tensor = type(keras.ops.ones(()))
    classes = (Layer, Variable, tensor, keras.optimizers.SGD, keras.optimizers.Optimizer)
    names = (*operators.OPERATORS, "__call__", "__init__", "assign", "assign_add", "apply")

    def snapshot() -> tuple:
        own = {(c, n): vars(c).get(n) for c in classes for n in names}
        return own, op_trace.wrapped_bindings()

    before = snapshot()

    def train() -> object:
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        optimizer = keras.optimizers.SGD()
        optimizer.build(model.trainable_variables)
        grads = [keras.ops.ones_like(v) for v in model.trainable_variables]
        optimizer.apply(grads, model.trainable_variables)
        return model(np.ones((1, 3), "float32")) * 2.0

    for _ in range(2):
        result = dx.trace(train)
        assert {"Dense.__call__", "SGD.apply", "operator.mul"} <= {s.op for s in result.steps}
        assert snapshot() == before


@pytest.mark.parametrize(
    ("args", "kwargs", "said"),
    [
        (("Dense",), {}, "received: 'Dense' (str)"),
        ((), {"max_steps": "many"}, "received: 'many'"),
        ((), {"max_step": 3}, "did you mean 'max_steps'"),
    ],
)
def test_bad_input_is_named(args, kwargs, said):
    with pytest.raises(InvalidSpecError) as info:
        dx.trace(*args, **kwargs)
    assert said in str(info.value)


def one_training_step(x):
    """A variable made and assigned, a mixed_float16 model, its loss scaled, one optimizer
    step: each a named step of the trace."""
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    v = keras.Variable(np.ones((2,)), dtype="float32")
    added = v.assign_add(np.full((2,), 0.5, "float16"))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, dtype="mixed_float16")])
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    with tf.GradientTape() as tape:
        loss = keras.ops.mean(model(x))
        scaled = opt.scale_loss(loss)
    grads = tape.gradient(scaled, model.trainable_variables)
    opt.apply(grads, model.trainable_variables)
    return added, loss, scaled, [w.value for w in model.trainable_variables]


def test_variables_the_optimizer_and_loss_scaling_are_named_steps_as_raw_keras_runs_them():
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    added, loss, scaled, weights = one_training_step(x)  # raw Keras, untraced
    r = dx.trace(one_training_step, x)
    assert r.status == "ok"
    dtype = keras.backend.standardize_dtype
    steps = {s.op: s for s in reversed(r.steps)}  # the first of each name
    made = r.steps[0]
    assert made.op == "Variable.__init__" and made.cast_to == "float32"
    assert [t.dtype for t in made.inputs] == ["float64"]
    assert made.outputs[0].dtype == "float32" and made.outputs[0].kind == "variable"
    assign = steps["Variable.assign_add"]
    assert [(t.dtype, t.kind) for t in assign.inputs] == [
        ("float32", "variable"),
        ("float16", "tensor"),
    ]
    assert assign.outcome == dtype(added.dtype) == "float32"
    scale = steps["LossScaleOptimizer.scale_loss"]
    assert [t.dtype for t in scale.inputs] == [dtype(loss.dtype)] == ["float16"]
    assert scale.outcome == dtype(scaled.dtype)
    assert scale.max_abs == float(np.abs(keras.ops.convert_to_numpy(scaled)).max())
    ops = [s.op for s in r.steps]
    apply = ops.index("LossScaleOptimizer.apply")
    assert "SGD.apply" in ops[apply:] and r.steps[apply].inputs[0].dtype == "float32"
    # the trace changed nothing: the same values, bitwise, as raw Keras
    for traced, untraced in zip(r.value[3], weights, strict=True):
        assert _bytes(traced) == _bytes(untraced)
    assert _bytes(r.value[0]) == _bytes(added) and _bytes(r.value[2]) == _bytes(scaled)


def predicates_and_control_flow(x):
    finite = keras.ops.isfinite(x)
    small = keras.ops.less(x, 2)
    both = keras.ops.logical_and(x, small)
    below = keras.ops.convert_to_tensor(x) < 3.0  # the Python operator: a comparison too
    picked = keras.ops.cond(
        keras.ops.all(both),
        lambda: (keras.ops.ones((2,), "float32"), keras.ops.zeros((), "int32")),
        lambda: (keras.ops.zeros((2,), "float32"), keras.ops.ones((), "int32")),
    )
    return finite, small, both, below, picked, keras.ops.add(x, keras.ops.ones((2,), "int32"))


def test_predicates_and_control_flow_convert_no_dtype_only_promotion_counts():
    """isfinite, less, logical_and and ``<`` return bool for every input dtype, and cond
    returns its branches' values: none converts a value, none counts as a dtype change nor
    gets a result_type note; the promotion beside them still does. Dtypes as raw Keras's."""
    x = np.array([1.0, 2.5], "float16")
    raw = keras.tree.flatten(predicates_and_control_flow(x))
    r = dx.trace(predicates_and_control_flow, x)
    assert [v.dtype for v in r.returned] == [keras.backend.standardize_dtype(t.dtype) for t in raw]
    steps = {s.op: s for s in r.steps if not s.inside}
    for op in ("ops.isfinite", "ops.less", "ops.logical_and", "operator.lt"):
        step = steps[op]
        assert step.inputs[0].dtype == "float16" and step.outcome == "bool", step.signature()
        assert step.change == "predicate" and not step.changes_dtype, step.change_text()
        assert "result_type" not in step.change_text() and step.conversions == ()
    assert steps["ops.all"].change == "kept"  # bool in, bool out
    cond = steps["ops.cond"]
    assert [t.dtype for t in cond.inputs] == ["bool"]
    assert [t.dtype for t in cond.outputs] == ["float32", "int32"]
    assert cond.change == "control-flow" and not cond.changes_dtype and cond.conversions == ()
    assert "result_type" not in cond.change_text()
    added = steps["ops.add"]
    assert added.change == "promoted" and added.outcome == r.returned[-1].dtype == "float16"
    assert [s.op for s in r.dtype_changes()] == ["ops.add"]
    assert "1 dtype change(s)" in r.headline()


def _bytes(t):
    a = np.asarray(keras.ops.convert_to_numpy(t))
    return a.dtype, a.tobytes()


_ON_BACKEND = r"""
import json, keras, numpy as np
import dtype_explorer as dx

def step_loss():
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD())
    loss = keras.ops.convert_to_tensor(np.full((), 4.0, "float16"))
    return opt.scale_loss(loss)

def sgd_step():
    v = keras.Variable(np.ones((2,), "float32"))
    keras.optimizers.SGD(0.5).apply([keras.ops.full((2,), 0.25)], [v])
    return v.value

def model_forward(x):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Softmax()])
    return model(x)

x = np.linspace(-1, 1, 8).reshape(2, 4).astype("float32")
out = {}
for name, fn, args in [("loss", step_loss, ()), ("model", model_forward, (x,)),
                       ("sgd", sgd_step, ())]:
    raw = keras.ops.convert_to_numpy(fn(*args))
    r = dx.trace(fn, *args)
    got = keras.ops.convert_to_numpy(r.value)
    out[name] = {
        "equal": raw.dtype == got.dtype and raw.tobytes() == got.tobytes(),
        "raw_dtype": str(raw.dtype), "dtype": r.returned_dtype,
        "ops": [s.op for s in r.steps], "status": r.status,
        "inside": [s.inside for s in r.steps],
        "nonfinite": getattr(r.first_nonfinite_step(), "op", None),
        "raw_inf": bool(np.isinf(raw).any()),
    }
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", ["jax", "torch", "numpy"])
def test_traced_equals_untraced_on_each_backend(backend):
    out = json_on(backend, _ON_BACKEND)
    for name in ("loss", "model", "sgd"):
        assert out[name]["status"] == "ok", out[name]
        assert out[name]["equal"], out[name]
    assert "Sequential.__call__" in out["model"]["ops"]
    assert "Dense.__call__" in out["model"]["ops"]
    # the variable made, the optimizer's step and the assignment it makes, named
    sgd = out["sgd"]
    assert sgd["ops"][0] == "Variable.__init__" and "SGD.apply" in sgd["ops"]
    if backend != "torch":  # torch's SGD updates the weights in place (torch._foreach_add_)
        assigned = sgd["ops"].index("Variable.assign_sub")
        assert sgd["inside"][assigned] == "SGD.apply"
    assert "LossScaleOptimizer.scale_loss" in out["loss"]["ops"]
    if backend != "numpy":  # numpy's scale_loss of a NumPy float16 scalar raises in Keras
        assert out["loss"]["dtype"] == out["loss"]["raw_dtype"]
    if backend == "jax":  # a float16 loss times the 2**15 scale: inf, as raw Keras gives
        assert out["loss"]["raw_inf"] and out["loss"]["dtype"] == "float16"
        assert out["loss"]["nonfinite"] is not None
