"""Median in-process probe time (with and without the op trace) against a bare
construct-and-call of the same layer.

    python benchmarks/probe.py                  # every installed backend, a table
    python benchmarks/probe.py --repeats 30 --json

Each backend runs in its own subprocess (Keras fixes its backend at import); inside it, the
bare call and the probe are measured alternately on the same sample, after a warm-up.
Goals: probe without the trace <= 3x bare (issue 2); probe with the op trace (the default)
<= 2x bare (issue 11). ``ScaleShift`` is a custom layer written with Python operators
(``x * self.scale + self.shift``, ``y[:, :8]``, ...): its trace records them (issue 22), through
a ``TorchFunctionMode`` on torch and the tensor classes' operators on jax and tensorflow;
``--layers ScaleShift`` runs it alone.

``--instances`` measures instead the probe of a user's *instance* (issue 22): a built,
trained Dense probed as it is, the ``.keras`` archive round trip a worker makes (written in
memory, loaded under safe mode) included, against the probe of the same layer by name and
against a bare call of the instance, on each backend.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _harness import clock as harness_clock
from _harness import medians

CASES = {
    "Dense": ({"units": 16}, ((8, 32),)),
    "Conv2D": ({"filters": 8, "kernel_size": 3}, ((4, 16, 16, 3),)),
    "LSTM": ({"units": 8}, ((4, 10, 8),)),
    "MultiHeadAttention": ({"num_heads": 2, "key_dim": 4}, ((2, 6, 8), (2, 6, 8))),
    "ScaleShift": ({}, ((8, 32),)),
}


def scale_shift() -> type:
    """A custom layer written with Python operators (seven per call), as users write them."""
    import keras

    class ScaleShift(keras.layers.Layer):
        def build(self, shape):
            self.scale = self.add_weight(shape=(shape[-1],), initializer="ones", name="scale")
            self.shift = self.add_weight(shape=(shape[-1],), initializer="zeros", name="shift")

        def call(self, x):
            y = x * self.scale + self.shift
            z = y * y - 2.0 * y
            return z[:, :8] / 4.0

    return ScaleShift


#: Cases that are custom layers (``custom:<name>`` specs), not ``keras.layers`` names.
CUSTOM = {"ScaleShift": scale_shift}


def measure_here(
    repeats: int, clock: str = "wall", dtype: str = "float32", layers: str = ""
) -> list[dict]:
    """Every case (or those named in ``layers``, comma-separated) on the backend this process
    imported (a case the backend cannot run in ``dtype``, Conv2D on int32 for one, is left
    out)."""
    rows = []
    chosen = set(layers.split(",")) if layers else set(CASES)
    for name, (kwargs, shapes) in CASES.items():
        if name not in chosen:
            continue
        try:
            rows.append(measure_case(name, kwargs, shapes, repeats, clock, dtype))
        except Exception:
            if dtype == "float32":
                raise
    return rows


def measure_case(
    name: str,
    kwargs: dict,
    shapes: tuple,
    repeats: int,
    clock: str = "wall",
    dtype: str = "float32",
) -> dict:
    """Median bare construct-and-call vs median probe of the same layer and sample (an integer
    ``dtype`` makes the probe check its values against a reference run in a wider float)."""
    import keras
    import numpy as np

    from dtype_explorer.keras_run import run_probe as run
    from dtype_explorer.records import ProbeSpec

    backend = keras.backend.backend()
    custom = CUSTOM[name]() if name in CUSTOM else None
    cls = custom or getattr(keras.layers, name)
    samples = [np.random.default_rng(0).uniform(-3, 3, s).astype(dtype) for s in shapes]
    spec = ProbeSpec(
        target=f"custom:{name}" if custom else name,
        input_dtypes=(dtype,),
        backend=backend,
        kwargs=kwargs,
        shapes=shapes,
    )

    def bare():
        return cls(**kwargs)(*samples)

    def probed():
        result = run(spec, target=custom, trace=False)
        assert result.status == "ok", result.error
        return result

    def traced():
        result = run(spec, target=custom)
        assert result.status == "ok" and result.trace, result.error
        return result

    cases = {"bare": bare, "probe": probed, "trace": traced}
    for fn in cases.values():  # a first warm-up: compile caches, first-call costs
        fn()
    ms = medians(cases, repeats, harness_clock(clock))
    steps = traced().trace
    return {
        "backend": backend,
        "layer": name,
        "bare_ms": ms["bare"],
        "probe_ms": ms["probe"],
        "trace_ms": ms["trace"],
        "ratio": ms["probe"] / ms["bare"],
        "trace_ratio": ms["trace"] / ms["bare"],
        "steps": len(steps),
        "operators": sum(s.op.startswith("operator.") for s in steps),
    }


def measure_instance(repeats: int, clock: str = "wall") -> list[dict]:
    """A trained Dense instance probed as it is (archive round trip + probe), against its
    probe by name (built from the class) and a bare call of the instance."""
    import keras
    import numpy as np

    from dtype_explorer.keras_run import make_spec, pack, run_probe

    layer = keras.layers.Dense(16)
    layer.build((None, 32))
    x = np.random.default_rng(0).uniform(-3, 3, (8, 32)).astype("float32")
    by_name = make_spec("Dense", "float32", kwargs={"units": 16}, shape=(8, 32))
    as_is = make_spec(layer, "float32", shape=(8, 32))

    def archive():
        return pack(layer).load()

    cases = {
        "bare": lambda: layer(x),
        "archive": archive,
        "by_name": lambda: run_probe(by_name, trace=False),
        "instance": lambda: run_probe(as_is, target=layer, trace=False),
    }
    for fn in cases.values():
        fn()
    ms = medians(cases, repeats, harness_clock(clock))
    return [
        {
            "backend": keras.backend.backend(),
            **{f"{k}_ms": round(v, 2) for k, v in ms.items()},
            "instance_ratio": round(ms["instance"] / ms["bare"], 1),
            "instance_vs_name": round(ms["instance"] / ms["by_name"], 2),
        }
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--backends", default="jax,tensorflow,torch,numpy")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: perf_counter; cpu: process_time (all threads), steadier on a loaded machine",
    )
    parser.add_argument(
        "--dtype", default="float32", help="the inputs' dtype (int32: values checked too)"
    )
    parser.add_argument("--layers", default="", help="comma-separated cases (default: all)")
    parser.add_argument("--instances", action="store_true", help="a user's instance's probe")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.here:
        measured = (
            measure_instance(args.repeats, args.clock)
            if args.instances
            else measure_here(args.repeats, args.clock, args.dtype, args.layers)
        )
        print(json.dumps(measured))
        return
    rows = []
    for backend in args.backends.split(","):
        env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
        command = [sys.executable, __file__, "--here", "--repeats", str(args.repeats)]
        out = subprocess.run(
            [*command, "--clock", args.clock, "--dtype", args.dtype, "--layers", args.layers]
            + (["--instances"] if args.instances else []),
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        rows.extend(json.loads(out.stdout.strip().splitlines()[-1]))
    if args.json or args.instances:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{'backend':<11}{'layer':<20}{'bare ms':>10}{'probe ms':>10}{'ratio':>8}"
        f"{'+trace ms':>11}{'ratio':>8}{'steps':>7}{'operators':>10}"
    )
    for r in rows:
        print(
            f"{r['backend']:<11}{r['layer']:<20}{r['bare_ms']:>10.2f}{r['probe_ms']:>10.2f}"
            f"{r['ratio']:>7.2f}x{r['trace_ms']:>11.2f}{r['trace_ratio']:>7.2f}x{r['steps']:>7}{r['operators']:>10}"
        )
    worst = max(rows, key=lambda r: r["ratio"])
    print(f"worst probe: {worst['ratio']:.2f}x ({worst['backend']} {worst['layer']}); goal <= 3x")
    worst = max(rows, key=lambda r: r["trace_ratio"])
    print(
        f"worst probe+trace: {worst['trace_ratio']:.2f}x ({worst['backend']} {worst['layer']});"
        " goal <= 2x"
    )


if __name__ == "__main__":
    main()
