"""``dx.trace`` overhead on the user's own code: the same code traced and untraced in the same
run, one after the other after a warm-up, the ratio the median of each pair's
(``_harness.paired``), in a fresh process per backend.

Two cases (issue 37's): a small model's forward pass (a built Sequential of three Dense layers
on a (32, 64) float32 batch) and a 100-step loop of ops on a (128, 128) float32 tensor
(``x = ops.tanh(ops.matmul(x, w) * 0.5)``: three ops a step, 300 steps, the trace's limit).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/trace_code.py --backend jax --repeats 7
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness


def cases() -> dict[str, Callable[[], Any]]:
    """The two pieces of user code measured (``trace_phases.py`` takes them apart too): a
    built 3-Dense Sequential's forward pass on (32, 64), and a 100-step ops loop on (128, 128)."""
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((64,)), *(keras.layers.Dense(64) for _ in range(2)), keras.layers.Dense(1)]
    )
    batch = np.random.default_rng(0).normal(size=(32, 64)).astype("float32")
    x0 = keras.ops.convert_to_tensor(np.eye(128, dtype="float32"))
    w = keras.ops.convert_to_tensor(np.full((128, 128), 0.01, "float32"))

    def forward() -> Any:
        return model(batch)

    def loop() -> Any:
        x = x0
        for _ in range(100):
            x = keras.ops.tanh(keras.ops.matmul(x, w) * 0.5)
        return keras.ops.convert_to_numpy(x)

    return {"forward": forward, "100-step ops loop": loop}


def measure_here(repeats: int, clock_name: str) -> list[dict]:
    import keras

    import dtype_explorer as dx

    rows = []
    for mode, work in cases().items():
        times = _harness.paired(
            work, lambda w=work: dx.trace(w), repeats, _harness.clock(clock_name)
        )
        steps = len(dx.trace(work).steps)
        rows.append(
            _harness.paired_row(keras.backend.backend(), f"{mode} ({steps} steps)", times, "traced")
        )
    return rows


if __name__ == "__main__":
    _harness.main(__file__, __doc__.splitlines()[0], measure_here, "traced")
