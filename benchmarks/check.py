"""``./dev.sh bench --check``: the headline figures of ``benchmarks/README.md`` rerun, each a
ratio measured in one run (min and median, with the load average), printed claim vs now.

    python benchmarks/check.py                       # every headline figure
    python benchmarks/check.py --only cached,first   # some of them (ids as in the table)
    python benchmarks/check.py --json

The claims are the README's "Headline figures" table (between the ``headline:start`` and
``headline:end`` markers): per figure its id, its goal (``<= 2x``) and the median recorded
there. A figure is flagged ``OFF`` when now's median is more than 25 % off the recorded one
(either way: the README must say what the code does), and ``OVER`` when it is over its goal;
the exit status is 1 if any is. Figures (each measured by the script named, in one run):

* ``cached``: a cached ``dtype-explorer probe Dense --backend numpy`` / ``python -c "import
  numpy, pydantic"`` (``cli_front.py``, alternating fresh processes): the same command line
  asked again, its printed answer kept (``cli_front.py`` also times the first ask after
  another front stored the answer, ``cli stored``).
* ``first``: the CLI's first run ever (fresh cache directory) / a bare ``import keras`` +
  ``Dense`` call on numpy (``cli.py --first``).
* ``probe:<backend>``: the worst of ``probe_wait.py``'s five layers on that backend,
  ``dx.probe`` as the user waits (warm worker, op trace on, no cache) / a bare
  construct-and-call.
* ``probe-here:<backend>``: the same with ``dx.probe``'s default, ``backend=None``: the probe
  run in the user's own process (``probe_wait.py --in-process``).
* ``audit:float32``, ``audit:mixed_bfloat16``: ``check_model`` / ``model(x)`` on jax
  (``audit_policy.py``); ``audit:mixed_bfloat16/own``: the policy's audit / a call of the same
  model built under that policy.
* ``audit:all``: ``check_model(model, x, backends="all")`` on a warm pool, its re-probes not
  cached, / ``model(x)`` / the backends re-probed on, a BERT-base-sized keras-hub backbone on
  tensorflow (``audit_backends.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import audit_backends  # benchmarks/, beside this script
import audit_policy
import cli
import cli_front
import probe_wait

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
#: Off by more than this fraction of the recorded median: flagged.
TOLERANCE = 0.25
#: Every figure :func:`measure` knows, as the README's table names them.
FIGURES = (
    "cached",
    "first",
    *(f"probe:{backend}" for backend in probe_wait.BACKENDS),
    *(f"probe-here:{backend}" for backend in probe_wait.BACKENDS),
    "audit:float32",
    f"audit:{audit_policy.POLICY}",
    f"audit:{audit_policy.POLICY}/own",
    "audit:all",
)
PACKAGES = (
    "keras",
    "keras_hub",
    "jax",
    "tensorflow",
    "torch",
    "numpy",
    "openvino",
    "ml_dtypes",
    "pydantic",
)


def claims(readme: Path = README) -> dict[str, dict]:
    """The README's headline table: per id, its goal and recorded median (``1.9x``)."""
    text = readme.read_text()
    table = text.split("<!-- headline:start -->")[1].split("<!-- headline:end -->")[0]
    found = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        goal = re.search(r"([\d.]+)x", cells[2])
        recorded = re.findall(r"([\d.]+)x", cells[3])
        found[cells[0].strip("`")] = {
            "goal": float(goal.group(1)) if goal else None,
            "recorded": float(recorded[-1]) if recorded else None,  # "min / median"
        }
    return found


def versions() -> str:
    """The installed versions the figures depend on, one line."""
    out = []
    for name in PACKAGES:
        try:
            out.append(f"{name} {metadata.version(name.replace('_', '-'))}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} -")
    return ", ".join(out)


