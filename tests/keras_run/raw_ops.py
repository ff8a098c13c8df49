"""Bare Keras: one representative op of each class, called by hand on backend tensors.

``KERAS_BACKEND=jax python tests/keras_run/raw_ops.py`` prints one JSON line: case -> the output
dtype (or ``"python_int"``, or ``"raises <Type>"``). Nothing of dtype_explorer is imported: this
is the floor the probes are checked against (``test_ops_backends.py``).
"""

from __future__ import annotations

import json
import warnings

import numpy as np


def _cases():
    import keras
    from keras import ops

    def t(values, dtype):
        return ops.convert_to_tensor(np.asarray(values), dtype=dtype)

    grid = np.array([[-1.5, 0.5, 2.0], [1.0, -0.25, 0.75]])
    positive = np.abs(grid) + 0.5
    square = np.array([[4.0, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 1.0, 4.0]])
    image = np.linspace(0, 1, 8 * 8 * 3).reshape(1, 8, 8, 3)
    return {
        "binary ops.add(int8, float16)": lambda: ops.add(t(grid, "int8"), t(grid, "float16")),
        "binary ops.add(int32, python_float)": lambda: ops.add(t(grid, "int32"), 2.0),
        "float ops.sqrt(int32)": lambda: ops.sqrt(t(positive, "int32")),
        "reduction ops.sum(int8)": lambda: ops.sum(t(grid, "int8")),
        "index ops.argmax(float16)": lambda: ops.argmax(t(grid, "float16"), axis=-1),
        "creation ops.zeros(dtype=int8)": lambda: ops.zeros((2, 3), dtype="int8"),
        "nn ops.gelu(bfloat16)": lambda: ops.gelu(t(grid, "bfloat16")),
        "image ops.image.resize(uint8)": lambda: ops.image.resize(t(image * 255, "uint8"), (4, 4)),
        "linalg ops.linalg.inv(float32)": lambda: ops.linalg.inv(t(square, "float32")),
        "python ops.size(float32)": lambda: ops.size(t(grid, "float32")),
        "bfloat16 ops.sqrt(int32)": ("bfloat16", lambda: ops.sqrt(t(positive, "int32"))),
        "bfloat16 ops.add(int32, int32)": (
            "bfloat16",
            lambda: ops.add(t(grid, "int32"), t(grid, "int32")),
        ),
        "bfloat16 numpy ops.add(int32, int32)": (
            "bfloat16",
            lambda: ops.add(grid.astype("int32"), grid.astype("int32")),
        ),
    }, keras


def _dtype(out, keras) -> str:
    first = keras.tree.flatten(out)[0]
    if isinstance(first, (bool, int, float)):
        return f"python_{type(first).__name__}"
    return keras.backend.standardize_dtype(first.dtype)


def main() -> None:
    cases, keras = _cases()
    report = {}
    for name, case in cases.items():
        floatx, fn = case if isinstance(case, tuple) else ("float32", case)
        keras.config.set_floatx(floatx)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                report[name] = _dtype(fn(), keras)
        except Exception as error:
            report[name] = f"raises {type(error).__name__}"
        finally:
            keras.config.set_floatx("float32")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
