"""The command line's terminal: rich consoles (colour on a TTY, none when piped or with
``NO_COLOR``), tables printed at a width that never cuts a cell, and rich progress bars for
the analyses (``analyses.progress_with``) drawn on the real terminal even while the
frameworks' own stderr goes to a log; and where the frameworks' output goes: the workers'
logs copied to stderr with ``--verbose`` (:func:`worker_output`), what frameworks imported
by the command's own process print sent to ``workers/cli.log`` without it
(:func:`framework_output_to_log`).

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
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

import typer
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from dtype_explorer import analyses, pool
from dtype_explorer.frontends._cli_options import file_size
from dtype_explorer.runtime import cache

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


@contextlib.contextmanager
def worker_output(backends: str | list[str], *, verbose: bool) -> Iterator[None]:
    """With ``--verbose``: what the workers of ``backends`` wrote to their logs inside the
    block (framework start-up lines, warnings), copied to stderr afterwards. Without it the
    logs keep it (``pool.log_path``) and the terminal stays quiet."""
    if not verbose:
        yield
        return
    logs = {s: pool.log_path(s) for b in pool.usable(backends) for s in pool.slots(b)}
    start = {s: file_size(path) for s, path in logs.items()}
    try:
        yield
    finally:
        for backend, path in logs.items():  # each worker's (numpy, numpy-1, ...)
            path = pool.log_path(backend)  # a worker started in the block may have moved it
            since = start[backend] if path == logs[backend] else 0
            with contextlib.suppress(OSError):
                with path.open("rb") as file:
                    file.seek(since if file_size(path) >= since else 0)
                    text = file.read().decode(errors="replace").rstrip()
                if text:
                    typer.echo(f"--- {backend} worker log ({path}):\n{text}", err=True)


#: The log of what frameworks imported by the CLI's own process print (``workers/cli.log``);
#: started afresh past this size.
FRONT_LOG_BYTES = 1 << 20


@contextlib.contextmanager
def framework_output_to_log(*, verbose: bool) -> Iterator[IO[str]]:
    """Inside the block, what is written to this process's stderr (fd 2: TensorFlow's absl,
    oneDNN and CUDA lines when a command imports Keras here, as ``check`` and ``table`` do) goes
    to ``workers/cli.log`` in the cache directory; with ``--verbose`` it stays on stderr. An
    error is reported after the block, on the terminal. Yields the terminal's stderr (for
    progress bars), whichever way fd 2 goes."""
    if verbose:
        yield sys.stderr
        return
    path = cache.path() / "workers" / "cli.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log = path.open("wb" if file_size(path) > FRONT_LOG_BYTES else "ab")
    except OSError:
        yield sys.stderr
        return
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(log.fileno(), 2)
    terminal = open(saved, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    try:
        yield terminal
    finally:
        terminal.flush()
        terminal.close()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        log.close()
