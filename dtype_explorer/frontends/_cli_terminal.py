"""The command line's terminal: rich consoles (colour on a TTY, none when piped or with
``NO_COLOR``), tables printed at a width that never cuts a cell, and rich progress bars for
the analyses (``analyses.progress_with``) drawn on the real terminal even while the
frameworks' own stderr goes to a log.

>>> import io
>>> from rich.table import Table
>>> table = Table("a", "b")
>>> table.add_row("float32", "bias: float32→float16")
>>> out = io.StringIO()
>>> show(table, file=out, width=20)
>>> "bias: float32→float16" in out.getvalue()  # piped: as wide as the table, whole
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import IO, Any

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from dtype_explorer import analyses

#: The widest a piped table is printed (a terminal's own width is used on a TTY).
MAX_PIPED_WIDTH = 400


def console(file: IO[str] | None = None, *, width: int | None = None) -> Console:
    """A console on ``file`` (stdout by default): colour only on a terminal, never with
    ``NO_COLOR`` set (rich reads it, and ``FORCE_COLOR``); no guessed highlighting."""
    return Console(file=file, width=width, highlight=False, soft_wrap=False)


def show(
    *renderables: RenderableType, file: IO[str] | None = None, width: int | None = None
) -> None:
    """Print ``renderables``: on a terminal at its width (long cells wrap); piped, at the
    widest line they need (up to ``MAX_PIPED_WIDTH``), so no cell is wrapped or cut, and
    without the spaces that pad each line to the table's width."""
    out = console(file, width=width)
    if out.is_terminal:
        for renderable in renderables:
            out.print(renderable)
        return
    wide = out.options.update_width(MAX_PIPED_WIDTH)
    natural = max((out.measure(r, options=wide).maximum for r in renderables), default=0)
    out = console(file, width=max(out.width, min(natural, MAX_PIPED_WIDTH)))
    with out.capture() as captured:
        for renderable in renderables:
            out.print(renderable)
    out.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


class RichBar:
    """A tqdm-like bar on a rich console: ``update(n)``, ``set_postfix_str(text)``, and a
    context manager that starts it and clears it when done."""

    def __init__(self, terminal: Console, *, total: int, desc: str) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("probes ·"),
            TimeElapsedColumn(),
            TextColumn("elapsed ·"),
            TimeRemainingColumn(),
            TextColumn("left"),
            TextColumn("{task.fields[note]}", style="dim"),
            console=terminal,
            transient=True,
        )
        self.task = self.progress.add_task(desc, total=total, note="")

    def __enter__(self) -> RichBar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, n: int = 1) -> None:
        self.progress.advance(self.task, n)

    def set_postfix_str(self, text: str, refresh: bool = False) -> None:
        self.progress.update(self.task, note=text)


@contextlib.contextmanager
def progress_on(terminal: IO[str], *, enabled: bool = True) -> Iterator[bool]:
    """Inside the block, the analyses' progress bars are rich bars on ``terminal`` when it
    is a TTY (and ``enabled``); yields whether they are, so a caller turns them off when not
    (a bar in a pipe or a log is noise)."""
    screen = Console(file=terminal, highlight=False)
    if not (enabled and screen.is_terminal):
        yield False
        return

    def bars(**kwargs: Any) -> RichBar:
        return RichBar(screen, **kwargs)

    with analyses.progress_with(bars):
        yield True
