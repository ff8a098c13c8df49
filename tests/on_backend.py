"""Run a short script under another Keras backend in a fresh process (Keras fixes its backend
at import) and read the JSON line it prints last: what tests that compare backends share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])


def json_on(backend: str, script: str, timeout: float = 300, *, site: str | None = None) -> Any:
    """``script`` run with ``KERAS_BACKEND=backend`` (this checkout first on the path, then
    the session's own ``PYTHONPATH``; with ``site``, an engine's directory alone instead: that
    Keras release, raw, no dtype-explorer); the JSON document on its last line of output. A
    failed run fails the test with its stderr."""
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": path if site is None else site}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
