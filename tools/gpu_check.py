"""The prepared GPU run (issue 28): one command turns a machine with an NVIDIA GPU into a
measured CPU-vs-GPU diff.

    python tools/gpu_check.py --device both --out gpu-check/      # on a GPU machine
    python tools/gpu_check.py --device cpu --quick --out /tmp/gc  # the CPU half (CI smoke)
    tools/gpu_check.sh WHEELS_DIR gpu-check/                      # install, then run

For each device it runs a fixed set in that device's own workers (a subprocess per device:
``CUDA_VISIBLE_DEVICES=""`` and ``JAX_PLATFORMS=cpu`` make the CPU half; a fresh result cache
each, so every answer is live): Dense/Conv2D/LSTM/MultiHeadAttention under float32,
mixed_float16 and mixed_bfloat16, Dense quantized to int8 (``int8_from_float32``: the layer
``quantize`` supports), ``ops.matmul`` on float32 and int8 (also at a shape
``torch._int_mm`` takes), and Dense with ``precision="highest"`` beside the default. It writes:

* ``DIR/<device>/<part>/``: an atlas per part (``atlas.json``, the static site), and
  ``DIR/<device>/results.jsonl``: every answer, with its ``environment`` and trace kernels;
* ``DIR/diff/<part>.html|json``: the ``atlas diff`` CPU -> GPU (dtype changes);
* ``DIR/report.json`` and ``DIR/report.md``: the devices and matmul settings in effect per
  backend, the dtype changes, the value changes (largest relative difference per answer), the
  kernel paths, and probe-vs-bare timings as ratios (``benchmarks/probe.py`` on each device).

With ``--device cuda`` or ``both`` it first checks that jax and torch see the GPU and stops,
saying which does not. ``--quick`` is the reduced set (Dense and ``ops.matmul`` on numpy and
torch). Budget: under 8 minutes on one GPU for the full set.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the package (when not installed) and benchmarks/

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


# ------------------------------------------------------------------- one device's half


def _parts(quick: bool) -> dict[str, dict]:
    layers = ["Dense"] if quick else list(LAYERS)
    return {
        "layers": {
            "targets": layers,
            "input_dtypes": ["float32"],
            "policies": ["float32", "mixed_bfloat16"] if quick else list(POLICIES),
        },
        "int8": {
            "targets": ["Dense"],
            "input_dtypes": ["float32"],
            "policies": ["int8_from_float32"],
        },
        "matmul": {
            "targets": ["ops.matmul"],
            "input_dtypes": ["float32", "int8"],
            "policies": ["float32"],
        },
    }


def run_half(device: str, out: Path, backends: list[str], quick: bool) -> None:
    """In this process's own pool: every part's survey made an atlas, plus the extra probes;
    every answer written to ``results.jsonl``."""
    import dtype_explorer as dx
    from dtype_explorer.analyses import save_atlas, survey
    from dtype_explorer.records import Atlas

    out.mkdir(parents=True, exist_ok=True)
    answers = []
    for name, part in _parts(quick).items():
        found = survey(**part, backends=backends, progress=False, use_cache=False)
        save_atlas(Atlas.from_survey(found), _mkdir(out / name))
        answers.extend(found.results)
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
    with open(out / "results.jsonl", "w", encoding="utf-8") as file:
        for answer in answers:
            file.write(answer.to_json() + "\n")
    dx.pool.shutdown()


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


# ------------------------------------------------------------------------ the whole run


def device_env(device: str, out: Path) -> dict[str, str]:
    """The environment of one device's half: its own cache; the CPU half hides the GPU."""
    env = {
        **os.environ,
        "DTYPE_EXPLORER_CACHE_DIR": str(out / "cache"),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
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


def timings(device: str, out: Path, backends: list[str], quick: bool) -> list[dict]:
    """``benchmarks/probe.py`` on this device: bare Keras vs the probe, as ratios."""
    repeats = "1" if quick else "5"
    backends = backends[:1] if quick else backends
    command = [sys.executable, str(ROOT / "benchmarks" / "probe.py"), "--json"]
    done = subprocess.run(
        [*command, "--repeats", repeats, "--backends", ",".join(backends)],
        env=device_env(device, out),
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


def compare(devices: list[str], out: Path) -> dict:
    """The report: per device each backend's settings, and (two devices) the diff."""
    from dtype_explorer.records import Atlas

    answers = {d: {answer_key(r): r for r in load(out / d)} for d in devices}
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
        diff_dir = _mkdir(out / "diff")
        for part in _parts(quick=False):
            if not (out / before / part).exists() or not (out / after / part).exists():
                continue
            diff = Atlas.load(out / before / part).diff(Atlas.load(out / after / part))
            (diff_dir / f"{part}.json").write_text(diff.to_json(), encoding="utf-8")
            (diff_dir / f"{part}.html").write_text(diff.to_html(), encoding="utf-8")
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
    lines = ["# gpu_check", "", f"elapsed: {report['elapsed_s']} s", ""]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=("cuda", "cpu", "both"), default="both")
    parser.add_argument("--out", type=Path, default=Path("gpu-check"))
    parser.add_argument("--quick", action="store_true", help="the reduced set (CI smoke)")
    parser.add_argument(
        "--backends", default=None, help=f"default {BACKENDS} ({QUICK_BACKENDS} with --quick)"
    )
    parser.add_argument("--half", choices=("cuda", "cpu"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    backends = (args.backends or (QUICK_BACKENDS if args.quick else BACKENDS)).split(",")
    if args.half:
        run_half(args.half, args.out, backends, args.quick)
        return 0
    started = time.perf_counter()
    devices = ["cpu", "cuda"] if args.device == "both" else [args.device]
    if "cuda" in devices:
        missing = check_gpu()
        if missing:
            print("gpu_check: the GPU is not seen by " + "; ".join(missing), file=sys.stderr)
            return 2
    report_timings = {}
    for device in devices:
        where = args.out / device
        command = [sys.executable, __file__, "--half", device, "--out", str(where)]
        command += ["--backends", ",".join(backends)] + (["--quick"] if args.quick else [])
        subprocess.run(command, env=device_env(device, where), check=True)
        report_timings[device] = timings(device, where, backends, args.quick)
    report = compare(devices, args.out)
    report["timings"] = report_timings
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    (args.out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (args.out / "report.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
