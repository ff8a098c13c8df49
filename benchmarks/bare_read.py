"""What reading a bare call's output costs, per backend: the bare calls every headline figure
divides by read their output as NumPy (``_harness.computed``), as a user's script does and as
the tool reads what it measures. On openvino the unread call computes nothing (a graph node
until ``convert_to_numpy`` compiles and infers it); on jax it may not have finished.

    python benchmarks/bare_read.py                        # five backends, a table
    python benchmarks/bare_read.py --backends jax --resnet --json

Median ms of ``--repeats`` calls after a warm-up, unread and read alternating
(``_harness.medians``): ``Dense(16)`` on (8, 32) float32, ``Embedding(50, 8)`` on (4, 10)
int32, ``audit_policy.py``'s 3-Dense model on (32, 128), and with ``--resnet`` a ResNet50 under
``mixed_float16`` on 2x96x96x3 (7 calls).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import _harness as harness  # benchmarks/, beside this script

BACKENDS = ("jax", "numpy", "torch", "tensorflow", "openvino")


def measure_here(repeats: int, resnet: bool) -> dict:
    """Unread and read medians of each work on this process's backend."""
    import keras
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, (8, 32)).astype("float32")
    ids = rng.integers(0, 50, (4, 10)).astype("int32")
    inputs = keras.Input((128,))
    h = keras.layers.Dense(64, activation="relu")(inputs)
    h = keras.layers.Dense(64, activation="relu")(h)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(h))
    x2 = rng.uniform(-3, 3, (32, 128)).astype("float32")
    works: dict[str, Callable[[], Any]] = {
        "Dense": lambda: keras.layers.Dense(16)(x),
        "Embedding": lambda: keras.layers.Embedding(50, 8)(ids),
        "3-Dense model": lambda: model(x2),
    }
    counts = dict.fromkeys(works, repeats)
    if resnet:
        keras.config.set_dtype_policy("mixed_float16")
        net = keras.applications.ResNet50(weights=None, input_shape=(96, 96, 3))
        keras.config.set_dtype_policy("float32")
        x3 = rng.uniform(0, 255, (2, 96, 96, 3)).astype("float32")
        works["ResNet50"] = lambda: net(x3)
        counts["ResNet50"] = 7
    row: dict[str, Any] = {"backend": keras.backend.backend()}
    for name, work in works.items():  # unread and read, alternating
        pair = {"unread": work, "read": lambda work=work: harness.computed(work())}
        ms = harness.medians(pair, counts[name], time.perf_counter)
        row[name] = [round(ms["unread"], 2), round(ms["read"], 2)]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--resnet", action="store_true", help="ResNet50 too (slow)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.here:
        print(json.dumps(measure_here(args.repeats, args.resnet)))
        return
    extra = ["--resnet"] if args.resnet else []
    rows = [
        harness.in_backend(__file__, backend, "--repeats", str(args.repeats), *extra)
        for backend in args.backends.split(",")
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    names = [k for k in rows[0] if k != "backend"]
    print("| backend | " + " | ".join(f"{n} (ms, unread / read)" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for row in rows:
        cells = [f"{row[n][0]:.2f} / {row[n][1]:.2f}" if n in row else "" for n in names]
        print(f"| {row['backend']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
