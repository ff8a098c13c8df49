"""How a lesson is executed, once, and how its checked cells are compared: shared by the docs
build (``lessons.py``) and the Binder test (``tests/notebooks/``), which runs this file as a
script in Binder's own environment. No mkdocs here: Binder does not install it.

A lesson runs top to bottom with nbclient in a fresh kernel, its widgets' state saved
(``store_widget_state``). An explorer answers in the background, after its cell is done: a last
cell, run and then dropped (:data:`SETTLE`), waits for every ``DtypeExplorer``'s answers and
sends its whole state again, so that the saved state shows them. nbclient keeps what a reader
sees (a cleared output is cleared, an updated display updated), so the executed copy can be
published as it is.

The cells whose first line is ``# NBVAL_CHECK_OUTPUT`` state a checked fact: the executed copy
must show what the committed lesson shows, compared by nbval's ``--nbval-lax`` rule
(:func:`checked_differences`): streams joined per name, every output field and MIME type but
those nbval skips (metadata, execution counts, tracebacks, images, widget model ids).
``pytest --nbval-lax notebooks/<lesson>.ipynb`` checks the same cells, executing them again.

As a script (``python docs/_hooks/lesson_execution.py SOURCE TARGET``) it executes the
notebook file ``SOURCE`` in its own folder and writes it to ``TARGET``; a cell that raises is
printed with Keras's error and the exit code is 1.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

CHECK = "# NBVAL_CHECK_OUTPUT"
CELL_TIMEOUT = 600  # seconds: lesson 7 creates Keras engines from the package index
#: The cell run after the lesson's own (and dropped from the copy): every explorer's answers,
#: which arrive after its cell ended, go into the saved widget state.
SETTLE = f"""
from ipywidgets.widgets.widget import _instances as _dx_widgets
from dtype_explorer import DtypeExplorer as _DxExplorer
for _dx_widget in [w for w in list(_dx_widgets.values()) if isinstance(w, _DxExplorer)]:
    _dx_widget.wait(timeout={CELL_TIMEOUT})
    _dx_widget.send_state()
"""
#: A line a carriage return overwrote (nbval's ``carriagereturn_pat``).
_CARRIAGE_RETURN = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)
#: What nbval's comparison leaves out (``nbval.plugin.IPyNbFile.skip_compare``, images included).
SKIP_COMPARE = frozenset(
    {
        "metadata",
        "traceback",
        "prompt_number",
        "output_type",
        "name",
        "execution_count",
        "application/vnd.jupyter.widget-view+json",
        "image/png",
        "image/jpeg",
    }
)


def run(notebook: Any, *, folder: Path, kernel_name: str, env: dict[str, str] | None = None) -> Any:
    """Execute ``notebook`` in place, in a fresh kernel started in ``folder``.

    Args:
        notebook: an nbformat notebook node (the lesson as committed).
        folder: the kernel's working directory (the lesson's own folder).
        kernel_name: the Jupyter kernel to run it on (``python3``, or a Keras 2 kernel).
        env: the kernel's environment (``None``: this process's).

    Returns:
        The same notebook, with its outputs and saved widget state.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised (its error in the message);
        CellTimeoutError or DeadKernelError: the lesson did not finish.

    Example:
        >>> lesson = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
        >>> run(lesson, folder=Path("."), kernel_name="python3").cells[0].outputs[0].text
        '42\\n'
    """
    settle = nbformat.v4.new_code_cell(SETTLE)
    notebook.cells.append(settle)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(folder)}},
        store_widget_state=True,
    )
    try:
        client.execute(**({} if env is None else {"env": env}))
    finally:
        notebook.cells.remove(settle)
    return notebook


def _flattened(outputs: list[Any]) -> dict[str, list[Any]]:
    """nbval's form of a cell's outputs (``coalesce_streams``, then the comparison's): each
    stream's whole text under its name, each other field (a MIME type for data) to its values
    in order."""
    fields: dict[str, list[Any]] = defaultdict(list)
    streams: dict[str, str] = {}
    for output in outputs:
        if output.get("output_type") == "stream":
            streams[output["name"]] = streams.get(output["name"], "") + output["text"]
            continue
        for key, value in output.items():
            if key in SKIP_COMPARE:
                continue
            if key == "data":
                for mime, content in value.items():
                    if mime not in SKIP_COMPARE:
                        fields[mime].append(content)
            else:
                fields[key].append(value)
    for name, text in streams.items():
        fields[name].append(_CARRIAGE_RETURN.sub("", text))
    return dict(fields)


def checked_differences(executed: Any, committed: Any) -> list[str]:
    """The checked cells whose executed outputs differ from the committed ones (nbval-lax).

    Args:
        executed: the notebook as executed now.
        committed: the same lesson as committed (same cells, committed outputs).

    Returns:
        One line per differing checked cell: its second line (what it checks) and the field
        that differs, with both values; empty when every checked cell shows what it committed.

    Example:
        >>> cell = nbformat.v4.new_code_cell(CHECK + "\\nprint(1)")
        >>> cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\\n")]
        >>> now = nbformat.v4.new_code_cell(cell.source)
        >>> now.outputs = [nbformat.v4.new_output("stream", name="stdout", text="2\\n")]
        >>> checked_differences(nbformat.v4.new_notebook(cells=[now]),
        ...                     nbformat.v4.new_notebook(cells=[cell]))
        ["print(1): stdout: committed ['1\\\\n'], now ['2\\\\n']"]
    """
    found = []
    for before, now in zip(committed.cells, executed.cells, strict=True):
        source = "".join(before.source)
        if before.cell_type != "code" or not source.startswith(CHECK):
            continue
        what = (source.splitlines()[1:] or [""])[0].strip()
        want, got = _flattened(before.outputs), _flattened(now.outputs)
        for key in sorted(set(want) | set(got)):
            if want.get(key) != got.get(key):
                found.append(f"{what}: {key}: committed {want.get(key)!r}, now {got.get(key)!r}")
                break
    return found


def main(argv: list[str]) -> int:
    """``SOURCE TARGET``: execute the notebook file ``SOURCE`` on its kernel, write ``TARGET``."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    source, target = Path(argv[0]), Path(argv[1])
    notebook = nbformat.read(source, as_version=4)
    kernel = notebook.metadata.get("kernelspec", {}).get("name", "python3")
    try:
        run(notebook, folder=source.resolve().parent, kernel_name=kernel)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        print(f"{source.name}: a cell failed when the lesson was executed:\n{exc}")
        return 1
    nbformat.write(notebook, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
