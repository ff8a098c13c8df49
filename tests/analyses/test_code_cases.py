"""The cases of docs/guide/code.md ("My own code"), each run traced by ``dx.trace`` and untraced
under raw Keras in the same fresh process, on the backend the guide names: the dtypes and the
values the trace shows are what the code gives untraced."""

from __future__ import annotations

import pytest

from tests.on_backend import json_on

_COMMON = r"""
import json, keras, numpy as np
import dtype_explorer as dx

def both(fn):
    keras.utils.set_random_seed(0)
    raw = fn()
    keras.utils.set_random_seed(0)
    r = dx.trace(fn)
    got = r.value
    raw_np, got_np = (np.asarray(keras.ops.convert_to_numpy(v)) for v in (raw, got))
    return {
        "raw_dtype": keras.backend.standardize_dtype(raw.dtype),
        "dtype": r.returned_dtype,
        "equal": raw_np.dtype == got_np.dtype and raw_np.tobytes() == got_np.tobytes(),
        "raw_values": raw_np.reshape(-1)[:8].astype("float64").tolist(),
        "ops": [s.op for s in r.steps],
        "first_nonfinite": getattr(r.first_nonfinite_step(), "op", None),
        "changes": [(s.op, s.inputs[0].dtype if s.inputs else None, s.outcome)
                    for s in r.dtype_changes()],
        "status": r.status,
    }
"""

CASES = {
    "to_categorical": (
        "jax",
        "def case():\n    return keras.utils.to_categorical(np.ones(2), 2)\n",
    ),
    "scale_loss": (
        "jax",
        "def case():\n"
        "    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD())\n"
        "    loss = keras.ops.convert_to_tensor(np.full((), 4.0, 'float16'))\n"
        "    return opt.scale_loss(loss)\n",
    ),
    "train_step": (
        "tensorflow",
        "import tensorflow as tf\n"
        "def case():\n"
        "    keras.config.set_dtype_policy('mixed_float16')\n"
        "    try:\n"
        "        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8),\n"
        "                                  keras.layers.Dense(1, dtype='float32')])\n"
        "        opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01))\n"
        "        x, y = np.ones((2, 4), 'float32'), np.zeros((2, 1), 'float32')\n"
        "        with tf.GradientTape() as tape:\n"
        "            pred = model(x, training=True)\n"
        "            loss = keras.ops.mean(keras.ops.square(y - pred))\n"
        "            scaled = opt.scale_loss(loss)\n"
        "        grads = tape.gradient(scaled, model.trainable_variables)\n"
        "        opt.apply(grads, model.trainable_variables)\n"
        "        return loss\n"
        "    finally:\n"
        "        keras.config.set_dtype_policy('float32')\n",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_guides_case_traced_equals_raw_keras(name):
    backend, code = CASES[name]
    out = json_on(backend, _COMMON + code + "print(json.dumps(both(case)))")
    assert out["status"] == "ok", out
    assert out["equal"] and out["dtype"] == out["raw_dtype"], out
    if name == "to_categorical":  # NumPy's path in Keras 3: float64, no Keras op at all
        assert out["raw_dtype"] == "float64" and out["ops"] == []
    elif name == "scale_loss":  # the float16 loss times the 2**15 scale overflows
        assert out["raw_dtype"] == "float16" and out["raw_values"] == [float("inf")]
        assert out["first_nonfinite"] is not None
    else:  # the float16 Dense's output goes float32 at the float32 head
        assert out["raw_dtype"] == "float32"
        assert "Dense.__call__" in out["ops"] and "LossScaleOptimizer.__call__" not in out["ops"]
        assert any(i == "float16" and o == "float32" for _, i, o in out["changes"]), out
