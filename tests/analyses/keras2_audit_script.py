"""tf.keras code as its users wrote it, audited in the Keras 2 engine's process (run by
``test_audit_keras2`` as ``dtype-explorer run --engine tf_keras`` does): float64 into a
functional model, uint8 pixels into Flatten -> BatchNormalization, a custom layer casting
against mixed_float16, and a float32-only SavedModel as ``hub.KerasLayer`` under
mixed_float16 through ``%dtype_check``. It prints one JSON line."""

import json
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
from IPython.core.interactiveshell import InteractiveShell

import dtype_explorer as dx

out = {}


def summary(report):
    return {
        "keras": report.keras,
        "layers": [
            [
                c.path,
                c.layer_class,
                [t.dtype for t in c.given or ()],
                [t.dtype for t in c.received],
                [t.dtype for t in c.outputs],
                {n: [v.stored, v.read] for n, v in c.variables.items()},
                c.error and c.error.message,
                c.retried,
            ]
            for c in report.layers
        ],
        "findings": [
            [f.kind, f.severity, f.path, f.message, f.fix, f.proof and f.proof.summary()]
            for f in report.findings
        ],
        "notes": list(report.notes),
    }


# 1. float64 data into a functional model
inputs = tf.keras.Input((3,), dtype="float64", name="x")
model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, name="dense")(inputs), name="m")
out["float64"] = summary(dx.check_model(model, np.ones((2, 3))))
tf.keras.backend.set_floatx("float64")  # the audit left the global policy unset: it follows
out["floatx_follows"] = tf.keras.layers.Dense(2).dtype_policy.name
tf.keras.backend.set_floatx("float32")

# 2. uint8 pixels into Flatten -> BatchNormalization
inputs = tf.keras.Input((28, 28), dtype="uint8", name="pixels")
x = tf.keras.layers.Flatten(name="flatten")(inputs)
x = tf.keras.layers.BatchNormalization(name="bn")(x)
model = tf.keras.Model(inputs, tf.keras.layers.Dense(10, name="head")(x), name="mnist")
before = [v.numpy().copy() for v in model.variables]
out["uint8"] = summary(dx.check_model(model, np.full((2, 28, 28), 200, "uint8"), mode="training"))
out["training_kept_variables"] = all(
    np.array_equal(b, v.numpy()) for b, v in zip(before, model.variables)
)  # BatchNormalization's moving statistics put back after the training=True call


# 3. a custom layer under mixed_float16 that casts against its policy
class Scale(tf.keras.layers.Layer):
    def build(self, shape):
        self.w = self.add_weight(name="w", shape=(shape[-1],), initializer="ones")

    def call(self, x):
        return tf.cast(x * self.w, "float32")


tf.keras.mixed_precision.set_global_policy("mixed_float16")
inputs = tf.keras.Input((3,), name="x")
x = Scale(name="scale")(tf.keras.layers.Dense(3, name="dense")(inputs))
model = tf.keras.Model(inputs, x, name="c")
out["custom"] = summary(dx.check_model(model, np.ones((2, 3), "float32")))


# 4. a SavedModel taking only float32, as hub.KerasLayer, under mixed_float16, by the magic
class Doubler(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def __call__(self, x):
        return x * 2.0


saved = tempfile.mkdtemp()
tf.saved_model.save(Doubler(), saved)


def hub_model():
    return tf.keras.Sequential(
        [
            tf.keras.layers.Dense(4, name="dense"),
            hub.KerasLayer(saved, name="hub"),
            tf.keras.layers.Dense(2, name="head"),
        ],
        name="seq",
    )


x = np.ones((2, 4), "float32")
try:
    hub_model()(x)
except Exception as error:  # what the user meets
    out["user_error"] = [type(error).__name__, str(error)]
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "dtype_explorer")
shell.user_ns.update(seq=hub_model(), x=x)
out["hub"] = summary(shell.run_line_magic("dtype_check", "seq --sample x"))
out["policy_after"] = tf.keras.mixed_precision.global_policy().name
try:
    dx.check_model(shell.user_ns["seq"], x, policy="float32")
except dx.InvalidSpecError as error:
    out["refused"] = str(error)
tf.keras.mixed_precision.set_global_policy("float32")
print("DX-OUT " + json.dumps(out))
