"""Probes answered through the worker pool, every backend at once, with progress: what a
survey, a promotion table and a cluster's partition run."""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tqdm.auto import tqdm

from dtype_explorer.records import ProbeResult, ProbeSpec
from dtype_explorer.runtime import pool

#: Probes in flight per worker: enough to keep every worker busy, few enough to stop quickly
#: and to spread the last probes over all of a backend's workers (each goes to the worker with
#: the fewest waiting).
WINDOW = 8


def run_specs(
    specs: Sequence[ProbeSpec],
    *,
    timeout: float | None = None,
    use_cache: bool = True,
    progress: bool = True,
    desc: str = "survey",
    sink: Callable[[ProbeResult], None] | None = None,
) -> list[ProbeResult]:
    """Answer ``specs`` through the pool, every backend at once, in ``specs`` order.

    At most ``WINDOW`` probes per worker are in flight (``pool.workers_per_backend()`` per
    backend), so the cells spread over every worker, and an interrupt stops soon and cancels
    the rest. With ``sink``, each answer is handed to it as it arrives and not kept: the
    list returned is empty, and no more than the answers in flight are ever held.
    """
    keep = _Kept(len(specs), sink)
    groups = {(s.backend, s.engine) for s in specs}  # each backend's (or engine's) workers
    limit = WINDOW * max(1, len(groups)) * pool.workers_per_backend()
    queue: Iterator[tuple[int, ProbeSpec]] = iter(enumerate(specs))
    running: dict[concurrent.futures.Future[ProbeResult], int] = {}
    with progress_bar(total=len(specs), desc=desc, enabled=progress) as bar:
        try:
            while True:
                for index, spec in queue:
                    future = pool.submit(spec, timeout=timeout, use_cache=use_cache)
                    if future.done():
                        keep(index, future.result())
                        bar.update(1)
                        continue
                    running[future] = index
                    if len(running) >= limit:
                        break
                if not running:
                    break
                done, _ = concurrent.futures.wait(
                    running, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    keep(running.pop(future), future.result())
                bar.update(len(done))
        except BaseException:
            for future in running:
                future.cancel()
            raise
    return [r for r in keep.results if r is not None]


class _Kept:
    """Where ``run_specs`` puts each answer: its place in the list, or ``sink``."""

    def __init__(self, count: int, sink: Callable[[ProbeResult], None] | None) -> None:
        self.sink = sink
        self.results: list[ProbeResult | None] = [None] * (count if sink is None else 0)

    def __call__(self, index: int, result: ProbeResult) -> None:
        if self.sink is None:
            self.results[index] = result
        else:
            self.sink(result)


#: What draws the progress bars of this context: ``None`` is tqdm (notebook-aware); a front
#: end sets its own with :func:`progress_with` (the CLI's rich bar on a terminal).
_BARS: contextvars.ContextVar[Callable[..., Any] | None] = contextvars.ContextVar(
    "dtype_explorer_progress_bars", default=None
)


@contextlib.contextmanager
def progress_with(bars: Callable[..., Any]) -> Iterator[None]:
    """Inside the block, every enabled progress bar is ``bars(total=..., desc=...)``: a
    context manager with tqdm's ``update(n)`` and ``set_postfix_str(text, refresh=False)``."""
    token = _BARS.set(bars)
    try:
        yield
    finally:
        _BARS.reset(token)


def progress_bar(*, total: int, desc: str, enabled: bool = True, unit: str = "probe") -> Any:
    """A progress bar: the front end's (:func:`progress_with`), else notebook-aware tqdm
    counting in ``unit``."""
    bars = _BARS.get()
    if bars is not None and enabled:
        return bars(total=total, desc=desc)
    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, unit=unit)
