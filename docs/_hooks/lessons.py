"""mkdocs hook: the lessons are executed when the site is built, and the pages show those outputs.

Each ``lessons/*.ipynb`` (``docs/lessons`` is a link to ``notebooks/``) is run top to bottom with
nbclient in a fresh kernel of this Python, its copy written to ``.cache/lessons/`` (a build
directory, never committed), and mkdocs-jupyter renders that copy. The committed notebooks are
not touched. The workers run Binder's backends, jax, tensorflow and numpy
(``DTYPE_EXPLORER_BACKENDS``, unless set: the lessons ask tensorflow by name), and the kernel
inherits the build's fresh result cache (``examples.py``), so no output comes from an earlier
run. The saved widget state (nbclient's ``store_widget_state``) goes with the copy, and the page
draws it as a snapshot (``examples.py``). An explorer answers in the background, after its cell
is done: a last cell, run and then dropped from the copy (:data:`SETTLE`), waits for every
``DtypeExplorer``'s answers and sends its whole state again, so that the snapshot shows them.
A lesson written for the Keras 2 kernel (its kernelspec is a ``dtype-explorer-tf_keras``
one: 7b) runs on that kernel, registered (and its engine created) by
``dx.engines.kernel("tf_keras")``.

A cell that raises fails the build, naming the lesson, the cell and Keras's error. Set
``DTYPE_EXPLORER_DOCS_EXECUTE=0`` to render the committed outputs instead (a quick local build).

The site is built from the lessons **as committed** (``git show HEAD:notebooks/…``, a clean
copy), never from the working copy: JupyterLab autosaves whatever the reader typed into a
lesson, and the build would otherwise execute and publish it. A lesson that differs from its
committed version is named in the log (its edits are not published); one that was never
committed fails the build, asking for it to be committed (:func:`committed`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat
from mkdocs.exceptions import PluginError
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

BUILD_DIR = Path(".cache") / "lessons"
#: Binder's backends (binder/start), those the committed outputs show: the lessons ask tensorflow
#: by name, torch never.
BACKENDS = "jax,tensorflow,numpy"
CELL_TIMEOUT = 600  # seconds: lesson 7 creates Keras engines from the package index
KERAS2_KERNEL = "dtype-explorer-tf_keras"  # the Keras 2 kernels' names (runtime/_kernelspec.py)
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours of IPython's traceback
log = logging.getLogger("mkdocs.hooks.lessons")
#: The cell run after the lesson's own (and dropped from the copy): every explorer's answers,
#: which arrive after its cell ended, go into the saved widget state.
SETTLE = f"""
from ipywidgets.widgets.widget import _instances as _dx_widgets
from dtype_explorer import DtypeExplorer as _DxExplorer
for _dx_widget in [w for w in list(_dx_widgets.values()) if isinstance(w, _DxExplorer)]:
    _dx_widget.wait(timeout={CELL_TIMEOUT})
    _dx_widget.send_state()
"""


def on_files(files: Any, config: Any) -> Any:
    out_dir = Path(config["config_file_path"]).parent / BUILD_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    if os.environ.get("DTYPE_EXPLORER_DOCS_EXECUTE", "1") == "0":
        log.info("lessons: rendered with their committed outputs (DTYPE_EXPLORER_DOCS_EXECUTE=0)")
        for file in _lessons(files):
            copy = out_dir / Path(file.src_uri).name
            nbformat.write(committed(Path(file.abs_src_path), label=file.src_uri), copy)
            file.abs_src_path = str(copy)
        return files
    seconds = {}
    with _own_kernels():
        _execute_lessons(files, out_dir, seconds)
    if seconds:
        each = ", ".join(f"{name} {s:.0f}s" for name, s in seconds.items())
        log.info(f"lessons executed in {sum(seconds.values()):.0f}s: {each}")
    return files


@contextlib.contextmanager
def _own_kernels() -> Iterator[None]:
    """A Jupyter registry of the build's own (``JUPYTER_DATA_DIR``): the Keras 2 kernel it
    registers points at the build's engines, which may not outlive it, and must never replace
    the user's kernel of the same name."""
    before = os.environ.get("JUPYTER_DATA_DIR")
    with tempfile.TemporaryDirectory(prefix="dx-docs-kernels-") as data_dir:
        os.environ["JUPYTER_DATA_DIR"] = data_dir
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("JUPYTER_DATA_DIR", None)
            else:
                os.environ["JUPYTER_DATA_DIR"] = before


