"""The models of ``test_audit_tf_keras_engine`` written in tf.keras, run as a plain script in
the Keras 2 engine's environment: each layer called eagerly by tf_keras itself (the dtypes it
is given, its outputs' and its variables'), and ``dx.check_model`` on the tf.keras model, as a
tf.keras user gets it in the Keras 2 kernel. With a path argument, it also rebuilds the Keras 3
configs written there (``keras_run.rebuild_in_keras2``) and predicts with them. It prints one
JSON line."""

import json
import sys

import numpy as np
import tensorflow as tf

import dtype_explorer as dx
from dtype_explorer.keras_run import keras2_state_kept, rebuild_in_keras2

out = {}


def raw(model, sample):
    """Each layer of a chain called eagerly by tf_keras: given, output and variable dtypes."""
    x, rows = tf.constant(sample), []
    for layer in model.layers[1:]:
        y = layer(x)
        variables = {
            v.name.split(":")[0].split("/")[-1]: v.true_dtype.name
            if hasattr(v, "true_dtype")
            else v.dtype.name
            for v in layer.weights
        }
        rows.append([layer.name, x.dtype.name, y.dtype.name, variables])
        x = y
    return {"layers": rows, "output": model(sample).dtype.name}


def audit(model, sample):
    report = dx.check_model(model, sample)
    return {
        "layers": [
            [
                c.path,
                [t.dtype for t in c.given or ()],
                [t.dtype for t in c.received],
                [t.dtype for t in c.outputs],
                {n: v.stored for n, v in c.variables.items()},
            ]
            for c in report.layers
        ],
        "findings": [[f.kind, f.path, f.fix] for f in report.findings],
        "policy": report.policy,
    }


# 1. float64 data into a functional model
inputs = tf.keras.Input((3,), dtype="float64", name="x")
model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, name="dense")(inputs), name="m")
sample = np.ones((2, 3))
out["float64"] = {"raw": raw(model, sample), "audit": audit(model, sample)}

# 2. a mixed_float16 model whose head is float16 too (not kept in float32)
tf.keras.mixed_precision.set_global_policy("mixed_float16")
inputs = tf.keras.Input((3,), name="x")
hidden = tf.keras.layers.Dense(4, name="d1")(inputs)
model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, name="head")(hidden), name="mixed")
tf.keras.mixed_precision.set_global_policy("float32")
sample = np.ones((2, 3), "float32")
out["mixed"] = {"raw": raw(model, sample), "audit": audit(model, sample)}

# 3. The Keras 3 configs given, rebuilt with tf_keras and run on their samples
if len(sys.argv) > 1:
    with open(sys.argv[1]) as f:
        given = json.load(f)
    out["rebuilt"] = {}
    for name, item in given.items():
        with keras2_state_kept():
            rebuilt, _ = rebuild_in_keras2(item["config"], item["weights"], *item["policies"])
        y = rebuilt(np.asarray(item["sample"], item["dtype"]))
        out["rebuilt"][name] = {"dtype": y.dtype.name, "values": np.asarray(y, "float64").tolist()}
print("DX-OUT " + json.dumps(out))
