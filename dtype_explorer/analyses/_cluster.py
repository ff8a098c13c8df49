"""Surveys across the machines of a Dask cluster (``dx.survey(..., cluster=client)``).

The probes are cut into small partitions, in survey order (so each partition mixes the
backends, and every worker's backends stay busy), and each partition is one Dask task. A task
runs on a Dask worker with that machine's own dtype-explorer pool and result cache
(:func:`run_partition`: ``run_specs`` there, as on a laptop). Answers stream back as tasks
finish, with progress, and are put in their place by index, so the ``Survey`` has every cell
once, in the order a local survey gives.

A lost machine is Dask's to handle: the scheduler reruns the tasks that were running (or
whose results were held) on it elsewhere (``distributed.scheduler.allowed-failures``); a task
that still fails is submitted again under a new key, up to :data:`RESUBMITS` times. Its
probes already answered on the lost machine cost nothing where the caches are shared, and a
partition's answers are kept only once. The client's own cache is asked first and stores
what comes back, so a survey interrupted and run again resumes from it.

>>> from distributed import Client                                  # doctest: +SKIP
>>> s = dx.survey(["Dense"], ["uint8"], backends="numpy", cluster=Client("tcp://..."))
...                                                                  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import math
import multiprocessing
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from dtype_explorer.analyses._run import run_specs
from dtype_explorer.errors import InvalidSpecError, received
from dtype_explorer.records import ProbeResult, ProbeSpec
from dtype_explorer.runtime import cache, engines, pool

#: The most probes in one partition (one Dask task): small enough to stream and to lose little
#: with a machine, large enough that Dask's per-task cost (a few ms) does not count.
PARTITION = 48
#: Partitions per Dask worker thread at least, so the last ones balance.
PER_THREAD = 4
#: How many times a partition whose task failed (Dask's own retries spent) is submitted again.
RESUBMITS = 2


class ClusterError(RuntimeError):
    """A survey's partition failed on the cluster even after it was submitted again."""


def check_client(cluster: Any) -> Any:
    """``cluster`` checked to be a ``distributed.Client`` (``Client(LocalCluster())``, or one
    connected to a scheduler's address).

    Args:
        cluster: what the user passed as ``cluster=``.

    Returns:
        The client.

    >>> check_client("tcp://10.0.0.1:8786")  # doctest: +ELLIPSIS, +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InvalidSpecError: cluster must be a dask.distributed Client ...
    """
    try:
        from distributed import Client
    except ImportError:
        Client = None
    if Client is None or not isinstance(cluster, Client):
        hint = (
            "connect one with distributed.Client(cluster) or Client('tcp://scheduler:8786')"
            if Client is not None
            else "install it with: pip install 'dtype-explorer[cluster]'"
        )
        raise InvalidSpecError(
            f"cluster must be a dask.distributed Client; {hint}. Received: {received(cluster)}"
        )
    return cluster


