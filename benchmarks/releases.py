"""What ``dx.bisect`` costs against asking every release: probes run and wall time.

    python benchmarks/releases.py                                   # 3.10.0..3.13.0, numpy
    python benchmarks/releases.py --versions 3.0.0..3.15.1 --json
    python benchmarks/releases.py --grid /path/to/grid              # replay recorded answers

The live part asks the headline question of issue 16 (``Discretization(bin_boundaries=[0.5,
1.5, 2.5], dtype="float32")`` on float32, numpy backend) of a range of releases, first by
bisection, then exhaustively (every release), each through its engine (engines made first and
timed apart; the result cache is off and no worker is running at the start of either run, so
each asked release starts its engine's worker and probes). The ratio is bisect's wall time
over the exhaustive sweep's, in the same run.

``--grid DIR`` replays recorded answers instead (``<release>-numpy.json``: case -> outcome, one
file per release, as the engines research wrote them) through the same ``search()``: per
question, the probes bisection runs against the number of releases, and how many questions
change between the ends (bisection pins a change) or only inside (changes and changes back:
bisection reports none; ``exhaustive=True`` sees them).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from pathlib import Path

QUESTION = {
    "target": "Discretization",
    "input_dtype": "float32",
    "backend": "numpy",
    "kwargs": {"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"},
}


def live(versions: str) -> dict:
    import dtype_explorer as dx
    from dtype_explorer.analyses import resolve_versions
    from dtype_explorer.analyses._bisect import engine_for

    releases = resolve_versions(versions)
    started = time.perf_counter()
    for release in releases:  # engines made (or found) first, so the runs below only probe
        dx.engines.ensure(engine_for(release), progress=False)
    made_s = time.perf_counter() - started
    out = {"versions": versions, "releases": len(releases), "engines_made_s": round(made_s, 2)}
    for exhaustive in (False, True):
        dx.shutdown()  # both start every release's worker, as a first bisection does
        started = time.perf_counter()
        b = dx.bisect(
            **QUESTION, versions=releases, exhaustive=exhaustive, use_cache=False, progress=False
        )
        key = "exhaustive" if exhaustive else "bisect"
        out[key] = {
            "probes": b.probed_count,
            "wall_s": round(time.perf_counter() - started, 2),
            "first_change": b.first_change.after_version if b.first_change else None,
        }
    out["ratio"] = round(out["bisect"]["wall_s"] / out["exhaustive"]["wall_s"], 3)
    return out


def replay(folder: Path) -> dict:
    from packaging.version import Version

    from dtype_explorer.analyses._bisect import planned_probes, search

    files = sorted(folder.glob("*-numpy.json"), key=lambda p: Version(p.name.split("-")[0]))
    grids = [json.loads(p.read_text()) for p in files]
    cases = sorted(set.intersection(*(set(g) - {"_meta"} for g in grids)))
    probes, pinned, first, inside, steady = [], 0, 0, 0, 0
    for case in cases:
        answers = [g[case] for g in grids]
        asked = sorted(search(len(answers), answers.__getitem__))
        probes.append(len(asked))
        if answers[0] != answers[-1]:
            pinned += 1
            found = next(b for a, b in itertools.pairwise(asked) if answers[a] != answers[b])
            first += found == next(i for i, a in enumerate(answers) if a != answers[0])
        elif len(set(answers)) > 1:
            inside += 1
        else:
            steady += 1
    return {
        "releases": len(grids),
        "questions": len(cases),
        "probes_mean": round(statistics.mean(probes), 2),
        "probes_max": max(probes),
        "planned_max": planned_probes(len(grids)),
        "ends_differ_pinned": pinned,
        "pinned_is_the_first_change": first,
        "changes_only_inside_missed": inside,
        "never_change": steady,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", default="3.10.0..3.13.0")
    parser.add_argument("--grid", type=Path, help="replay recorded answers from this folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = replay(args.grid) if args.grid else live(args.versions)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for key, value in out.items():
        print(f"{key:<28}{value}")


if __name__ == "__main__":
    main()
