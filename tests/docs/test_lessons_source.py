"""The site publishes the lessons as committed (issue 39 item 26): JupyterLab autosaves whatever a
reader typed into a lesson, and ``./dev.sh docs`` must not execute and publish it. The hook
(``docs/_hooks/lessons.py``) is run on a lesson in a real git repository whose working copy was
edited after the commit, executing it in a real kernel, and on one never committed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_hooks"))

import lessons  # noqa: E402


def _git(repo: Path, *args: str) -> None:
    who = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", *who, *args], cwd=repo, check=True, capture_output=True)


def _lesson(path: Path, code: str) -> None:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(notebook, path)


@pytest.fixture
def repo(tmp_path) -> Path:
    """A project with ``docs/lessons -> ../notebooks``, one lesson committed, then edited."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "lessons").symlink_to("../notebooks")
    _git(tmp_path, "init", "-q")
    _lesson(tmp_path / "notebooks" / "01.ipynb", "print('as committed')")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "lesson")
    _lesson(tmp_path / "notebooks" / "01.ipynb", "print('typed by the reader, autosaved')")
    return tmp_path


def _printed(path: Path) -> str:
    cells = nbformat.read(path, as_version=4).cells
    return "".join(o.get("text", "") for c in cells for o in c.get("outputs", []))


def test_the_executed_lesson_is_the_committed_one_not_the_autosaved_copy(repo, tmp_path):
    target = tmp_path / "executed.ipynb"
    lessons.execute(repo / "docs" / "lessons" / "01.ipynb", target, label="lessons/01.ipynb")
    assert "as committed" in _printed(target)
    assert "typed by the reader" not in _printed(target)
    # the working copy is left as the reader saved it
    saved = nbformat.read(repo / "notebooks" / "01.ipynb", as_version=4)
    assert "typed by the reader" in saved.cells[0].source


def test_rendering_without_execution_uses_the_committed_copy_too(repo, monkeypatch):
    monkeypatch.setenv("DTYPE_EXPLORER_DOCS_EXECUTE", "0")
    source = repo / "docs" / "lessons" / "01.ipynb"
    file = SimpleNamespace(src_uri="lessons/01.ipynb", abs_src_path=str(source))
    lessons.on_files([file], {"config_file_path": str(repo / "mkdocs.yml")})
    rendered = nbformat.read(file.abs_src_path, as_version=4)
    assert Path(file.abs_src_path).parent == repo / lessons.BUILD_DIR
    assert rendered.cells[0].source == "print('as committed')"


def test_a_lesson_never_committed_fails_the_build_saying_so(repo):
    _lesson(repo / "notebooks" / "02.ipynb", "print('new')")
    with pytest.raises(PluginError, match=r"notebooks/02.ipynb is not committed.*commit it"):
        lessons.committed(repo / "docs" / "lessons" / "02.ipynb", label="lessons/02.ipynb")
