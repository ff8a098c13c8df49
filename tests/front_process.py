"""The CLI's front run in a process of its own under a wrapper script that reports, at exit,
what the front imported (``DX_FRONT_REPORT``): shared by the cached-answer and first-run tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_front(
    wrapper: str,
    args: tuple[str, ...],
    *,
    cache_dir: Path,
    report: Path,
    dropped: tuple[str, ...] = ("KERAS_BACKEND",),
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess, object]:
    """``python -c wrapper *args`` with this checkout first on the path, the cache in
    ``cache_dir``, the variables in ``dropped`` unset; its result and the JSON it reported."""
    environ = {
        **{k: v for k, v in os.environ.items() if k not in dropped},
        "DTYPE_EXPLORER_CACHE_DIR": str(cache_dir),
        "DX_FRONT_REPORT": str(report),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return done, json.loads(report.read_text())
