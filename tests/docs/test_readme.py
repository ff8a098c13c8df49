"""The README's code (issue 29): every ``python`` block runs pasted alone into a plain
``python script.py`` (its own imports, no guard), and where an output block follows it, the
script prints exactly that. The README stays short: two screens."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```\n(?:```\n(?P<output>.*?)^```\n)?", re.M | re.S)
BLOCKS = [(m.group("code"), m.group("output")) for m in BLOCK.finditer(README)]
MAX_LINES = 80  # two screens


def test_the_readme_is_short_and_has_an_example():
    assert len(README.splitlines()) <= MAX_LINES
    assert BLOCKS and any(output for _, output in BLOCKS)


@pytest.mark.parametrize("code, output", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs_as_a_plain_script(code, output, tmp_path):
    script = tmp_path / "script.py"
    script.write_text(code, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "DTYPE_EXPLORER_CACHE_DIR": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    if output is not None:
        shown = f"the README shows:\n{output}\nthe script printed:\n{done.stdout}"
        assert done.stdout == output, shown
