"""Consecutive ``%%dtype_trace --engine`` cells: the wall time of each, with the engine's
workers spawned and forked from the engine's zygote (``runtime/_zygote.py``), each way in a
fresh kernel-like process (an IPython shell with ``%load_ext dtype_explorer``).

    python benchmarks/engine_cells.py                         # keras==3.11.3 on numpy, 5 cells
    python benchmarks/engine_cells.py --engine keras==3.12.0 --backend jax --cells 4 --json

(``--engine``: a Keras 3 release; the cell trace does not run on ``tf_keras``.) A traced
cell runs in the engine's user-code worker, which is replaced once the cell has run,
so every cell waits for a new worker: the first is spawned (an engine's first worker always
is), the second makes the engine's zygote (its import, as a spawn's), and from the third on
each is forked from it. The engine is created first if it is not (``dx.engines.create``, in
``$DTYPE_EXPLORER_ENGINES_DIR`` or the default folder); the result cache is a temporary one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CELL = "import keras, numpy as np\nkeras.ops.add(np.ones(2, 'float16'), 1.5)"


def cells(engine: str, backend: str, count: int) -> list[float]:
    """In this process: ``count`` traced cells on ``engine``, the wall seconds of each."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "dtype_explorer")
    walls = []
    for _ in range(count):
        t0 = time.perf_counter()
        done = shell.run_cell_magic("dtype_trace", f"--engine {engine} --backend {backend}", CELL)
        walls.append(time.perf_counter() - t0)
        assert done.results[backend].status == "ok", done.results[backend]
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="keras==3.11.3")
    parser.add_argument("--backend", default="numpy")
    parser.add_argument("--cells", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--inside", default=None, help=argparse.SUPPRESS)  # the child's way
    args = parser.parse_args()
    if args.inside is not None:
        print(json.dumps(cells(args.engine, args.backend, args.cells)))
        return
    from dtype_explorer import engines

    engines.create(args.engine, progress=False)
    load = os.getloadavg()[0]
    found = {}
    for way in ("spawn", "zygote"):
        env = os.environ | {
            "DTYPE_EXPLORER_WORKER_START": way,
            "DTYPE_EXPLORER_CACHE_DIR": tempfile.mkdtemp(prefix="dx-bench-cells-"),
        }
        command = [sys.executable, __file__, *sys.argv[1:], "--inside", way]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        found[way] = json.loads(done.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps({"load": [load, os.getloadavg()[0]], "walls": found}))
        return
    print(f"{args.engine} on {args.backend}; load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print("| cell | spawned, s | zygote, s |")
    print("|---:|---:|---:|")
    for i, (spawned, forked) in enumerate(zip(found["spawn"], found["zygote"]), 1):
        print(f"| {i} | {spawned:.2f} | {forked:.2f} |")


if __name__ == "__main__":
    main()
