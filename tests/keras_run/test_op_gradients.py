"""An op's ``mode="fit"``: the gradient of its output w.r.t. its float inputs, beside the same
gradient taken by hand with each backend's own autodiff (tensorflow in this process, see
conftest.py; jax and torch in processes of their own); numpy has none: not supported."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import dtype_explorer as dx
from dtype_explorer.errors import InvalidSpecError

#: exp(12) overflows float16: the output, and its gradient exp(x), hold inf
LARGE = np.array([[12.0, 1.0], [0.5, -2.0]], "float16")

_RAW = """
import json, sys, numpy as np, keras
backend = keras.backend.backend()
x = np.array(json.loads(sys.argv[1]), sys.argv[3])
op = getattr(keras.ops, sys.argv[2])
t = keras.ops.convert_to_tensor(x)
if backend == "jax":
    import jax
    g = jax.grad(lambda a: keras.ops.sum(op(a)))(t)
else:
    import torch
    t = t.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(keras.ops.sum(op(t)), [t])
v = keras.ops.convert_to_numpy(keras.ops.cast(g, "float32"))
print(json.dumps([keras.backend.standardize_dtype(g.dtype), int((~np.isfinite(v)).sum())]))
"""


def _raw_gradient(backend: str, op: str, x: np.ndarray) -> tuple[str, int]:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    args = [sys.executable, "-c", _RAW, json.dumps(x.tolist()), op, str(x.dtype)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    dtype, nonfinite = json.loads(done.stdout.strip().splitlines()[-1])
    return dtype, nonfinite


@pytest.mark.parametrize("op", ["normalize", "exp"])
def test_an_op_s_fit_is_its_gradient_as_tf_gradient_tape_gives_it(op):
    r = dx.probe(f"ops.{op}", values=[LARGE], mode="fit")
    assert r.status == "ok", r.error
    x = tf.convert_to_tensor(LARGE)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = keras.ops.sum(getattr(keras.ops, op)(x))
    raw = tape.gradient(y, x)
    (grad,) = r.fit.gradients
    assert grad.dtype == keras.backend.standardize_dtype(raw.dtype)
    assert grad.variable_dtype == "float16"
    assert grad.nonfinite == int((~np.isfinite(raw.numpy().astype("float32"))).sum())
    assert "tf.GradientTape" in r.fit.execution


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_an_op_s_gradient_on_other_backends_is_their_own_autodiff_s(backend):
    raw = _raw_gradient(backend, "exp", LARGE)
    r = dx.probe("ops.exp", values=[LARGE], backend=backend, mode="fit", use_cache=False)
    assert r.status == "ok", r.error
    (grad,) = r.fit.gradients
    assert (grad.dtype, grad.nonfinite) == raw
    assert raw[1] > 0  # exp(12) left float16's range in the gradient too


def test_an_op_s_gradient_skips_its_integer_inputs_and_numpy_has_none():
    r = dx.probe("ops.add", ["float32", "int32"], mode="fit")
    assert r.status == "ok", r.error
    assert [g.name for g in r.fit.gradients] == ["input 0"]
    with pytest.raises(InvalidSpecError, match="the numpy backend has no gradients"):
        dx.probe("ops.normalize", backend="numpy", mode="fit")
    only_ints = dx.probe("ops.add", ["int32", "int32"], mode="fit")
    assert only_ints.unsupported and "no float input" in only_ints.error.message
