"""Where an audit's time goes, phase by phase, against a bare call of the same model (issue 44
item 3, issue 38's speed goal).

    python benchmarks/audit_phases.py                          # jax, the 3-Dense model
    python benchmarks/audit_phases.py --backend tensorflow --model resnet50 --repeats 5

Each phase of ``check_model`` is timed by wrapping the function ``_check`` (or
``_layer_damage``) calls for it, for the length of this script only: the policy rebuild
(``policy_rebuild``: the clone found or built, its fingerprint, the weights copied in), the
traced pass (``_eager_pass``), the rules and value checks (``_call_findings``), the per-layer
float32 reference (``_damage_phase``; of it the float32 copy found or built, its pass, the
comparisons), the fixes run on copies (``_fix_phase``), the question as data
(``audit_question``: the config a script can rebuild from), and the report's text
(``str(report)``, not part of ``check_model``). The audits and the bare call alternate in one
process after a warm-up; each phase is printed as median ms and median ratio to the bare call
of the same repeat (wall time: the machine is shared, the ratios are the result).

Models: ``dense`` (``benchmarks/audit_policy.py``'s 3-Dense model, (32, 128), audited as built
and under ``mixed_bfloat16``) and ``resnet50`` (``keras.applications.ResNet50(weights=None)``,
input 2x96x96x3, built under ``mixed_float16`` and audited as built, as
``benchmarks/audit_reference.py`` does, and a float32 one audited under ``mixed_float16``);
``resnet50-float64``, a float32 ResNet50 (seeded) audited on float64 data: the float64
reference and the float64 fix, which share one float64 copy of the model.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import _harness as harness  # benchmarks/, beside this script

#: (module, function) of each phase timed, and its name in the table.
PHASES = [
    ("dtype_explorer.analyses.audit._check", "_under_policy", "policy rebuild (clone reused)"),
    ("dtype_explorer.analyses.audit._check", "_eager_pass", "traced pass"),
    ("dtype_explorer.analyses.audit._check", "_call_findings", "rules and value checks"),
    ("dtype_explorer.analyses.audit._check", "_damage_phase", "per-layer reference, all"),
    ("dtype_explorer.keras_run.model._layer_damage", "policy_clone", "  of it: float32 copy"),
    ("dtype_explorer.keras_run.model._layer_damage", "run_leaves", "  of it: its pass"),
    ("dtype_explorer.keras_run.model._layer_damage", "compare", "  of it: comparisons"),
    ("dtype_explorer.analyses.audit._check", "_fix_phase", "fixes proven on copies"),
    ("dtype_explorer.analyses.audit._check", "audit_question", "question as data (config)"),
]


@contextlib.contextmanager
def timed(spent: dict[str, float]) -> Iterator[None]:
    """Each of :data:`PHASES` wrapped to add its wall seconds to ``spent``; put back after."""
    import importlib

    saved = []
    for module_name, attribute, label in PHASES:
        module = importlib.import_module(module_name)
        original = getattr(module, attribute)

        def wrapper(*args: Any, __original: Any = original, __label: str = label, **kw: Any):
            t0 = time.perf_counter()
            try:
                return __original(*args, **kw)
            finally:
                spent[__label] = spent.get(__label, 0.0) + time.perf_counter() - t0

        saved.append((module, attribute, original))
        setattr(module, attribute, wrapper)
    try:
        yield
    finally:
        for module, attribute, original in saved:
            setattr(module, attribute, original)


def models(name: str) -> list[tuple[str, Any, Any, str | None]]:
    """(label, model, sample, policy=) of each audit measured for ``name``."""
    import keras
    import numpy as np

    if name == "dense":
        x = np.random.default_rng(0).uniform(-3, 3, (32, 128)).astype("float32")
        inputs = keras.Input((128,))
        h = keras.layers.Dense(64, activation="relu")(inputs)
        h = keras.layers.Dense(64, activation="relu")(h)
        model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(h))
        return [("float32", model, x, None), ("mixed_bfloat16", model, x, "mixed_bfloat16")]
    if name == "resnet50-float64":  # float64 data into a float32 model: a float64 reference
        keras.utils.set_random_seed(0)
        model = keras.applications.ResNet50(weights=None, input_shape=(96, 96, 3))
        x = np.random.default_rng(0).uniform(0, 255, (2, 96, 96, 3))
        return [("float32, float64 data", model, x, None)]
    x = np.random.default_rng(0).uniform(0, 1, (2, 96, 96, 3)).astype("float32")
    keras.config.set_dtype_policy("mixed_float16")
    built = keras.applications.ResNet50(weights=None, input_shape=(96, 96, 3))
    keras.config.set_dtype_policy("float32")
    plain = keras.applications.ResNet50(weights=None, input_shape=(96, 96, 3))
    return [
        ("built mixed_float16", built, x, None),
        ("policy=mixed_float16", plain, x, "mixed_float16"),
    ]


def measure_here(name: str, repeats: int) -> list[dict]:
    """Per audit of :func:`models`: each phase's median ms and ratio to the bare call."""
    from dtype_explorer import check_model

    rows = []
    for label, model, x, policy in models(name):
        spent: dict[str, float] = {}
        bare, whole, text, phases = [], [], [], {}
        with timed(spent):
            str(check_model(model, x, policy=policy))  # warm-up: the clones built
            model(x)
            for _ in range(repeats):
                t0 = time.perf_counter()
                harness.computed(model(x))
                bare.append(time.perf_counter() - t0)
                spent.clear()
                t0 = time.perf_counter()
                report = check_model(model, x, policy=policy)
                whole.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                str(report)
                text.append(time.perf_counter() - t0)
                for key, seconds in spent.items():
                    phases.setdefault(key, []).append(seconds)
        columns = {"check_model, whole": whole, **phases, "str(report) (not in it)": text}
        for key, seconds in columns.items():
            ratios = [s / b for s, b in zip(seconds, bare, strict=False)]
            rows.append(
                {
                    "audit": label,
                    "phase": key,
                    "bare_ms": round(statistics.median(bare) * 1000, 2),
                    "ms": round(statistics.median(seconds) * 1000, 2),
                    "ratio_median": round(statistics.median(ratios), 2),
                    "ratio_min": round(min(ratios), 2),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="jax")
    parser.add_argument(
        "--model", default="dense", choices=("dense", "resnet50", "resnet50-float64")
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.here:
        print(json.dumps(measure_here(args.model, args.repeats)))
        return
    load = os.getloadavg()[0]
    rows = harness.in_backend(
        __file__, args.backend, "--model", args.model, "--repeats", str(args.repeats)
    )
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{args.backend}, {args.model}: load average {load:.1f} -> {os.getloadavg()[0]:.1f}; "
        f"wall, {args.repeats} repeats"
    )
    print("| audit | phase | bare ms | phase ms | ratio min | median |")
    print("|---|---|---:|---:|---:|---:|")
    show: Callable[[dict], str] = lambda r: (  # noqa: E731
        f"| {r['audit']} | {r['phase']} | {r['bare_ms']:.1f} | {r['ms']:.1f} "
        f"| {r['ratio_min']:.2f}x | {r['ratio_median']:.2f}x |"
    )
    for r in rows:
        print(show(r))


if __name__ == "__main__":
    main()
