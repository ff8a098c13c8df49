"""The wheels the GPU run carries (issue 42), fetched on a machine that reaches the package index.

    tools/gpu_wheels.sh DIR                     # Python 3.12 (the GPU machine's), <= 60 MiB
    tools/gpu_wheels.sh DIR --python 3.11       # the same set for this machine (CI's rehearsal)

The GPU machine has CUDA builds of jax and torch, numpy and many common packages, no Keras and
no network. This script builds dtype-explorer's own wheel (with the widget's bundle: node must be
at hand, as for the editable install), resolves the whole dependency closure for the target
Python on manylinux x86-64 (``pip install --dry-run --report``: metadata only), drops what the
GPU machine already holds (``tools/gpu_machine.txt``) and what must never travel (jax, jaxlib,
torch, numpy, CUDA and NVIDIA wheels: the machine's own are used), then downloads exactly the
rest with ``--no-deps``. It prints each wheel and the total, writes ``DIR/wheels.json`` (the
set, for the report), and exits 1 when the set is over the limit (60 MiB by default), 2 when a
wheel cannot be had for that Python and platform.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MACHINE = ROOT / "tools" / "gpu_machine.txt"
#: Never carried, whatever the machine list says: the machine's own CUDA builds are used.
NEVER = re.compile(r"^(jax|jaxlib|jax-cuda.*|torch|numpy|triton|nvidia-.*|cuda-.*|tensorflow.*)$")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")
LIMIT_MIB = 60.0


def normalize(name: str) -> str:
    """A distribution's name as the index compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def machine_packages() -> set[str]:
    """The GPU machine's own packages (one name a line; ``#`` starts a comment)."""
    lines = MACHINE.read_text(encoding="utf-8").splitlines()
    return {normalize(n) for n in (line.split("#")[0].strip() for line in lines) if n}


def target_args(python: str) -> list[str]:
    """pip's options that pick wheels for another Python on manylinux x86-64."""
    abi = "cp" + python.replace(".", "")
    args = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    args += ["--abi", abi, "--abi", "abi3", "--abi", "none"]
    for platform in PLATFORMS:
        args += ["--platform", platform]
    return args


def pip(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    return subprocess.run(command, capture_output=True, text=True)


def build_own_wheel(into: Path) -> Path:
    """dtype-explorer's wheel, built from this checkout (the widget's bundle in it)."""
    done = pip("wheel", "--no-deps", "-q", "-w", str(into), str(ROOT))
    if done.returncode:
        raise SystemExit(f"gpu_wheels: building dtype-explorer's wheel failed:\n{done.stderr}")
    return next(into.glob("dtype_explorer-*.whl"))


def resolve(wheel: Path, python: str, constraints: Path) -> list[tuple[str, str]]:
    """Every distribution the wheel needs on that Python, as ``(name, version)``."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        done = pip(
            "install", "--dry-run", "--ignore-installed", "-q", "--report", str(report),
            "--target", str(Path(scratch) / "t"), "-c", str(constraints),
            *target_args(python), str(wheel),
        )  # fmt: skip
        if done.returncode:
            raise SystemExit(f"gpu_wheels: no wheel set for Python {python}:\n{done.stderr}")
        found = json.loads(report.read_text(encoding="utf-8"))["install"]
    return [(normalize(i["metadata"]["name"]), i["metadata"]["version"]) for i in found]


def download(pins: list[str], python: str, into: Path) -> None:
    if not pins:
        return
    done = pip("download", "--no-deps", "-q", "-d", str(into), *target_args(python), *pins)
    if done.returncode:
        raise SystemExit(f"gpu_wheels: downloading {pins} failed:\n{done.stderr}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dir", type=Path, help="where the wheels go (made if missing)")
    parser.add_argument("--python", default="3.12", help="the target Python (default 3.12)")
    parser.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    parser.add_argument("--own-wheel", type=Path, help="a dtype-explorer wheel built already")
    parser.add_argument("--constraints", type=Path, default=ROOT / "constraints.txt")
    args = parser.parse_args(argv)
    out = args.dir
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.whl"):
        old.unlink()
    if args.own_wheel:
        own = out / args.own_wheel.name
        own.write_bytes(args.own_wheel.read_bytes())
    else:
        own = build_own_wheel(out)
    has = machine_packages()
    closure = resolve(own, args.python, args.constraints)
    carried = [
        (n, v) for n, v in closure if n != "dtype-explorer" and n not in has and not NEVER.match(n)
    ]
    left = sorted({n for n, _ in closure} - {n for n, _ in carried} - {"dtype-explorer"})
    download([f"{n}=={v}" for n, v in carried], args.python, out)
    wheels = sorted(out.glob("*.whl"))
    sizes = {w.name: w.stat().st_size for w in wheels}
    total = sum(sizes.values()) / 2**20
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"{size / 2**20:8.2f} MiB  {name}")
    print(f"{total:8.2f} MiB  total, {len(wheels)} wheels for Python {args.python}")
    print(f"the machine's own: {', '.join(left)}")
    record = {
        "python": args.python,
        "total_mib": round(total, 2),
        "wheels": sizes,
        "machine_own": left,
    }
    (out / "wheels.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    if total > args.limit_mib:
        print(
            f"gpu_wheels: {total:.1f} MiB is over the {args.limit_mib} MiB limit", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
