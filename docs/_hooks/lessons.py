"""mkdocs hook: the lessons are executed when the site is built, and the pages show those outputs.

Each ``lessons/*.ipynb`` (``docs/lessons`` is a link to ``notebooks/``) is run top to bottom
(``lesson_execution.run``: nbclient, in a fresh kernel of this Python), its copy written to
``.cache/lessons/`` (a build directory, never committed), and mkdocs-jupyter renders that copy. The
committed notebooks are not touched. The workers run Binder's backends, jax, tensorflow and numpy
(``DTYPE_EXPLORER_BACKENDS``, unless set: the lessons ask tensorflow by name), and the kernel
inherits the build's fresh result cache (``examples.py``), so no output comes from an earlier
run. The saved widget state (nbclient's ``store_widget_state``) goes with the copy, and the page
draws it as a snapshot (``examples.py``), every explorer's answers in it (``lesson_execution``).
A lesson written for the Keras 2 kernel (its kernelspec is a ``dtype-explorer-tf_keras``
one: 7b) runs on that kernel, registered (and its engine created) by
``dx.engines.kernel("tf_keras")``.

A cell that raises fails the build, naming the lesson, the cell and Keras's error. Set
``DTYPE_EXPLORER_DOCS_EXECUTE=0`` to render the committed outputs instead (a quick local build).

``DTYPE_EXPLORER_DOCS_EXECUTED=<folder>`` names lessons executed earlier by the same executor
(the test run executes each lesson once, in Binder's environment, and builds the site from
those copies: :func:`executed_earlier`): a copy there whose cells are the committed lesson's,
executed without an error, is published instead of executing the lesson again; any other
lesson is executed.

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
from pathlib import Path
from typing import Any

import lesson_execution
import nbformat
from mkdocs.exceptions import PluginError
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

BUILD_DIR = Path(".cache") / "lessons"
#: Binder's backends (binder/start), those the committed outputs show: the lessons ask tensorflow
#: by name, torch never.
BACKENDS = "jax,tensorflow,numpy"
KERAS2_KERNEL = "dtype-explorer-tf_keras"  # the Keras 2 kernels' names (runtime/_kernelspec.py)
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours of IPython's traceback
log = logging.getLogger("mkdocs.hooks.lessons")


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
    earlier = os.environ.get("DTYPE_EXPLORER_DOCS_EXECUTED")
    folder = Path(earlier) if earlier else None
    for file in _lessons(files):
        started = time.monotonic()
        executed = out_dir / Path(file.src_uri).name
        source = Path(file.abs_src_path)
        found = executed_earlier(source, folder, label=file.src_uri)
        if found is not None:
            nbformat.write(found, executed)
            log.info(f"{file.src_uri}: published as executed earlier in this run ({folder})")
        else:
            execute(source, executed, label=file.src_uri)
            seconds[Path(file.src_uri).stem] = time.monotonic() - started
        site_badges(executed)
        file.abs_src_path = str(executed)


#: A lesson's "Open in Colab" badge, an image on colab.research.google.com.
COLAB_BADGE = re.compile(
    r"\[!\[Open in Colab\]\(https://colab\.research\.google\.com/assets/colab-badge\.svg\)\]"
    r"\((https://colab\.research\.google\.com/[^)\s]+)\)"
)


def site_badges(path: Path) -> None:
    """The published copy's Colab badge as a link in the site's own style: a page of the site
    fetches nothing from elsewhere (``tests/docs/test_site.py``), and the badge's image is
    Colab's. The committed lesson keeps the badge (GitHub, JupyterLab and Colab draw it)."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = COLAB_BADGE.sub(
                r'<a class="md-button" href="\1">Open in Colab</a>', cell.source
            )
    nbformat.write(notebook, path)


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
    try:
        # The kernel alone gets the backends (the gallery, in this process, asks torch too).
        lesson_execution.run(
            notebook,
            folder=source.parent,
            kernel_name=_kernel_name(notebook),
            env={"DTYPE_EXPLORER_BACKENDS": BACKENDS, **os.environ},
        )
    except CellExecutionError as exc:
        said = ANSI.sub("", str(exc))
        raise PluginError(f"{label}: a cell raised when the lesson was executed:\n{said}") from exc
    except (CellTimeoutError, DeadKernelError) as exc:
        raise PluginError(f"{label}: the lesson did not finish: {exc}") from exc
    nbformat.write(notebook, target)


def executed_earlier(source: Path, folder: Path | None, *, label: str) -> Any | None:
    """The copy of lesson ``source`` in ``folder`` (``DTYPE_EXPLORER_DOCS_EXECUTED``), when it
    is this very lesson as committed, executed to the end: its cells' sources are the committed
    ones and no output is an error. ``None`` otherwise (the lesson is then executed here).

    Args:
        source: the lesson's path.
        folder: where the earlier executions were written, or ``None``.
        label: how the build names the lesson in the log.

    Returns:
        The executed notebook, or ``None``.
    """
    copy = folder / source.name if folder is not None else None
    if copy is None or not copy.is_file():
        return None
    lesson, executed = committed(source, label=label), nbformat.read(copy, as_version=4)
    same = [(c.cell_type, c.source) for c in lesson.cells] == [
        (c.cell_type, c.source) for c in executed.cells
    ]
    ran = [c for c in executed.cells if c.cell_type == "code"]
    if not same or any(o.get("output_type") == "error" for c in ran for o in c.outputs):
        log.info(f"{label}: the copy in {folder} is not this lesson run to the end: executed here")
        return None
    return executed


def _kernel_name(notebook: Any) -> str:
    """``python3`` (this Python, Keras 3), or the Keras 2 kernel for a lesson written for it."""
    asked = notebook.metadata.get("kernelspec", {}).get("name", "")
    if not asked.startswith(KERAS2_KERNEL):
        return "python3"
    from dtype_explorer import engines

    engine, _ = engines.kernel("tf_keras", progress=False)
    return engine.kernel_name
