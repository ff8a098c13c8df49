"""The cost of each probe mode against the same bare Keras work, measured in the same run.

    python benchmarks/modes.py                       # jax, a table
    python benchmarks/modes.py --backend tensorflow --repeats 5 --json

The case is ``Dense(16)`` on a (8, 32) float32 sample under ``mixed_float16`` (loss scaling in
"fit"). Each mode's bare work is what a user would write:

* call: construct and call the layer;
* training: construct ``Dropout(0.5, seed=0)`` and call it with ``training=True`` (Dense's
  call takes no ``training``; the probe refuses that mode for it);
* model: construct the layer, build a functional model around it, call the model;
* predict: the same, then ``model.predict`` (a fresh model, so compiled anew each time);
* fit: the same, ``compile`` with SGD and MSE, one ``model.fit`` step (compiled on jax and
  tensorflow, as the probe's).

The probe runs without the op trace (``trace=False``), so the ratio is the cost of the mode's
observation, not of the trace (``benchmarks/probe.py`` measures that). Bare and probe alternate
after a warm-up; medians of process time (``--clock cpu``, the default) or wall time.
"""

from __future__ import annotations

import _harness as harness  # benchmarks/, beside this script

MODES = ("call", "training", "model", "predict", "fit")
UNITS, SHAPE, POLICY = 16, (8, 32), "mixed_float16"


def measure_here(repeats: int, clock: str) -> list[dict]:
    import keras
    import numpy as np

    from dtype_explorer.keras_run import run_probe
    from dtype_explorer.records import ProbeSpec

    backend = keras.backend.backend()
    x = np.random.default_rng(0).uniform(-3, 3, SHAPE).astype("float32")
    now = harness.clock(clock)

    def model() -> object:
        inputs = keras.Input(shape=SHAPE[1:], batch_size=SHAPE[0])
        return keras.Model(inputs, keras.layers.Dense(UNITS)(inputs))

    def fit() -> None:
        m = model()
        m.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
        m.fit(x, np.zeros((SHAPE[0], UNITS), "float32"), batch_size=SHAPE[0], verbose=0)

    bare = {
        "call": lambda: keras.layers.Dense(UNITS)(x),
        "training": lambda: keras.layers.Dropout(0.5, seed=0)(x, training=True),
        "model": lambda: model()(x),
        "predict": lambda: model().predict(x, batch_size=SHAPE[0], verbose=0),
        "fit": fit,
    }
    rows = []
    for mode in MODES:
        if mode == "fit" and backend == "numpy":
            continue
        dropout = mode == "training"
        spec = ProbeSpec(
            target="Dropout" if dropout else "Dense",
            backend=backend,
            policy=POLICY,
            kwargs={"rate": 0.5} if dropout else {"units": UNITS},
            shapes=(SHAPE,),
            mode=mode,
        )

        def probed(spec=spec) -> None:
            result = run_probe(spec, trace=False)
            assert result.status == "ok", result.error

        def bare_work(mode=mode) -> None:
            keras.config.set_dtype_policy(POLICY)
            try:
                bare[mode]()
            finally:
                keras.config.set_dtype_policy("float32")

        found = harness.medians({"bare": bare_work, "probe": probed}, repeats, now)
        b, m = found["bare"], found["probe"]
        rows.append({"backend": backend, "mode": mode, "bare_ms": b, "probe_ms": m, "ratio": m / b})
    return rows


if __name__ == "__main__":
    harness.main(__file__, __doc__.splitlines()[0], measure_here, "probe")
