"""A TFSMLayer that takes float32 only, in a mixed_float16 model: the audit's fix (the layer in
float32) proven on a copy, and the same fix made by hand in raw Keras; prints one JSON line."""

import json
import tempfile

import keras
import numpy as np
import tensorflow as tf

import dtype_explorer as dx


class Pretrained(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(tf.reshape(tf.linspace(-1.0, 1.0, 36), (12, 3)))

    @tf.function(input_signature=[tf.TensorSpec([None, 12], tf.float32)])
    def serve(self, x):
        return {"features": tf.matmul(x, self.w)}


saved = tempfile.mkdtemp(prefix="pretrained-")
module = Pretrained()
tf.saved_model.save(module, saved, signatures={"serving_default": module.serve})


def model(dtype=None):
    inputs = keras.Input((12,))
    x = keras.layers.Dense(12, name="adapter", dtype="mixed_float16")(inputs)
    layer = keras.layers.TFSMLayer(
        saved, call_endpoint="serving_default", name="pretrained", dtype=dtype or "mixed_float16"
    )
    return keras.Model(inputs, layer(x)["features"], name="transfer")


def raw(dtype=None):
    try:
        return keras.backend.standardize_dtype(model(dtype)(np.ones((2, 12), "float32")).dtype)
    except Exception as error:
        return f"raised {type(error).__name__}"


report = dx.check_model(model(), np.ones((2, 12), "float32"))
[finding] = report.by_kind("float32-only-layer")
proof = finding.proof
print(
    json.dumps(
        {
            "raw_as_built": raw(),
            "raw_fixed": raw("float32"),
            "proven": proof.proven,
            "layers": list(proof.layers),
            "fix": finding.fix,
            "after": proof.after.finding if proof.after else None,
        }
    )
)
