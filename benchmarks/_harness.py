"""What the per-mode benchmarks share (``modes.py``, ``audit_modes.py``): alternating bare and
measured work after a warm-up, and running the measurement in a fresh process per backend
(the backend is fixed when Keras is imported)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any


def computed(outputs: Any) -> Any:
    """``outputs`` (a call's tensors, nested) read as NumPy: the values a user's script looks
    at. Every bare call the benchmarks compare with is read this way, as the tool reads the
    call it measures: on jax the call has then finished (its dispatch is asynchronous), and on
    openvino it has been computed at all (an OpenVINO tensor is a graph node until it is read,
    which compiles and infers it: a bare ``Dense`` call on openvino 1.3 ms unread, 21.8 ms
    read; on the other backends reading costs microseconds)."""
    import keras

    return keras.tree.map_structure(keras.ops.convert_to_numpy, outputs)


def clock(name: str) -> Callable[[], float]:
    """Process time (``"cpu"``) or wall time (``"wall"``)."""
    return time.process_time if name == "cpu" else time.perf_counter


def medians(works: dict[str, Callable[[], Any]], repeats: int, now: Callable[[], float]) -> dict:
    """Run each of ``works`` once to warm up, then ``repeats`` times, alternating; the median
    milliseconds of each."""
    for work in works.values():
        work()
    times: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(repeats):
        for name, work in works.items():
            t0 = now()
            work()
            times[name].append((now() - t0) * 1000)
    return {name: statistics.median(found) for name, found in times.items()}


def paired(
    bare: Callable[[], Any], measured: Callable[[], Any], repeats: int, now: Callable[[], float]
) -> dict:
    """``bare`` and ``measured`` run once to warm up, then ``repeats`` times one after the
    other: the median milliseconds of each, and ``ratio``, the median of each pair's ratio
    (robust to the load of a shared machine drifting between pairs)."""
    bare()
    measured()
    pairs = []
    for _ in range(repeats):
        t0 = now()
        bare()
        t1 = now()
        measured()
        t2 = now()
        pairs.append(((t1 - t0) * 1000, (t2 - t1) * 1000))
    return {
        "bare": statistics.median(b for b, _ in pairs),
        "measured": statistics.median(m for _, m in pairs),
        "ratio": statistics.median(m / b for b, m in pairs if b > 0),
    }


def paired_row(backend: str, mode: str, times: dict, measured: str) -> dict:
    """One row of :func:`print_table` (``measured`` names its column) from :func:`paired`'s
    ``times``."""
    return {
        "backend": backend,
        "mode": mode,
        "bare_ms": times["bare"],
        f"{measured}_ms": times["measured"],
        "ratio": times["ratio"],
    }


def in_backend(script: str, backend: str, *arguments: str) -> Any:
    """Run ``script --here ARGUMENTS`` with Keras on ``backend``; what it printed last, as
    JSON."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run(
        [sys.executable, script, "--here", *arguments],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_table(rows: list[dict], measured: str, clock_name: str, repeats: int) -> None:
    """The Markdown table of ``rows`` (backend, mode, bare ms, ``measured`` ms, ratio)."""
    print(f"load average {os.getloadavg()[0]:.1f}; {clock_name} time, median of {repeats}")
    print(f"| backend | mode | bare ms | {measured} ms | ratio |\n|---|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['mode']} | {r['bare_ms']:.2f} | {r[measured + '_ms']:.2f} "
            f"| {r['ratio']:.2f}x |"
        )


def command_line(
    description: str,
    *,
    backend: str = "jax",
    repeats: int = 5,
    clock: str | None = None,
    options: tuple[tuple[str, dict[str, Any]], ...] = (),
) -> Any:
    """The parsed command line of a benchmark measured in a fresh process on one backend:
    ``--backend``, ``--repeats``, ``--json``, the hidden ``--here`` (the measuring process),
    ``--clock`` where ``clock`` gives its default, and ``options`` (each its flag and
    ``add_argument``'s keywords). :func:`forwarded` says what the measuring process is
    given."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", default=backend)
    parser.add_argument("--repeats", type=int, default=repeats)
    if clock is not None:
        parser.add_argument("--clock", choices=("cpu", "wall"), default=clock)
    for flag, settings in options:
        parser.add_argument(flag, **settings)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def forwarded(args: Any) -> list[str]:
    """What :func:`command_line`'s ``args`` hand the measuring process (all but
    ``--backend``, ``--json`` and ``--here``)."""
    found = []
    for name, value in vars(args).items():
        if name not in ("backend", "json", "here"):
            found += [f"--{name.replace('_', '-')}", str(value)]
    return found


def main(script: str, description: str, measure_here: Callable[[int, str], list], measured: str):
    """The command line both scripts have: ``--backend``, ``--repeats``, ``--clock``,
    ``--json``; the measurement runs in a fresh process on that backend (``--here``)."""
    args = command_line(description, clock="cpu")
    if args.here:
        print(json.dumps(measure_here(args.repeats, args.clock)))
        return
    rows = in_backend(script, args.backend, *forwarded(args))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print_table(rows, measured, args.clock, args.repeats)
