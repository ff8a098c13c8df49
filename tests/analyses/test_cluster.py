"""Surveys on a real Dask ``LocalCluster`` with two worker processes (issue 17): cells are
partitioned across the workers, each running its own dtype-explorer pool and cache; answers
stream back and merge into one ``Survey``; a worker killed mid-survey costs only its
partitions in flight, which run elsewhere, and no cell is lost or counted twice."""

from __future__ import annotations

import os
import signal
import tempfile

import distributed  # the test command installs it (the cluster extra): missing fails
import pytest

import dtype_explorer as dx
from dtype_explorer.analyses import _cluster as cluster
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.keras_run import make_spec

TARGETS = ["Dense", "Conv1D", "LSTM", "Flatten"]
DTYPES = ["float32", "float16", "int8", "uint8", "int32", "float64"]
POLICIES = ["float32", "mixed_float16"]


@pytest.fixture(scope="module")
def client():
    worker_cache = tempfile.mkdtemp(prefix="dx-test-dask-cache-")  # the workers' own cache
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            env={
                "DTYPE_EXPLORER_CACHE_DIR": worker_cache,
                "DTYPE_EXPLORER_BACKENDS": "numpy",
                "DTYPE_EXPLORER_WORKERS_PER_BACKEND": "",  # the default, shared by the two
            },
        ) as local,
        distributed.Client(local) as connected,
    ):
        yield connected


def specs() -> list:
    return [make_spec(t, d, p, "numpy") for t in TARGETS for d in DTYPES for p in POLICIES]


def test_cluster_must_be_a_client():
    with pytest.raises(InvalidSpecError, match=r"dask.distributed Client.*Received: 'tcp://x:1'"):
        dx.survey(["Dense"], ["float32"], ["float32"], backends="numpy", cluster="tcp://x:1")


def test_a_survey_on_the_cluster_equals_the_local_one_and_streams(client):
    kwargs = {"backends": "numpy", "progress": False, "use_cache": False}
    local = dx.survey(TARGETS, DTYPES, POLICIES, **kwargs)
    spread = dx.survey(TARGETS, DTYPES, POLICIES, cluster=client, **kwargs)
    assert [r.spec for r in spread.results] == [r.spec for r in local.results]
    assert [r.outcome for r in spread.results] == [r.outcome for r in local.results]
    assert {c.classification for c in spread.cells()} == {c.classification for c in local.cells()}
    assert not any(r.cached for r in spread.results)
    # both workers answered, each with its own pool: one numpy worker each, as the two Dask
    # workers share this machine's cores (the default alone would give each two)
    pools = client.run(lambda: sorted(dx.pool._pools))
    assert len(pools) == 2 and all(p == ["numpy"] for p in pools.values())


def test_a_cluster_survey_streams_into_a_sink_and_the_front_keeps_none(client):
    """On the old code a cluster survey with a sink held every answer first, then handed
    them on: the front held the whole survey. Now each arrives at the sink with its
    partition, and the survey returned keeps none."""
    handed = []
    survey = dx.survey(
        TARGETS[:2],
        DTYPES,
        POLICIES,
        backends="numpy",
        progress=False,
        use_cache=False,
        cluster=client,
        sink=handed.append,
    )
    assert survey.results == ()
    assert sorted(r.spec.to_json() for r in handed) == sorted(s.to_json() for s in specs()[:24])


def test_a_worker_killed_mid_survey_costs_only_its_partitions(client):
    wanted = specs()
    arrived: list[int] = []
    killed: list[str] = []

    def update(count: int) -> None:
        arrived.append(count)
        if killed:
            return
        processing = client.processing()
        victim = max(processing, key=lambda w: len(processing[w]))  # one with work in flight
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)  # as a machine lost mid-survey
        killed.append(victim)

    results = cluster.run_on_cluster(client, wanted, timeout=None, use_cache=False, update=update)
    assert killed, "no answer streamed back before the end"
    assert len(arrived) > 2  # answers came partition by partition
    assert sum(arrived) == len(wanted)  # every cell counted once
    assert [r.spec for r in results] == wanted  # none lost, none twice, in order
    assert all(r.status in ("ok", "error") for r in results), [r.summary() for r in results]
    client.wait_for_workers(2, timeout=120)  # the nanny started a new one


def test_partitions_cover_every_probe_once():
    for count in (0, 1, 7, 48, 49, 1000):
        covered = [i for part in cluster.partitions(count, threads=3) for i in part]
        assert covered == list(range(count))