def _lessons(files: Any) -> list[Any]:
    return [f for f in files if f.src_uri.startswith("lessons/") and f.src_uri.endswith(".ipynb")]


def _execute_lessons(files: Any, out_dir: Path, seconds: dict[str, float]) -> None:
    for file in _lessons(files):
        started = time.monotonic()
        executed = out_dir / Path(file.src_uri).name
        execute(Path(file.abs_src_path), executed, label=file.src_uri)
        file.abs_src_path = str(executed)
        seconds[Path(file.src_uri).stem] = time.monotonic() - started


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def committed(source: Path, *, label: str) -> Any:
    """The notebook ``source`` as committed at ``HEAD``, never its working copy.

    Args:
        source: the lesson's path (``docs/lessons`` links to ``notebooks/``: resolved first).
        label: how the build names it in errors and the log.

    Returns:
        The committed notebook (an nbformat node); a working copy that differs is logged.

    Raises:
        PluginError: ``source`` is outside a git work tree, or was never committed.

    Example:
        >>> lesson = Path("notebooks/01_explorer.ipynb")
        >>> committed(lesson, label="lessons/01_explorer.ipynb").nbformat
        4
    """
    real = source.resolve()
    top = _git(real.parent, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise PluginError(
            f"{label}: the site is built from the committed lessons, and {real} is not in a git "
            f"work tree (git said: {top.stderr.strip()})"
        )
    path = real.relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    shown = _git(real.parent, "show", f"HEAD:{path}")
    if shown.returncode != 0:
        raise PluginError(
            f"{label}: {path} is not committed; the site publishes the committed lessons only "
            f"(commit it to publish it). Received from git: {shown.stderr.strip()}"
        )
    if _git(real.parent, "diff", "--quiet", "HEAD", "--", path).returncode != 0:
        log.info(f"{label}: its working copy differs from HEAD's; the committed one is published")
    return nbformat.reads(shown.stdout, as_version=4)


def execute(source: Path, target: Path, *, label: str) -> None:
    """Run the notebook ``source``, as committed, in a fresh kernel (in ``source``'s folder)
    and write it, with outputs, to ``target``.

    Raises:
        PluginError: a cell raised, timed out or killed the kernel (the lesson and cell named).
    """
    notebook = committed(source, label=label)
    settle = nbformat.v4.new_code_cell(SETTLE)
    notebook.cells.append(settle)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name=_kernel_name(notebook),
        resources={"metadata": {"path": str(source.parent)}},
        store_widget_state=True,
    )
    try:
        # The kernel alone gets the backends (the gallery, in this process, asks torch too).
        client.execute(env={"DTYPE_EXPLORER_BACKENDS": BACKENDS, **os.environ})
    except CellExecutionError as exc:
        said = ANSI.sub("", str(exc))
        raise PluginError(f"{label}: a cell raised when the lesson was executed:\n{said}") from exc
    except (CellTimeoutError, DeadKernelError) as exc:
        raise PluginError(f"{label}: the lesson did not finish: {exc}") from exc
    notebook.cells.remove(settle)
    nbformat.write(notebook, target)
    timing = settle.metadata.get("execution", {})
    if "shell.execute_reply" in timing:  # what waiting for the explorers' answers cost
        waited = _seconds(timing["shell.execute_reply"]) - _seconds(timing["iopub.execute_input"])
        log.info(f"{label}: the widget snapshot waited {waited:.1f}s for the explorers' answers")


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _kernel_name(notebook: Any) -> str:
    """``python3`` (this Python, Keras 3), or the Keras 2 kernel for a lesson written for it."""
    asked = notebook.metadata.get("kernelspec", {}).get("name", "")
    if not asked.startswith(KERAS2_KERNEL):
        return "python3"
    from dtype_explorer import engines

    engine, _ = engines.kernel("tf_keras", progress=False)
    return engine.kernel_name