def measure(only: set[str], repeats: int) -> dict[str, dict]:
    """Now's min and median of each figure asked (ids as in :func:`claims`)."""
    root = HERE.parent
    now: dict[str, dict] = {}
    if "cached" in only:
        rows = cli_front.measure(root, max(repeats, 7))
        floor, answer = rows["floor"], rows["cli cached"]
        now["cached"] = {
            "min": answer["wall_min_s"] / floor["wall_min_s"],
            "median": answer["wall_s"] / floor["wall_s"],
        }
    if "first" in only:
        rows = cli.run_first(max(3, repeats // 2), root)["results"]
        bare, first = rows["bare keras (numpy) + call"], rows["cli first run"]
        now["first"] = {
            "min": first["wall_min_s"] / bare["wall_min_s"],
            "median": first["wall_s"] / bare["wall_s"],
        }
    for figure, in_process in (("probe", False), ("probe-here", True)):
        backends = [b for b in probe_wait.BACKENDS if f"{figure}:{b}" in only]
        if backends:
            cells = probe_wait.measure(",".join(backends), repeats, in_process=in_process)
            for backend in backends:
                now[f"{figure}:{backend}"] = _worst([c for c in cells if c["backend"] == backend])
    if only & {"audit:float32", f"audit:{audit_policy.POLICY}", f"audit:{audit_policy.POLICY}/own"}:
        for row in audit_policy.in_backend("jax", repeats):
            now[f"audit:{row['audit']}"] = {"min": row["ratio_min"], "median": row["ratio_median"]}
    if "audit:all" in only:
        per = audit_backends.in_backend("tensorflow", max(3, repeats // 2))["per_backend"]
        now["audit:all"] = {"min": min(per), "median": statistics.median(per)}
    return now


def _worst(cells: list[dict]) -> dict:
    """One backend's probe figure: its worst cell's median, the largest min, every cell."""
    worst = max(cells, key=lambda c: c["ratio_median"])
    return {
        "min": max(c["ratio_min"] for c in cells),
        "median": worst["ratio_median"],
        "worst": worst["layer"],
        "cells": cells,
    }


def verdict(claim: dict, now: dict) -> str:
    """``ok``, ``OVER`` (over the goal) and/or ``OFF`` (> 25 % from the recorded median)."""
    flags = []
    if claim.get("goal") is not None and now["median"] > claim["goal"]:
        flags.append("OVER")
    recorded = claim.get("recorded")
    if recorded and abs(now["median"] / recorded - 1) > TOLERANCE:
        flags.append("OFF")
    return " ".join(flags) or "ok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated ids (default: all)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table = claims()
    only = set(args.only.split(",")) if args.only else set(table)
    unknown = only - set(table) - set(FIGURES)
    if unknown:
        parser.error(f"unknown figure ids {sorted(unknown)}; valid: {sorted(table)}")

    def claim(figure: str) -> dict:  # a figure not yet in the table: measured, no claim
        return table.get(figure, {"goal": None, "recorded": None})

    load, started = os.getloadavg(), datetime.now(timezone.utc)
    now = measure(only, args.repeats)
    report = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "load": [round(x, 1) for x in load],
        "load_after": [round(x, 1) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "versions": versions(),
        "figures": {k: {**claim(k), **v, "verdict": verdict(claim(k), v)} for k, v in now.items()},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{report['date']}; load {report['load']} -> {report['load_after']}, "
            f"{report['cpus']} CPUs; {report['versions']}"
        )
        print("| figure | goal | claim (median) | now min | now median | verdict |")
        print("|---|---:|---:|---:|---:|---|")
        for name, f in report["figures"].items():
            goal = f"<= {f['goal']}x" if f["goal"] else "-"
            recorded = f"{f['recorded']}x" if f["recorded"] else "-"
            print(
                f"| `{name}` | {goal} | {recorded} | {f['min']:.2f}x | {f['median']:.2f}x "
                f"| {f['verdict']}{' (' + f['worst'] + ')' if 'worst' in f else ''} |"
            )
        for f in report["figures"].values():
            for c in f.get("cells", ()):
                print(
                    f"  {c['backend']:<11}{c['layer']:<20}{c['steps']:>4} steps  bare "
                    f"{c['bare_ms']:7.1f} ms  probe {c['probe_ms']:7.1f} ms  text "
                    f"{c['text_ms']:5.1f} ms  {c['ratio_min']:.2f}x / {c['ratio_median']:.2f}x"
                )
    sys.exit(any(f["verdict"] != "ok" for f in report["figures"].values()))


if __name__ == "__main__":
    main()
