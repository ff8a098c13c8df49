"""The per-layer float32 reference of ``check_model`` (issue 38) against a bare predict.

A ResNet50-sized model (``keras.applications.ResNet50(weights=None)``, 25.6 M parameters,
input 2x96x96x3) under ``mixed_float16``: the bare eager call, the reference alone
(``keras_run.layer_damage`` run standalone: the model and its float32 clone each run once,
every leaf output compared) and the whole audit, whose own phases (the traced pass, the
reference, which reuses the traced pass's leaf outputs and runs only the float32 clone, and
the fixes) are read from ``AuditReport.timings``. Each repeat runs the three in turn, after a
warm-up, in one process (tensorflow by default; ``KERAS_BACKEND`` chooses); each ratio is to
the bare call of the same repeat, and the min and median over the repeats are printed, with
the load average before and after (a shared machine: the ratios, not the milliseconds, are
the result). The goal: the audit with its reference at most 3x a bare call.

    PYTHONPATH=$PWD nice .venv/bin/python benchmarks/audit_reference.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import time

import _harness as harness  # benchmarks/, beside this script
import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=96)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras

    import dtype_explorer as dx
    from dtype_explorer.keras_run import layer_damage

    load_before = os.getloadavg()
    keras.config.set_dtype_policy("mixed_float16")
    model = keras.applications.ResNet50(weights=None, input_shape=(args.size, args.size, 3))
    keras.config.set_dtype_policy("float32")
    x = np.random.default_rng(0).uniform(0, 1, (2, args.size, args.size, 3)).astype("float32")
    phases: dict[str, list[float]] = {}

    def audit() -> None:
        report = dx.check_model(model, x)
        assert report.damage, "the audit ran no per-layer reference"
        for name in ("forward_ms", "reference_ms", "fixes_ms"):
            phases.setdefault(name, []).append(report.timings.get(name, 0.0))

    works = {
        "bare": lambda: harness.computed(model(x, training=False)),
        "reference": lambda: layer_damage(model, x, {"training": False}),
        "audit": audit,
    }
    for work in works.values():
        work()  # warm-up
    phases.clear()
    times: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(args.repeats):
        for name, work in works.items():
            t0 = time.perf_counter()
            work()
            times[name].append((time.perf_counter() - t0) * 1000)
    bare = np.array(times["bare"])
    rows = {name: np.array(t) for name, t in times.items()}
    rows.update({f"audit: {name}": np.array(t) for name, t in phases.items()})
    load_after = os.getloadavg()
    print(
        f"{keras.backend.backend()}, Keras {keras.__version__}, wall time, {args.repeats} "
        f"repeats, input 2x{args.size}x{args.size}x3, load average (1 min) "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    print("| work | median ms | ratio to bare: min | median |\n|---|---:|---:|---:|")
    for name, ms in rows.items():
        ratios = ms / bare
        print(f"| {name} | {np.median(ms):.0f} | {ratios.min():.2f}x | {np.median(ratios):.2f}x |")


if __name__ == "__main__":
    main()
