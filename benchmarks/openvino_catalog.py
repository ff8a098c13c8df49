"""The whole catalog on openvino: every layer and op the catalog probes (skipped ones aside),
each asked as ``dx.probe(target)`` asks it by default (its default input dtype, ``float32``,
the eager call), on openvino and on numpy beside it, through the pool's real workers.

    nice python benchmarks/openvino_catalog.py                  # a table, then the lists
    nice python benchmarks/openvino_catalog.py --json           # the counts and names

Each target lands in one class, by openvino's answer:

- **runs**: it answered (its dtype is compared with numpy's: same, or another dtype);
- **not implemented**: Keras's openvino backend raised ``NotImplementedError`` (not supported
  here, ⊘: ``keras_run._tool_error.unimplemented``);
- **raises, as on numpy**: it raised, and numpy raised too (the question is refused by Keras's
  design or by every backend);
- **raises on openvino only**: numpy answered, openvino raised something else (OpenVINO's
  own element-type checks, most of them: its ops do not promote);
- **no answer**: the probe timed out, crashed, or was the tool's failure.

Nothing is cached (``use_cache=False``): the counts are this Keras on this openvino, now.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLASSES = (
    "runs, same dtype as numpy",
    "runs, another dtype than numpy",
    "not implemented (⊘)",
    "raises, as on numpy",
    "raises on openvino only",
    "no answer",
)


def classify(openvino, numpy) -> str:
    """The class of one target from its two answers (``ProbeResult``)."""
    if openvino.ok:
        same = numpy.ok and numpy.output_dtypes == openvino.output_dtypes
        return CLASSES[0] if same else CLASSES[1]
    if openvino.unsupported:
        return CLASSES[2]
    if openvino.status != "error":  # timeout, crashed, invalid (the tool's or the spec's)
        return CLASSES[5]
    return CLASSES[3] if not numpy.ok else CLASSES[4]


def measure(timeout: float) -> dict:
    """Every catalog layer and op, probed on openvino and numpy; the classes and who is in them."""
    from dtype_explorer import pool
    from dtype_explorer.keras_run import catalog, make_spec

    pool.configure(backends=["numpy", "openvino"])
    pool.warm()
    kinds = {"layers": catalog.layers(), "ops": catalog.ops()}
    started = time.perf_counter()
    futures = {
        (kind, e.name): {b: pool.submit(make_spec(e.name, None, "float32", b), timeout=timeout,
                                        use_cache=False) for b in ("openvino", "numpy")}
        for kind, entries in kinds.items() for e in entries
    }  # fmt: skip
    found: dict[str, dict[str, list[str]]] = {k: collections.defaultdict(list) for k in kinds}
    said: dict[str, str] = {}
    for (kind, name), answers in futures.items():
        openvino, numpy = answers["openvino"].result(), answers["numpy"].result()
        label = classify(openvino, numpy)
        found[kind][label].append(name)
        if not openvino.ok:
            said[name] = openvino.headline[:160]
    skipped = {
        "layers": len(catalog.layers(include_skipped=True)) - len(kinds["layers"]),
        "ops": len(catalog.ops(include_skipped=True)) - len(kinds["ops"]),
    }
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "load_average": os.getloadavg(),
        "counts": {k: {c: len(found[k][c]) for c in CLASSES} for k in kinds},
        "totals": {k: len(v) for k, v in kinds.items()},
        "skipped": skipped,
        "names": {k: dict(v) for k, v in found.items()},
        "said": said,
    }


def table(numbers: dict) -> str:
    """The counts as a Markdown table (count and share of the probed targets)."""
    totals = numbers["totals"]
    rows = ["| on openvino | layers | ops |", "|---|---:|---:|"]
    for c in CLASSES:
        cells = [
            f"{numbers['counts'][k][c]} ({100 * numbers['counts'][k][c] / totals[k]:.0f} %)"
            for k in ("layers", "ops")
        ]
        rows.append(f"| {c} | {cells[0]} | {cells[1]} |")
    rows.append(f"| probed (catalog skips aside) | {totals['layers']} | {totals['ops']} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per probe")
    args = parser.parse_args()
    numbers = measure(args.timeout)
    if args.json:
        print(json.dumps(numbers, indent=2))
        return
    print(f"{numbers['seconds']} s, load average {numbers['load_average'][0]:.1f}")
    print(table(numbers))
    for kind in ("layers", "ops"):
        for c in CLASSES[1:]:
            names = numbers["names"][kind].get(c, [])
            if names:
                print(f"\n{kind}, {c}: {', '.join(names)}")
    print("\nopenvino's words, where it did not answer:")
    for name, text in numbers["said"].items():
        print(f"- {name}: {text}")


if __name__ == "__main__":
    main()
