"""Run a script as plain tf_keras (the Keras 2 engine's site alone on the path, no
dtype-explorer) or inside the Keras 2 engine's own process (dtype-explorer there), and read the
``DX-OUT`` JSON line it prints last: what the tests that put the tool beside raw tf_keras share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from dtype_explorer import engines

#: The prefix of the line such a script prints its answer on.
PREFIX = "DX-OUT "


def dx_out(text: str) -> Any:
    """The JSON document on the last ``DX-OUT`` line of ``text`` (fails the test with the end of
    ``text`` when there is none)."""
    lines = [line for line in text.splitlines() if line.startswith(PREFIX)]
    assert lines, text[-3000:]
    return json.loads(lines[-1].removeprefix(PREFIX))


def plain_tf_keras(engine: Any, *args: str, timeout: float = 600) -> Any:
    """``python *args`` with only the engine's site on ``PYTHONPATH`` (``TF_USE_LEGACY_KERAS``
    set): raw tf_keras. A failed run fails the test with its stderr."""
    env = dict(os.environ, PYTHONPATH=engine.site, TF_USE_LEGACY_KERAS="1")
    done = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dx_out(done.stdout)


def in_engine(engine: Any, script: str, *args: str, timeout: float = 900) -> Any:
    """``script`` run by the engine's own interpreter with dtype-explorer importable there
    (``engines.script_command``). A failed run fails the test with its stderr."""
    command = engines.script_command(engine.spec, script, list(args))
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return dx_out(done.stdout)
