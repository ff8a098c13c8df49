"""Benchmark a burst of quick changes in the explorer widget; prints a table (or ``--json``).

    .venv/bin/python benchmarks/widget_burst.py [--changes 12] [--backend jax] [--json]

A user drags a control: ``--changes`` requests arrive in quick succession while the first
(a heavy probe: LSTM, 64 units, a (8, 64, 32) sample, cache off) runs. Measured, in the same
run and on the same warm worker:

- bare: one such request alone, from the page's change to its answer (median of 3);
- burst: from the *last* change of the burst to its answer, and how many probes the widget
  actually submitted. Before coalescing every change ran in turn (about ``changes`` x bare);
  now the running probe finishes and only the newest runs next (at most about 2x bare).

The page is a recording comm (no browser); the cache is a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["DTYPE_EXPLORER_CACHE_DIR"] = tempfile.mkdtemp(prefix="dx-bench-burst-")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=12)
    parser.add_argument("--backend", default="jax")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import comm
    from comm.base_comm import BaseComm

    from dtype_explorer import pool
    from dtype_explorer.frontends.widget import DtypeExplorer

    class SilentComm(BaseComm):
        def publish_msg(self, *a: Any, **k: Any) -> None:
            pass

    comm.create_comm = SilentComm
    submitted: list[Any] = []
    real_submit = pool.submit

    def counting_submit(spec, **options):
        if spec.target == "LSTM":
            submitted.append(spec)
        return real_submit(spec, **options)

    pool.submit = counting_submit
    widget = DtypeExplorer(backends=[args.backend], use_cache=False)
    widget.wait(600)
    nonce = [100]

    def send(units: int) -> None:
        nonce[0] += 1
        widget.set_state(
            {
                "request": {
                    **widget.request,
                    "target": "LSTM",
                    "kwargs": json.dumps({"units": units}),
                    "shape": "[[8, 64, 32]]",
                    "input_dtypes": ["float32"],
                    "nonce": nonce[0],
                }
            }
        )

    bare = []
    for units in (60, 61, 62, 60):  # the first warms the LSTM code path up
        started = time.perf_counter()
        send(units)
        widget.wait(600)
        bare.append(time.perf_counter() - started)
    bare_s = statistics.median(bare[1:])
    submitted.clear()
    for i in range(args.changes):
        send(64 + i)
        time.sleep(0.01)
    last = time.perf_counter()
    answers = widget.wait(600)
    burst_s = time.perf_counter() - last
    assert answers[args.backend].spec.kwargs["units"] == 64 + args.changes - 1
    row = {
        "backend": args.backend,
        "changes": args.changes,
        "bare_s": round(bare_s, 3),
        "burst_last_change_to_answer_s": round(burst_s, 3),
        "ratio": round(burst_s / bare_s, 2),
        "probes_submitted": len(submitted),
        "load_average": round(os.getloadavg()[0], 1),
    }
    pool.shutdown()
    if args.json:
        print(json.dumps(row))
        return
    print("| backend | changes | bare s | last change → answer s | ratio | probes run | load |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {row['backend']} | {row['changes']} | {row['bare_s']} | "
        f"{row['burst_last_change_to_answer_s']} | {row['ratio']}x | "
        f"{row['probes_submitted']} | {row['load_average']} |"
    )


if __name__ == "__main__":
    main()
