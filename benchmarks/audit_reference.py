"""The per-layer float32 reference of ``check_model`` (issue 38) against a bare predict.

A ResNet50-sized model (``keras.applications.ResNet50(weights=None)``, 25.6 M parameters,
input 2x96x96x3) under ``mixed_float16``: the bare eager call, the reference alone
(``keras_run.layer_damage``: the model and its float32 clone, each run once untraced, every
leaf output compared) and the whole audit, each the median of ``--repeats`` after a warm-up,
in one process (tensorflow by default; ``KERAS_BACKEND`` chooses). Ratios are to the bare
call of the same run: the goal is the reference at most 3x (it is two forward passes and the
comparisons), the audit reported beside it.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/audit_reference.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", type=int, default=96)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras

    import dtype_explorer as dx
    from dtype_explorer.keras_run import layer_damage

    keras.config.set_dtype_policy("mixed_float16")
    model = keras.applications.ResNet50(weights=None, input_shape=(args.size, args.size, 3))
    keras.config.set_dtype_policy("float32")
    x = np.random.default_rng(0).uniform(0, 1, (2, args.size, args.size, 3)).astype("float32")
    works = {
        "bare": lambda: model(x, training=False),
        "reference": lambda: layer_damage(model, x, {"training": False}),
        "audit": lambda: dx.check_model(model, x),
    }
    times: dict[str, list[float]] = {name: [] for name in works}
    for work in works.values():
        work()  # warm-up
    for _ in range(args.repeats):
        for name, work in works.items():
            t0 = time.perf_counter()
            work()
            times[name].append((time.perf_counter() - t0) * 1000)
    med = {name: float(np.median(t)) for name, t in times.items()}
    print(
        f"{keras.backend.backend()}, load average {os.getloadavg()[0]:.1f}, wall time, "
        f"median of {args.repeats}, input 2x{args.size}x{args.size}x3"
    )
    print("| work | ms | ratio to bare |\n|---|---:|---:|")
    for name, ms in med.items():
        print(f"| {name} | {ms:.0f} | {ms / med['bare']:.2f}x |")


if __name__ == "__main__":
    main()
