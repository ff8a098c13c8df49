"""The prepared GPU run's CPU half, as CI runs it (issue 28): ``tools/gpu_check.py --device cpu
--quick`` in a subprocess, real workers, its atlases, answers and report read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dtype_explorer.records import Atlas, ProbeResult

ROOT = Path(__file__).resolve().parents[2]


def test_the_cpu_half_writes_atlases_answers_and_a_report(tmp_path):
    out = tmp_path / "gc"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--device", "cpu"]
    done = subprocess.run(
        [*command, "--quick", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for part in ("layers", "int8", "matmul"):
        atlas = Atlas.load(out / "cpu" / part)
        assert atlas.cells and set(atlas.backends) == {"numpy", "torch"}
    answers = [
        ProbeResult.from_json(line)
        for line in (out / "cpu" / "results.jsonl").read_text().splitlines()
    ]
    assert answers and all(a.environment.get("device") == "CPU" for a in answers)
    report = json.loads((out / "report.json").read_text())
    assert report["devices"]["cpu"]["torch"]["torch.float32_matmul_precision"] == "highest"
    kernels = report["kernels"]["cpu"]
    assert any("int32 fallback (cpu" in k for k in kernels.values())
    assert [t["layer"] for t in report["timings"]["cpu"]] == ["Dense"]
    assert report["timings"]["cpu"][0]["ratio"] > 0
    assert "## cpu" in (out / "report.md").read_text()


def test_the_gpu_half_stops_when_no_gpu_is_seen(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--device", "cuda"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "the GPU is not seen by jax" in done.stderr and "torch" in done.stderr
