"""tf.keras models audited in modes ``predict`` and ``fit`` in the Keras 2 engine's process
(as the Keras 2 kernel runs them), beside what plain tf_keras says on the same code:
``model.predict``'s output dtype, and for fit ``compile``'s optimizer, the loss scale before
and after one ``train_on_batch`` and the gradients' dtypes (``tf.GradientTape``). Run by
``test_audit_keras2_modes``; it prints one JSON line."""

import json

import numpy as np
import tensorflow as tf

import dtype_explorer as dx

SAMPLE = np.full((2, 3), 10.0, "float32")


def build(name, head_dtype, scale):
    """Under mixed_float16: x -> Dense(4) -> Dense(1) (the head float16 or float32)."""
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    init = tf.keras.initializers.Constant(scale)
    inputs = tf.keras.Input((3,), name="x")
    hidden = tf.keras.layers.Dense(4, name="d1", kernel_initializer=init)(inputs)
    head = tf.keras.layers.Dense(1, name="head", dtype=head_dtype, kernel_initializer=init)
    model = tf.keras.Model(inputs, head(hidden), name=name)
    tf.keras.mixed_precision.set_global_policy("float32")
    return model


def raw_fit(model):
    """Plain tf_keras: the model compiled, one train_on_batch, the gradients through a
    GradientTape (run after the audits)."""
    copy = model
    copy.compile(optimizer=tf.keras.optimizers.SGD(), loss="mean_squared_error")
    optimizer = copy.optimizer
    scaled = isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    with tf.GradientTape() as tape:
        loss = tf.keras.losses.mean_squared_error(np.zeros((2, 1), "float32"), copy(SAMPLE))
    grads = tape.gradient(loss, copy.trainable_variables)
    before = float(optimizer.loss_scale) if scaled else None
    copy.train_on_batch(SAMPLE, np.zeros((2, 1), "float32"))
    return {
        "optimizer": type(optimizer).__name__,
        "loss_scaling": scaled,
        "loss_scale": [before, float(optimizer.loss_scale) if scaled else None],
        "gradients": [
            [v.name.removesuffix(":0"), g.dtype.name]
            for g, v in zip(grads, copy.trainable_variables)
        ],
    }


def audited(report):
    fit = report.fit
    return {
        "mode": report.mode,
        "execution": report.execution,
        "layers": [
            [c.path, [t.dtype for t in c.received], [t.dtype for t in c.outputs]]
            for c in report.layers
        ],
        "findings": [[f.kind, f.severity, f.path, f.fix] for f in report.findings],
        "predict": None if report.predict is None else [t.dtype for t in report.predict.outputs],
        "fit": None
        if fit is None
        else {
            "optimizer": fit.optimizer,
            "loss_scaling": fit.loss_scaling,
            "loss_scale": [fit.loss_scale, fit.loss_scale_after],
            "gradients": [[g.name, g.dtype, g.variable_dtype, g.nonfinite] for g in fit.gradients],
        },
    }


out = {}
for name, head, scale in [("f16head", None, 0.1), ("overflow", "float32", 10.0)]:
    model = build(name, head, scale)
    weights = [w.copy() for w in model.get_weights()]
    out[name] = {
        "predict": audited(dx.check_model(model, SAMPLE, mode="predict")),
        "fit": audited(dx.check_model(model, SAMPLE, mode="fit")),
        "untouched": all(np.array_equal(a, b) for a, b in zip(weights, model.get_weights()))
        and model.optimizer is None,
    }
    out[name]["raw_predict"] = model.predict(SAMPLE, verbose=0).dtype.name
    out[name]["raw_fit"] = raw_fit(model)
print("DX-OUT " + json.dumps(out))
