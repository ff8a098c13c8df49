"""The prepared GPU run (issues 28, 42): one command turns a machine with an NVIDIA GPU into a
measured CPU-vs-GPU diff.

    tools/gpu_check.sh WHEELS_DIR OUT_DIR                          # on the GPU machine: all of it
    python tools/gpu_check.py --device both --out OUT_DIR          # the run itself
    python tools/gpu_check.py --device cpu --quick --out /tmp/gc   # the CPU half (CI)

For each device it runs a fixed set in that device's own workers (a subprocess per device:
``CUDA_VISIBLE_DEVICES=""`` and ``JAX_PLATFORMS=cpu`` make the CPU half; a fresh result cache
each, so every answer is live), in parts of falling priority (``PARTS``): Dense under float32
and mixed_bfloat16, ``ops.matmul`` on float32 and int8, the matmul settings (``torch._int_mm``
shapes, ``precision="highest"`` beside the default: TF32), Conv2D/LSTM/MultiHeadAttention and
mixed_float16, Dense quantized to int8 (``int8_from_float32``), and probe-vs-bare timings
(``benchmarks/probe.py``). TensorFlow is used where it is installed; where it is not (the GPU
machine has none) the run is on jax and torch, and the report says so.

``--budget SECONDS`` (default 330: the whole run in under 6 minutes) is shared by the two
halves; each half runs its parts in order and drops an optional part whose estimate (its probe
count at the rate measured so far) would overrun the half's share, saying what it dropped and
why (``plan_part``). The first two parts always run.

The report folder ``OUT_DIR`` holds at most 8 files: ``report.md``, ``report.json`` (devices,
versions, matmul settings per backend, dtype changes, value changes, kernel paths, timings,
what was dropped), ``diff-<part>.html`` (the ``atlas diff`` CPU -> GPU of each part with an
atlas) and ``results-<device>.jsonl`` (every answer, with its ``environment``). The atlases and
caches go to ``--work`` (a temporary folder unless named).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ (and the package, where it is not installed): after what is installed, so that a
# wheel installed with --target (tools/gpu_check.sh) is the one imported.
sys.path.append(str(ROOT))

LAYERS = {
    "Dense": {"units": 64},
    "Conv2D": {"filters": 8, "kernel_size": 3},
    "LSTM": {"units": 16},
    "MultiHeadAttention": {"num_heads": 2, "key_dim": 8},
}
POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
BACKENDS = "jax,tensorflow,torch"
QUICK_BACKENDS = "numpy,torch"
#: A shape torch._int_mm takes (2-D, rows > 16, multiples of 8) and a 3-D one it does not.
INT_MM_SHAPES = ([[32, 64], [64, 16]], [[2, 32, 64], [64, 16]])
#: Dense large enough for TF32 to show in its numbers (``precision="highest"`` beside it).
TF32_CASE = {"kwargs": {"units": 256}, "shape": [64, 512]}
BUDGET_S = 330.0
#: What the report folder may hold.
MAX_FILES, MAX_FILE_MIB = 8, 16


@dataclass(frozen=True)
class Part:
    """One part of a half: a survey (drawn as an atlas, diffed CPU -> GPU) or extra probes."""

    name: str
    essential: bool
    survey: dict | None = None  # survey() arguments, without backends
    extras: bool = False  # the int_mm shapes and precision="highest" probes
    timings: bool = False  # benchmarks/probe.py on this device

    def probes(self, backends: list[str], quick: bool) -> int:
        """How many answers it asks (a timing counts as one probe per backend)."""
        if self.survey:
            s = self.survey
            return len(s["targets"]) * len(s["input_dtypes"]) * len(s["policies"]) * len(backends)
        if self.extras:
            return (len(INT_MM_SHAPES) + 2) * len(backends)
        return 2 if quick else 2 * len(LAYERS) * len(backends)


def parts(quick: bool) -> list[Part]:
    """The parts of a half, most important first (the first two always run)."""
    more = [] if quick else [n for n in LAYERS if n != "Dense"]
    return [
        Part("layers", True, {"targets": ["Dense"], "input_dtypes": ["float32"],
                              "policies": ["float32", "mixed_bfloat16"]}),
        Part("matmul", True, {"targets": ["ops.matmul"], "input_dtypes": ["float32", "int8"],
                              "policies": ["float32"]}),
        Part("extras", False, extras=True),
        Part("more_layers", False, {"targets": ["Dense", *more], "input_dtypes": ["float32"],
                                    "policies": ["mixed_float16"] if quick else list(POLICIES)}),
        Part("int8", False, {"targets": ["Dense"], "input_dtypes": ["float32"],
                             "policies": ["int8_from_float32"]}),
        Part("timings", False, timings=True),
    ]  # fmt: skip


def plan_part(
    part: Part, probes: int, seconds_per_probe: float | None, left_s: float
) -> str | None:
    """Why an optional part is dropped (``None``: it runs). Pure: the budget rule alone.

    Args:
        part: the part.
        probes: the answers it would ask.
        seconds_per_probe: the rate measured on this half so far (``None``: nothing ran yet).
        left_s: the seconds left of this half's share.

    Returns:
        The reason, e.g. ``"estimated 40 s (20 probes at 2.0 s), 12 s left"``, or ``None``.

    >>> plan_part(Part("int8", False), 20, 2.0, 12.0)
    'estimated 40 s (20 probes at 2.0 s), 12 s left'
    >>> plan_part(Part("layers", True), 20, 2.0, 0.0) is None
    True
    """
    if part.essential:
        return None
    if left_s <= 0:
        return f"no time left ({left_s:.0f} s)"
    if seconds_per_probe is None:
        return None
    estimate = probes * seconds_per_probe
    if estimate <= left_s:
        return None
    at = f"{probes} probes at {seconds_per_probe:.1f} s"
    return f"estimated {estimate:.0f} s ({at}), {left_s:.0f} s left"


def installed_backends(asked: list[str]) -> tuple[list[str], dict[str, str]]:
    """The asked backends whose library is installed, and why each other one is left out."""
    missing = {}
    for backend in asked:
        library = {"numpy": "numpy", "jax": "jax", "torch": "torch"}.get(backend, "tensorflow")
        try:
            found = importlib.util.find_spec(library) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing[backend] = f"{library} is not installed on this machine"
    return [b for b in asked if b not in missing], missing


# ------------------------------------------------------------------- one device's half


def run_half(device: str, work: Path, backends: list[str], quick: bool, deadline: float) -> None:
    """In this process's own pool: the parts in order within the deadline; every answer in
    ``results.jsonl``, what was dropped in ``dropped.json``, the timings in ``timings.json``."""
    import dtype_explorer as dx
    from dtype_explorer.analyses import save_atlas, survey
    from dtype_explorer.records import Atlas

    work.mkdir(parents=True, exist_ok=True)
    answers, dropped, found_timings = [], {}, []
    started, asked = time.time(), 0
    for part in parts(quick):
        probes = part.probes(backends, quick)
        rate = (time.time() - started) / asked if asked else None
        why = plan_part(part, probes, rate, deadline - time.time())
        if why:
            dropped[part.name] = why
            continue
        if part.survey:
            found = survey(**part.survey, backends=backends, progress=False, use_cache=False)
            save_atlas(Atlas.from_survey(found), _mkdir(work / part.name))
            answers.extend(found.results)
        elif part.extras:
            answers.extend(_extras(dx, backends))
        else:
            dx.pool.shutdown()  # the timings run in their own processes
            found_timings = timings(device, work, backends, quick)
        asked += probes
    with open(work / "results.jsonl", "w", encoding="utf-8") as file:
        for answer in answers:
            file.write(answer.to_json() + "\n")
    (work / "dropped.json").write_text(json.dumps(dropped), encoding="utf-8")
    (work / "timings.json").write_text(json.dumps(found_timings), encoding="utf-8")
    dx.pool.shutdown()


def _extras(dx, backends: list[str]) -> list:
    answers = []
    for backend in backends:
        for shape in INT_MM_SHAPES:
            answers.append(
                dx.probe(
                    "ops.matmul", ["int8", "int8"], shape=shape, backend=backend, use_cache=False
                )
            )
        for precision in (None, "highest"):
            answers.append(
                dx.probe(
                    "Dense", backend=backend, precision=precision, use_cache=False, **TF32_CASE
                )
            )
    return answers


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


# ------------------------------------------------------------------------ the whole run


def device_env(device: str, work: Path) -> dict[str, str]:
    """The environment of one device's half: its own cache; the CPU half hides the GPU."""
    env = {
        **os.environ,
        "DTYPE_EXPLORER_CACHE_DIR": str(work / "cache"),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT)]))
    if device == "cpu":
        env.update(CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu", KERAS_TORCH_DEVICE="cpu")
    return env


def check_gpu() -> list[str]:
    """What does not see the GPU (``[]``: jax and torch both do)."""
    probes = {
        "jax": "import jax; assert jax.devices()[0].platform == 'gpu', jax.devices()",
        "torch": "import torch; assert torch.cuda.is_available(), 'no torch.cuda'",
    }
    missing = []
    for name, code in probes.items():
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if done.returncode:
            missing.append(f"{name}: {(done.stderr.strip().splitlines() or ['failed'])[-1]}")
    return missing


def timings(device: str, work: Path, backends: list[str], quick: bool) -> list[dict]:
    """``benchmarks/probe.py`` on this device: bare Keras vs the probe, as ratios."""
    repeats = "1" if quick else "5"
    backends = backends[:1] if quick else backends
    command = [sys.executable, str(ROOT / "benchmarks" / "probe.py"), "--json"]
    done = subprocess.run(
        [*command, "--repeats", repeats, "--backends", ",".join(backends)],
        env=device_env(device, work),
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(done.stdout[done.stdout.index("[") :])
    return [
        {k: r[k] for k in ("backend", "layer", "bare_ms", "probe_ms", "ratio", "trace_ratio")}
        for r in rows
        if not quick or r["layer"] == "Dense"
    ]


def load(out: Path):
    from dtype_explorer.records import ProbeResult

    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [ProbeResult.from_json(line) for line in lines]


def answer_key(r) -> str:
    s = r.spec
    extra = f" shape={list(map(list, s.shapes))}" if s.shapes else ""
    precision = f" precision={s.precision}" if s.precision else ""
    return f"{r.backend} {s.target} {','.join(s.input_dtypes)} [{s.policy}]{extra}{precision}"


def value_change(a, b) -> float | None:
    """The largest difference between two answers' sampled outputs, relative to their scale."""
    if a.numerics is None or b.numerics is None:
        return None
    worst = None
    for x, y in zip(a.numerics.outputs, b.numerics.outputs, strict=False):
        pairs = [
            (p, q) for p, q in zip(x.head, y.head, strict=False) if p is not None and q is not None
        ]
        if not pairs:
            continue
        scale = max(max(abs(p) for p, _ in pairs), 1e-30)
        found = max(abs(p - q) for p, q in pairs) / scale
        worst = found if worst is None else max(worst, found)
    return worst


def compare(devices: list[str], work: Path, out: Path) -> dict:
    """The report: per device each backend's settings, and (two devices) the diff, whose HTML
    goes to ``out/diff-<part>.html``."""
    from dtype_explorer.records import Atlas

    answers = {d: {answer_key(r): r for r in load(work / d)} for d in devices}
    report: dict = {"devices": {}, "kernels": {}, "dtype_changes": {}, "value_changes": []}
    for device, found in answers.items():
        report["devices"][device] = {
            r.backend: {"device": r.device, **r.environment}
            for r in found.values()
            if r.environment
        }
        report["kernels"][device] = {k: r.kernel for k, r in found.items() if r.kernel}
    if len(devices) == 2:
        before, after = devices
        for part in (p.name for p in parts(quick=False) if p.survey):
            if not (work / before / part).exists() or not (work / after / part).exists():
                continue
            diff = Atlas.load(work / before / part).diff(Atlas.load(work / after / part))
            (out / f"diff-{part}.html").write_text(diff.to_html(), encoding="utf-8")
            report["dtype_changes"][part] = [
                f"{c.run} {c.target} {c.input_dtype} [{c.policy}]: {c.kind} {c.before} -> {c.after}"
                for c in diff.changes
            ]
        for key, a in answers[before].items():
            b = answers[after].get(key)
            change = value_change(a, b) if b is not None and a.ok and b.ok else None
            if change:
                report["value_changes"].append({"answer": key, "max_rel_change": change})
        report["value_changes"].sort(key=lambda v: -v["max_rel_change"])
    for device, found in answers.items():  # TF32 on vs off on the same device
        for key, r in found.items():
            if r.spec.precision == "highest":
                plain = found.get(key.replace(" precision=highest", ""))
                change = value_change(plain, r) if plain is not None else None
                report.setdefault("precision_effect", {})[f"{device}: {key}"] = change
    return report


def markdown(report: dict) -> str:
    lines = ["# gpu_check", "", f"elapsed: {report['elapsed_s']} s of {report['budget_s']} s", ""]
    lines += [f"- {b} left out: {why}" for b, why in report["backends_left_out"].items()]
    for device, found in report["dropped"].items():
        lines += [f"- {device}: dropped {part}: {why}" for part, why in found.items()]
    for device, found in report["versions"].items():
        lines.append(f"- {device} versions: " + ", ".join(f"{k} {v}" for k, v in found.items()))
    lines.append("")
    for device, backends in report["devices"].items():
        lines.append(f"## {device}")
        lines += [
            f"- {b}: " + ", ".join(f"{k} {v}" for k, v in env.items())
            for b, env in backends.items()
        ]
        lines += [f"- kernel: {k}: {v}" for k, v in report["kernels"].get(device, {}).items()]
        lines += [
            f"- timing {t['backend']} {t['layer']}: probe {t['ratio']:.2f}x bare, "
            f"+trace {t['trace_ratio']:.2f}x"
            for t in report.get("timings", {}).get(device, [])
        ]
        lines.append("")
    if report["dtype_changes"]:
        lines.append("## dtype changes (atlas diff)")
        lines += [
            f"- {part}: {c}" for part, found in report["dtype_changes"].items() for c in found
        ]
        lines.append("")
    if report["value_changes"]:
        lines.append("## value changes (largest 20)")
        lines += [
            f"- {v['answer']}: {v['max_rel_change']:.3g}" for v in report["value_changes"][:20]
        ]
        lines.append("")
    for key, change in report.get("precision_effect", {}).items():
        said = "-" if change is None else f"{change:.3g}"
        lines.append(f"- precision=highest vs default, {key}: {said}")
    return "\n".join(lines) + "\n"


def versions(work: Path) -> dict[str, str]:
    """The versions in effect on one device (Python, Keras, the backends, numpy, ml_dtypes:
    each answer records them; one answer per backend)."""
    found: dict[str, str] = {}
    for answer in load(work):
        found.update(answer.versions)
    return found


def check_report_folder(out: Path) -> list[str]:
    """What is wrong with the report folder (``[]``: at most 8 files, each <= 16 MiB)."""
    files = [f for f in out.iterdir() if f.is_file()]
    wrong = [f"{len(files)} files (at most {MAX_FILES})"] if len(files) > MAX_FILES else []
    wrong += [
        f"{f.name} is {f.stat().st_size / 2**20:.1f} MiB (at most {MAX_FILE_MIB})"
        for f in files
        if f.stat().st_size > MAX_FILE_MIB * 2**20
    ]
    return wrong


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=("cuda", "cpu", "both"), default="both")
    parser.add_argument("--out", type=Path, default=Path("gpu-check"), help="the report folder")
    parser.add_argument("--work", type=Path, help="atlases and caches (default: a temp folder)")
    parser.add_argument("--quick", action="store_true", help="the reduced set (CI smoke)")
    parser.add_argument(
        "--backends", default=None, help=f"default {BACKENDS} ({QUICK_BACKENDS} with --quick)"
    )
    parser.add_argument(
        "--budget", type=float, default=BUDGET_S, help=f"seconds for the whole run ({BUDGET_S})"
    )
    parser.add_argument("--half", choices=("cuda", "cpu"), help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    asked = (args.backends or (QUICK_BACKENDS if args.quick else BACKENDS)).split(",")
    backends, left_out = installed_backends(asked)
    if args.half:
        run_half(args.half, args.out, backends, args.quick, args.deadline)
        return 0
    started = time.time()
    devices = ["cpu", "cuda"] if args.device == "both" else [args.device]
    if "cuda" in devices:
        missing = check_gpu()
        if missing:
            print("gpu_check: the GPU is not seen by " + "; ".join(missing), file=sys.stderr)
            return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-work-"))
    out = _mkdir(args.out)
    # 1. Each half in its own processes, within its share of the budget (10 % kept for the
    #    report).
    share = 0.9 * args.budget / len(devices)
    for i, device in enumerate(devices):
        where = work / device
        deadline = started + share * (i + 1)
        command = [sys.executable, __file__, "--half", device, "--out", str(where)]
        command += ["--backends", ",".join(backends), "--deadline", str(deadline)]
        command += ["--quick"] if args.quick else []
        subprocess.run(command, env=device_env(device, where), check=True)
        shutil.copyfile(where / "results.jsonl", out / f"results-{device}.jsonl")
    # 2. The report.
    report = compare(devices, work, out)
    report["backends_left_out"] = left_out
    report["versions"] = {d: versions(work / d) for d in devices}
    report["timings"] = {d: json.loads((work / d / "timings.json").read_text()) for d in devices}
    report["dropped"] = {d: json.loads((work / d / "dropped.json").read_text()) for d in devices}
    report["installed_from"] = str(Path(importlib.util.find_spec("dtype_explorer").origin).parent)
    report["budget_s"] = args.budget
    report["elapsed_s"] = round(time.time() - started, 1)
    (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (out / "report.md").write_text(markdown(report), encoding="utf-8")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    print(markdown(report))
    wrong = check_report_folder(out)
    if wrong:
        print("gpu_check: the report folder is too big: " + "; ".join(wrong), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
