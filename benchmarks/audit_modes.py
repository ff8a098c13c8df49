"""The cost of each audit mode (``check_model(..., mode=)``) against the bare Keras work it
stands for, measured in the same run.

    python benchmarks/audit_modes.py                      # jax, a table
    python benchmarks/audit_modes.py --backend tensorflow --repeats 5 --json

The model is ``Dense(64) -> Dropout(0.5) -> Dense(10, softmax)`` on a (32, 128) float32 sample
under ``mixed_float16``, compiled with SGD and sparse categorical crossentropy (loss scaling).
Each mode's bare work is what a user would run:

* call: ``model(x)``;
* training: ``model(x, training=True)``;
* predict: ``model.predict(x)`` with its ``predict_function`` made afresh (the audit makes
  one, traced with its recorders, each time);
* fit: a copy of the model (``clone_model``, weights copied), compiled from the model's
  compile config, one ``model.fit`` step (the audit trains a copy, never the model);
* quantize (``check_model(..., quantize="int8")``): a float32 twin of the model (int8 refuses
  float16), copied (``clone_model``, weights copied: quantizing is in place, and the audit
  quantizes a copy), ``copy.quantize("int8")`` and a call;
* save (``mode="save"``): ``model.save`` to a ``.keras`` file, ``keras.saving.load_model`` and a
  call of the loaded model (the audit also compares every layer, and tries the other formats
  the installed release has).

Bare and audit alternate after a warm-up; medians of process time (``--clock cpu``, the
default) or wall time.
"""

from __future__ import annotations

import os
import tempfile

import _harness as harness  # benchmarks/, beside this script

MODES = ("call", "training", "predict", "fit", "quantize", "save")
SHAPE = (32, 128)


def measure_here(repeats: int, clock: str) -> list[dict]:
    import keras
    import numpy as np

    from dtype_explorer import check_model

    backend = keras.backend.backend()
    x = np.random.default_rng(0).uniform(-3, 3, SHAPE).astype("float32")
    y = np.zeros(SHAPE[:1], "int32")
    now = harness.clock(clock)
    keras.config.set_dtype_policy("mixed_float16")
    inputs = keras.Input(SHAPE[1:])
    h = keras.layers.Dense(64)(inputs)
    h = keras.layers.Dropout(0.5)(h)
    outputs = keras.layers.Dense(10, activation="softmax", dtype="float32")(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    keras.config.set_dtype_policy("float32")

    def predict() -> None:
        model.predict_function = None
        model.predict(x, batch_size=SHAPE[0], verbose=0)

    def fit() -> None:
        keras.config.set_dtype_policy("mixed_float16")
        copy = keras.models.clone_model(model)
        keras.config.set_dtype_policy("float32")
        copy.set_weights(model.get_weights())
        copy.compile_from_config(model.get_compile_config())
        copy.fit(x, y, batch_size=SHAPE[0], epochs=1, verbose=0)

    plain = keras.Sequential([keras.Input(SHAPE[1:]), keras.layers.Dense(64)])
    plain.add(keras.layers.Dense(10, activation="softmax"))

    def quantize() -> None:
        copy = keras.models.clone_model(plain)
        copy.set_weights(plain.get_weights())
        copy.quantize("int8")
        copy(x)

    where = os.path.join(tempfile.mkdtemp(prefix="dx-bench-save-"), "model.keras")

    def save() -> None:
        model.save(where)
        keras.saving.load_model(where)(x)

    bare = {
        "call": lambda: model(x),
        "training": lambda: model(x, training=True),
        "predict": predict,
        "fit": fit,
        "quantize": quantize,
        "save": save,
    }
    rows = []
    for mode in MODES:
        if mode == "fit" and backend == "numpy":
            continue

        def audited(mode=mode) -> None:
            if mode == "quantize":
                check_model(plain, x, quantize="int8")
            else:
                check_model(model, x, mode=mode)

        found = harness.medians({"bare": bare[mode], "audit": audited}, repeats, now)
        b, m = found["bare"], found["audit"]
        rows.append({"backend": backend, "mode": mode, "bare_ms": b, "audit_ms": m, "ratio": m / b})
    return rows


if __name__ == "__main__":
    harness.main(__file__, __doc__.splitlines()[0], measure_here, "audit")
