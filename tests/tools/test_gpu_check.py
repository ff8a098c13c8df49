"""The prepared GPU run, rehearsed on CPU as CI runs it (issues 28, 42): the wheel set for the GPU
machine's Python 3.12 built and sized; the same set for this Python installed with
``--no-index --no-deps --target``, TensorFlow hidden, and ``tools/gpu_check.sh ... --device cpu
--quick`` run from there (real workers); its report folder, answers and atlases read back. The
wheel sets need the package index: without it these tests fail, never skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import gpu_check
import gpu_wheels

from dtype_explorer.records import Atlas, ProbeResult

ROOT = Path(__file__).resolve().parents[2]
#: Imported first by every process of the rehearsal (PYTHONPATH): TensorFlow is not there.
HIDE_TENSORFLOW = """
import sys

sys.modules["tensorflow"] = None  # import tensorflow: ModuleNotFoundError; find_spec: None
"""


def wheels(into: Path, *options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "tools" / "gpu_wheels.py"), str(into), *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def wheel_sets(tmp_path_factory) -> tuple[Path, Path]:
    """The Python 3.12 set (the GPU machine's) and this Python's, sharing one own wheel."""
    gpu = tmp_path_factory.mktemp("wheels312")
    done = wheels(gpu)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    here = tmp_path_factory.mktemp("wheels-here")
    own = next(gpu.glob("dtype_explorer-*.whl"))
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    done = wheels(here, "--python", python, "--own-wheel", str(own))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return gpu, here


def test_the_gpu_wheel_set_is_for_python_312_and_fits(wheel_sets):
    gpu, _ = wheel_sets
    record = json.loads((gpu / "wheels.json").read_text())
    names = {gpu_wheels.normalize(w.split("-")[0]) for w in record["wheels"]}
    assert record["python"] == "3.12" and record["total_mib"] <= 60
    assert {"keras", "dtype-explorer", "pydantic", "pydantic-core"} <= names
    assert not {n for n in names if gpu_wheels.NEVER.match(n)}, names  # the machine's own
    assert not names & gpu_wheels.machine_packages()
    for wheel in record["wheels"]:
        tags = wheel.removesuffix(".whl").split("-")[-3:]
        assert tags[0].startswith(("py3", "cp312", "cp310", "py2")), wheel
        assert tags[2] == "any" or "x86_64" in tags[2], wheel
    own = next(gpu.glob("dtype_explorer-*.whl"))
    assert "dtype_explorer/static/widget.js" in zipfile.ZipFile(own).namelist()


def test_a_set_over_the_limit_fails(wheel_sets, tmp_path):
    gpu, _ = wheel_sets
    own = next(gpu.glob("dtype_explorer-*.whl"))
    done = wheels(tmp_path, "--own-wheel", str(own), "--limit-mib", "1")
    assert done.returncode == 1 and "over the 1.0 MiB limit" in done.stderr


def test_the_rehearsal_runs_from_the_carried_wheels_without_tensorflow(wheel_sets, tmp_path):
    _, here = wheel_sets
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_TENSORFLOW)
    out, work, site = tmp_path / "report", tmp_path / "work", tmp_path / "site"
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "PYTHONPATH": str(hide),
        "GPU_CHECK_SITE": str(site),
    }
    command = [str(ROOT / "tools" / "gpu_check.sh"), str(here), str(out)]
    options = ["--device", "cpu", "--quick", "--backends", "numpy,tensorflow,torch"]
    done = subprocess.run(
        [*command, *options, "--work", str(work), "--budget", "100000"],
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    # The package and Keras came from the carried wheels, and TensorFlow was left out, said so.
    assert Path(report["installed_from"]).parent == site
    assert report["backends_left_out"] == {
        "tensorflow": "tensorflow is not installed on this machine"
    }
    assert "tensorflow left out" in (out / "report.md").read_text()
    assert report["versions"]["cpu"]["keras"] and report["dropped"] == {"cpu": {}}
    for part in ("layers", "matmul", "more_layers", "int8"):
        atlas = Atlas.load(work / "cpu" / part)
        assert atlas.cells and set(atlas.backends) == {"numpy", "torch"}
    answers = [
        ProbeResult.from_json(line) for line in (out / "results-cpu.jsonl").read_text().splitlines()
    ]
    assert answers and all(a.environment.get("device") == "CPU" for a in answers)
    assert report["devices"]["cpu"]["torch"]["torch.float32_matmul_precision"] == "highest"
    kernels = report["kernels"]["cpu"]
    assert any("int32 fallback (cpu" in k for k in kernels.values())
    assert [t["layer"] for t in report["timings"]["cpu"]] == ["Dense"]
    assert report["timings"]["cpu"][0]["ratio"] > 0
    assert "## cpu" in (out / "report.md").read_text()
    assert gpu_check.check_report_folder(out) == []
    assert sorted(f.name for f in out.iterdir()) == [
        "report.json",
        "report.md",
        "results-cpu.jsonl",
    ]


def test_the_budget_drops_optional_parts_first():
    essential, optional = gpu_check.parts(quick=False)[0], gpu_check.parts(quick=False)[3]
    assert gpu_check.plan_part(essential, 400, 3.0, 1.0) is None
    assert gpu_check.plan_part(optional, 10, None, 5.0) is None  # nothing measured yet
    assert gpu_check.plan_part(optional, 10, 1.0, 20.0) is None
    assert gpu_check.plan_part(optional, 10, 3.0, 20.0) == (
        "estimated 30 s (10 probes at 3.0 s), 20 s left"
    )
    assert gpu_check.plan_part(optional, 10, None, -1.0) == "no time left (-1 s)"
    assert [p.name for p in gpu_check.parts(quick=False) if p.essential] == ["layers", "matmul"]


def test_a_report_folder_over_its_limits_is_named(tmp_path):
    for i in range(9):
        (tmp_path / f"f{i}").write_text("x")
    assert gpu_check.check_report_folder(tmp_path) == ["9 files (at most 8)"]


def test_the_gpu_half_stops_when_no_gpu_is_seen(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--device", "cuda"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "the GPU is not seen by jax" in done.stderr and "torch" in done.stderr
