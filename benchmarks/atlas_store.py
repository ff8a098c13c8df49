"""The atlas in bounded memory (issue 27): the front process's peak RSS and the files, for a
survey slice built the old way (every result held, then made an atlas, written as JSON) and
the new way (answers streamed into an ``AtlasCollector``, written as Parquet and JSON).

    python benchmarks/atlas_store.py                       # 20 layers x 4 dtypes x 2 x 2
    python benchmarks/atlas_store.py --layers 8 --backends numpy

Each way runs in a fresh process after one unmeasured run that fills the result cache (both
then answer from the same cache: a cached answer carries its op trace, so what the front
holds is what a live build holds). RSS is the front process's peak (``RUSAGE_SELF``: workers
not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_WAYS = {
    "held (before)": (
        "import dtype_explorer as dx\nfrom dtype_explorer.records import Atlas\n"
        "s = dx.survey(T, D, P, backends=B, progress=False)\n"
        "a = Atlas.from_survey(s)\n(OUT / 'atlas.json').write_text(a.to_json())\n"
    ),
    "streamed (after)": (
        "from dtype_explorer.analyses import build_atlas\n"
        "build_atlas(T, D, P, backends=B, out=OUT, progress=False)\n"
    ),
}


def _run(code: str, slice_: dict, out: Path, env: dict) -> dict:
    prelude = (
        "import json, resource, sys\nfrom pathlib import Path\n"
        f"T, D, P, B = {slice_['targets']!r}, {slice_['dtypes']!r}, {slice_['policies']!r}, "
        f"{slice_['backends']!r}\nOUT = Path({str(out)!r})\n"
    )
    tail = "\nprint(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", prelude + code + tail],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    sizes = {p.name: p.stat().st_size for p in out.glob("atlas.*")}
    return {"rss_mb": int(done.stdout.split()[-1]) / 1024, **sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=20)
    parser.add_argument("--backends", default="numpy,jax")
    args = parser.parse_args()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    names = subprocess.run(
        [sys.executable, "-c", "from dtype_explorer import catalog\n"
         "print(' '.join(e.name for e in catalog.layers()))"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()[: args.layers]  # fmt: skip
    slice_ = {
        "targets": names,
        "dtypes": ["float32", "float16", "int32", "uint8"],
        "policies": ["float32", "mixed_float16"],
        "backends": args.backends.split(","),
    }
    with tempfile.TemporaryDirectory() as scratch:
        env["DTYPE_EXPLORER_CACHE_DIR"] = str(Path(scratch) / "cache")
        _run(_WAYS["streamed (after)"], slice_, Path(scratch) / "warm", env)  # fills the cache
        rows = {w: _run(c, slice_, Path(scratch) / str(i), env) for i, (w, c) in
                enumerate(_WAYS.items())}  # fmt: skip
    runs = len(names) * 4 * 2 * len(slice_["backends"])
    print(f"{len(names)} layers x 4 dtypes x 2 policies x {len(slice_['backends'])} backends "
          f"= {runs} runs; load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| way | front peak RSS MB | atlas.json KB | atlas.parquet KB |\n|---|---:|---:|---:|")
    for way, r in rows.items():
        parquet = f"{r['atlas.parquet'] / 1024:.0f}" if "atlas.parquet" in r else "-"
        print(f"| {way} | {r['rss_mb']:.0f} | {r['atlas.json'] / 1024:.0f} | {parquet} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
