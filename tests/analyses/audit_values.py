"""Run by test_audit_values.py in a fresh process of one backend (KERAS_BACKEND): the audit of
three small models whose dtypes are right and whose numbers (or rules) are not. Prints the
findings as JSON on its last line."""

from __future__ import annotations

import json

import keras
import numpy as np

import dtype_explorer as dx


def findings(model, sample=None) -> list[dict]:
    report = dx.check_model(model, sample)
    return [
        {
            "kind": f.kind,
            "message": f.message,
            "details": f.details,
            "fix": f.fix,
            "proof": None if f.proof is None else f.proof.to_dict(),
        }
        for f in report.findings
    ]


def raw(outputs) -> dict:
    """Raw Keras's answer: the dtype and the numbers."""
    return {
        "dtype": keras.backend.standardize_dtype(outputs.dtype),
        "values": np.asarray(keras.ops.convert_to_numpy(outputs), "float64").ravel().tolist(),
    }


def main() -> None:
    found = {}
    pixels = keras.Input((3,), dtype="uint8")
    more = keras.Input((3,), dtype="uint8")
    added = keras.Model([pixels, more], keras.layers.Add()([pixels, more]))
    a, b = np.array([[200, 1, 2]], dtype="uint8"), np.array([[100, 1, 2]], dtype="uint8")
    found["add_uint8"] = findings(added, [a, b])
    # raw Keras with the proven fix written as the user would: each input cast before Add
    cast = [keras.ops.cast(x, "int32") for x in (a, b)]
    found["raw_add_int32"] = raw(keras.layers.Add()(cast))

    ints = keras.Input((4,), dtype="int32")
    normed = keras.Model(ints, keras.layers.LayerNormalization()(ints))
    found["layernorm_int32"] = findings(normed, np.array([[1, 5, 9, 2]], dtype="int32"))
    floats = keras.ops.cast(np.array([[1, 5, 9, 2]], dtype="int32"), "float32")
    found["raw_layernorm_float32"] = raw(keras.layers.LayerNormalization()(floats))

    keras.config.set_dtype_policy("float64")
    try:
        wide = keras.Input((3,), dtype="float64")
        dense = keras.Model(wide, keras.layers.Dense(2)(wide))
    finally:
        keras.config.set_dtype_policy("float32")
    found["dense_float64"] = findings(dense)
    print(json.dumps(found))


if __name__ == "__main__":
    main()
