"""A variable's read dtype is the one its value holds, autocast as ``call()`` reads it, not the
one Keras declares: on jax without ``jax_enable_x64`` a ``Dense(dtype="float64")`` declares
float64 weights that hold float32, and the probe said "stored and read as float64". Beside
raw Keras on jax (the probe's worker) and tensorflow, where float64 is kept."""

from __future__ import annotations

import pytest

import dtype_explorer as dx
from tests.on_backend import json_on

RAW = """
import json, warnings
import keras
warnings.simplefilter("ignore")
dense = keras.layers.Dense(4, dtype="float64")
dense.build((2, 4))
print(json.dumps({
    "declared": dense.kernel.dtype,
    "held": keras.backend.standardize_dtype(dense.kernel.value.dtype),
}))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_a_float64_kernel_is_read_as_the_dtype_raw_keras_holds(backend):
    raw = json_on(backend, RAW)
    result = dx.probe("Dense", "float64", policy="float64", backend=backend, use_cache=False)
    steps = {s.name: s for s in result.cast_path if s.stage == "variables"}
    kernel = steps["kernel"]
    assert raw["declared"] == "float64" and kernel.dtype == raw["held"]
    if backend == "jax":  # x64 off: Keras says float64, the value is float32
        assert raw["held"] == "float32" and kernel.changed
        assert kernel.note == "stored float64, read as float32 inside call()"
    else:
        assert raw["held"] == "float64" and not kernel.changed
        assert kernel.note == "stored and read as float64"
