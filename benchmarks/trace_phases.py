"""Where ``dx.trace``'s time goes on ``benchmarks/trace_code.py``'s two cases, phase by phase:
opening and closing the trace (the op bindings and operators, the named steps), the code run
traced, building the records and describing the returned value; each phase alone, the median
of ``--repeats`` runs (CPU time), and the cost of a recorded step (children included).

    KERAS_BACKEND=jax PYTHONPATH=$PWD .venv/bin/python benchmarks/trace_phases.py --repeats 30
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trace_code


def _median_ms(work: Callable[[], Any], repeats: int) -> float:
    work()
    work()
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        work()
        times.append((time.process_time() - t0) * 1000)
    return statistics.median(times)


def main(repeats: int) -> None:
    import keras

    import dtype_explorer as dx
    from dtype_explorer.keras_run.code import TracedRun, describe_returned
    from dtype_explorer.keras_run.code._named import named_steps
    from dtype_explorer.keras_run.trace import op_trace

    forward, loop = trace_code.cases().values()

    def opened() -> None:
        with op_trace(user=True, own=True, lazy=True):
            pass

    def named() -> None:
        with named_steps():
            pass

    def both() -> None:
        with TracedRun(what="w", kind="function", own=True):
            pass

    print(f"backend {keras.backend.backend()}; CPU ms, median of {repeats}")
    open_close = _median_ms(both, repeats)
    print(f"opening + closing the trace      {open_close:.3f}")
    print(f"  the op bindings and operators  {_median_ms(opened, repeats):.3f}")
    print(f"  the named steps                {_median_ms(named, repeats):.3f}")
    for name, work in (("forward", forward), ("100-step ops loop", loop)):
        value = work()
        run = TracedRun(what="w", kind="function", own=True)
        with run:
            work()
        count = len(run.trace.raw) + sum(len(s.children) for s in run.trace.raw)

        def traced(work: Callable[[], Any] = work) -> None:
            with TracedRun(what="w", kind="function", own=True):
                work()

        bare = _median_ms(work, repeats)
        inside = _median_ms(traced, repeats)
        records = _median_ms(run.trace.steps, repeats)
        described = _median_ms(lambda v=value: describe_returned(v), repeats)
        whole = _median_ms(lambda w=work: dx.trace(w), repeats)
        step_us = (inside - bare - open_close) / count * 1000
        print(
            f"{name}: bare {bare:.3f}, dx.trace {whole:.3f} ({whole / bare:.2f}x); "
            f"opened, run, closed {inside:.3f}; records {records:.3f}; "
            f"returned value {described:.3f}; {count} steps: {step_us:.1f} us a step"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    main(parser.parse_args().repeats)
