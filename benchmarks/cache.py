"""Benchmark what signing cache rows costs (issue 31): a cache read and write with the MAC
against the same row read and written without it, in the same run and the same database.

    .venv/bin/python benchmarks/cache.py [--json] [--repeats 2000]

- read: ``cache.get(spec)`` (key, row, MAC check, validation as a ``ProbeResult``) vs the
  unauthenticated read of the same answer (key, row, validation: the path before issue 31);
- write: ``cache.put(result)`` vs storing the same body unsigned (a tenth of the repeats: each
  is a synced SQLite transaction);
- the MAC alone: ``_mac.sign`` and ``_mac.verify`` of the row.

Medians of interleaved runs (``_harness.medians``), wall time. The cache and its key live in a
temporary directory, so the user's are untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("KERAS_BACKEND", "numpy")
_TEMP = tempfile.mkdtemp(prefix="dx-bench-cache-")
os.environ["DTYPE_EXPLORER_CACHE_DIR"] = os.path.join(_TEMP, "cache")
os.environ["DTYPE_EXPLORER_CACHE_KEY_FILE"] = os.path.join(_TEMP, "config", "cache.key")

from benchmarks._harness import medians  # noqa: E402


def measure(repeats: int) -> dict[str, float]:
    """Median microseconds of each read and write, signed and not, and of the MAC alone."""
    now = time.perf_counter
    import keras

    from dtype_explorer.keras_run import run_probe
    from dtype_explorer.records import ProbeSpec
    from dtype_explorer.runtime import _mac, cache

    spec = ProbeSpec(target="Dense", backend=keras.backend.backend(), kwargs={"units": 3})
    result = run_probe(spec)
    cache.put(result)
    key = cache.key(spec)
    plain_key = key + "|unsigned"
    body = result.model_copy(update={"cached": False}).to_json()
    store = cache._store()
    store.db.set(plain_key, body)
    secret = _mac.secret(create=False)
    row = store.db.get(key)

    def read_plain():
        found = cache._valid(store.db.get(cache.key(spec) + "|unsigned"))
        assert found is not None and found.spec == spec
        return found.model_copy(update={"cached": True})

    def read_signed():
        assert cache.get(spec) is not None

    reads = {"read_unsigned": read_plain, "read_signed": read_signed}
    writes = {
        "write_unsigned": lambda: store.db.set(
            cache.key(spec) + "|unsigned", result.model_copy(update={"cached": False}).to_json()
        ),
        "write_signed": lambda: cache.put(result),
    }
    macs = {
        "sign": lambda: _mac.sign(secret, key, body),
        "verify": lambda: _mac.verify(secret, key, row),
    }
    # Reads apart from writes: a write makes the next read reload SQLite's page cache.
    found = {}
    for works in (reads, writes, macs):
        found |= medians(works, repeats if works is not writes else max(repeats // 10, 20), now)
    return {name: ms * 1000 for name, ms in found.items()} | {"row_bytes": len(row)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    us = measure(args.repeats)
    if args.json:
        print(json.dumps(us, indent=2))
        return
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}; wall time, median of {args.repeats} (writes: a tenth)")
    print(f"row of {us['row_bytes']} bytes")
    print("| | unsigned µs | signed µs | ratio |\n|---|---:|---:|---:|")
    for what in ("read", "write"):
        plain, signed = us[f"{what}_unsigned"], us[f"{what}_signed"]
        print(f"| {what} | {plain:.1f} | {signed:.1f} | {signed / plain:.2f}x |")
    print(f"| the MAC alone: sign, verify | | {us['sign']:.1f}, {us['verify']:.1f} | |")


if __name__ == "__main__":
    main()
