"""A constant fill on openvino (``ops.zeros``/``ones``/``full``: a zero bias, a unit scale) known
to hold one value without computing it (``keras_run._arrays.one_value_fill``), checked against
the values Keras's own ``convert_to_numpy`` reads back in the same openvino process (one value,
whatever OpenVINO's CPU plugin made of it: a subnormal flushed, an int64 saturated); every
OpenVINO compile Keras makes is counted by a wrapper around the ``compile_model`` Keras calls.
A probe of ``Dense``, which keeps a constant weight as drawn and seeds the others, then
compiles once, for its output, and its numbers are the numpy backend's."""

from __future__ import annotations

import math

import pytest
from on_backend import json_on

import dtype_explorer as dx

#: Raw Keras on openvino and the tool's read side by side; compiles counted around each.
SCRIPT = r"""
import json
import keras
import numpy as np
from keras.src.backend.openvino import core
from dtype_explorer.keras_run import make_spec, run_probe
from dtype_explorer.keras_run._arrays import one_value_fill

compiles = []
real = core.compile_model
core.compile_model = lambda *a, **k: compiles.append(1) or real(*a, **k)

def counted(read, tensor):
    before = len(compiles)
    array = np.asarray(read(tensor))
    return array, len(compiles) - before

cases = {
    "zeros float32": keras.ops.zeros((2, 3)),
    "ones float16": keras.ops.ones((4,), "float16"),
    "full 0.1 float32": keras.ops.full((3, 2), 0.1, "float32"),
    "full 1/3 float64": keras.ops.full((2, 2), 1 / 3, "float64"),
    "full -7 int32": keras.ops.full((5,), -7, "int32"),
    "full 2**40 int64": keras.ops.full((2,), 2**40, "int64"),
    "full 255 uint8": keras.ops.full((2, 2), 255, "uint8"),
    "full True bool": keras.ops.full((3,), True, "bool"),
    "full 1e-45 float32": keras.ops.full((2,), 1e-45, "float32"),
    "zeros plus one": keras.ops.add(keras.ops.zeros((2,)), 1.0),
    "a row broadcast": keras.ops.broadcast_to(keras.ops.convert_to_tensor([[1.0, 2.0]]), (3, 2)),
}
out = {}
for name, tensor in cases.items():
    before = len(compiles)
    known = one_value_fill(tensor)
    tool_compiles = len(compiles) - before
    raw, raw_compiles = counted(keras.ops.convert_to_numpy, tensor)
    out[name] = {
        "known": known,
        "one_value": bool(raw.size and (raw == raw.flat[0]).all()),
        "raw": raw.tolist(),
        "tool_compiles": tool_compiles,
        "raw_compiles": raw_compiles,
    }
before = len(compiles)
result = run_probe(make_spec("Dense", "float32", backend="openvino", kwargs={"units": 4}))
out["probe"] = {
    "compiles": len(compiles) - before,
    "head": list(result.numerics.outputs[0].head),
}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def read() -> dict:
    return json_on("openvino", SCRIPT)


FILLS = [
    "zeros float32",
    "ones float16",
    "full 0.1 float32",
    "full 1/3 float64",
    "full -7 int32",
    "full 2**40 int64",
    "full 255 uint8",
    "full True bool",
    "full 1e-45 float32",
]


@pytest.mark.parametrize("case", FILLS)
def test_a_constant_fill_is_known_as_one_value_without_compiling(read, case):
    """Raw Keras compiles to read it, and reads back one value (OpenVINO's CPU plugin may
    change that value: the float32 subnormal reads 0.0, the int64 2**40 int32's largest)."""
    answer = read[case]
    assert answer["known"] and answer["tool_compiles"] == 0, answer
    assert answer["one_value"] and answer["raw_compiles"] == 1, answer


@pytest.mark.parametrize("case", ["zeros plus one", "a row broadcast"])
def test_a_computed_or_varying_tensor_is_not_known(read, case):
    answer = read[case]
    assert not answer["known"] and answer["tool_compiles"] == 0, answer


def test_a_dense_probe_compiles_once_and_answers_the_numpy_backends_numbers(read):
    """The probe seeds the kernel on every backend and keeps the zero bias it reads: one
    compile is left, the output's; the numbers are the ones the numpy backend computes."""
    assert read["probe"]["compiles"] == 1
    numpy = dx.probe("Dense", "float32", backend="numpy", kwargs={"units": 4}, use_cache=False)
    expected = numpy.numerics.outputs[0].head
    assert len(expected) == len(read["probe"]["head"]) > 0
    for got, want in zip(read["probe"]["head"], expected, strict=True):
        assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-6), (got, want)