def partitions(count: int, threads: int) -> list[range]:
    """``range(count)`` cut into consecutive partitions: at least :data:`PER_THREAD` per worker
    thread, at most :data:`PARTITION` probes each.

    >>> [len(p) for p in partitions(10, threads=2)]
    [2, 2, 2, 2, 2]
    >>> len(partitions(1000, threads=2)), max(len(p) for p in partitions(1000, threads=2))
    (21, 48)
    """
    if count == 0:
        return []
    size = max(1, min(PARTITION, math.ceil(count / (max(1, threads) * PER_THREAD))))
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def run_partition(
    specs: list[dict[str, Any]],
    timeout: float | None,
    use_cache: bool,
    neighbours: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """What one Dask task runs on its worker: ``specs`` answered by this machine's pool and
    cache (``run_specs``, every backend at once), as dicts in the same order.

    Dask workers are daemonic processes, which multiprocessing forbids to start children; the
    pool's workers are children that end with their parent (they watch it), so the flag is
    lifted for this process. Several Dask workers on one machine share its cores: unless
    this worker's pool was configured, each takes its share of the default number of workers
    per backend (``neighbours``: host -> Dask workers there).
    """
    process = multiprocessing.current_process()
    if process.daemon:
        process._config["daemon"] = False  # type: ignore[attr-defined]
    if neighbours and not pool.workers_chosen():
        from distributed import get_worker

        sharing = neighbours.get(_host(get_worker().address), 1)
        pool.configure(workers_per_backend=max(1, pool.default_workers_per_backend() // sharing))
    asked = [ProbeSpec.from_dict(s) for s in specs]
    for engine in dict.fromkeys(s.engine for s in asked):
        engines.ensure(engine, progress=False)  # each machine makes its own, once
    answered = run_specs(
        asked,
        timeout=timeout,
        use_cache=use_cache,
        progress=False,
    )
    return [r.to_dict() for r in answered]


def run_on_cluster(
    client: Any,
    specs: Sequence[ProbeSpec],
    *,
    timeout: float | None,
    use_cache: bool,
    update: Callable[[int], Any],
    sink: Callable[[ProbeResult], None] | None = None,
) -> list[ProbeResult]:
    """Answer ``specs`` on ``client``'s cluster, in ``specs`` order; ``update(n)`` is called
    as ``n`` more answers arrive (a progress bar's ``update``). With ``sink``, each answer is
    handed to it as its partition arrives (in no set order) and not kept: the front holds a
    flag per probe, not the survey.

    Args:
        client: a ``distributed.Client``.
        specs: the probes.
        timeout: seconds per probe on the workers (``None``: their default).
        use_cache: ask and fill the client's cache and the workers' caches.
        update: progress callback.
        sink: where each answer goes instead of the list returned (then empty).

    Returns:
        One result per spec, in order (none with ``sink``).
    """
    from distributed import as_completed

    results = _Answers(len(specs), sink)
    todo = []
    for index, spec in enumerate(specs):
        hit = _cached(spec) if use_cache else None
        if hit is not None:
            results.put(index, hit)
        else:
            todo.append(index)
    if len(todo) < len(specs):
        update(len(specs) - len(todo))
    nthreads = client.nthreads()
    threads = sum(nthreads.values()) or 1
    neighbours = dict(collections.Counter(_host(address) for address in nthreads))
    options = (timeout, use_cache, neighbours)
    parts = {}
    for part in partitions(len(todo), threads):
        indices = [todo[i] for i in part]
        parts[_submit(client, specs, indices, options)] = (indices, 0)
    done = as_completed(list(parts), with_results=True, raise_errors=False)
    try:
        for future, value in done:
            indices, attempts = parts.pop(future)
            if future.status != "finished":
                if attempts >= RESUBMITS:
                    raise ClusterError(
                        f"a partition of {len(indices)} probes failed on the cluster "
                        f"{attempts + 1} times; the last error: {value!r}"
                    )
                again = _submit(client, specs, indices, options)
                parts[again] = (indices, attempts + 1)
                done.add(again)
                continue
            fresh = 0
            for index, answer in zip(indices, value):
                if not results.has(index):  # each cell once, whatever Dask reran
                    result = ProbeResult.from_dict(answer)
                    results.put(index, result)
                    fresh += 1
                    if use_cache and not result.cached:
                        _store(result)
            update(fresh)
            future.release()
    except BaseException:
        client.cancel(list(parts))
        raise
    missing = results.missing()
    if missing:  # not reachable unless Dask lost a partition without saying so
        raise ClusterError(f"{missing} probes came back from no worker")
    return results.kept()


class _Answers:
    """The answers of a cluster survey by index: kept in place, or handed to ``sink`` with
    only a flag kept per probe."""

    def __init__(self, count: int, sink: Callable[[ProbeResult], None] | None) -> None:
        self.sink = sink
        self.seen = bytearray(count)
        self.results: list[ProbeResult | None] = [None] * (count if sink is None else 0)

    def has(self, index: int) -> bool:
        return bool(self.seen[index])

    def put(self, index: int, result: ProbeResult) -> None:
        self.seen[index] = 1
        if self.sink is None:
            self.results[index] = result
        else:
            self.sink(result)

    def missing(self) -> int:
        return len(self.seen) - sum(self.seen)

    def kept(self) -> list[ProbeResult]:
        return [r for r in self.results if r is not None]


def _submit(client: Any, specs: Sequence[ProbeSpec], indices: list[int], options: tuple) -> Any:
    payload = [specs[i].to_dict() for i in indices]
    return client.submit(run_partition, payload, *options, pure=False, retries=1)


def _host(address: str) -> str:
    """The machine of a Dask address (``tcp://10.0.0.5:40123`` -> ``10.0.0.5``)."""
    return urllib.parse.urlsplit(address).hostname or address


def _cached(spec: ProbeSpec) -> ProbeResult | None:
    try:
        return cache.get(spec)
    except Exception:  # an unusable cache only costs time (the workers run the probe)
        return None


def _store(result: ProbeResult) -> None:
    if pool.storable(result):
        try:
            cache.put(result)
        except Exception:  # an unusable cache only costs time
            return
