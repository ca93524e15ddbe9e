"""FaPES avoids restarts that buy nothing: a job whose GPU count is unchanged keeps its
servers when the jobs that took them restart anyway; a job back-filled last round keeps its
back-filled GPUs while they stay free."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from faasml.cluster import (
    AppModel,
    Cluster,
    SimConfig,
    load_workload,
    resolve_workload,
    simulate,
)
from faasml.cluster.policies.fapes import FapesPolicy, restore_servers


def test_a_moved_job_takes_its_servers_back_from_a_job_that_restarts_anyway() -> None:
    cluster = Cluster.uniform(3, 4)
    current = {"a": (0, 0), "b": (0, 0)}
    # a moved to server 1 with the same count; c (new) took a's GPUs on server 0
    new = {"a": (1, 1), "b": (0, 0), "c": (0, 0)}
    out = restore_servers(new, current, cluster)
    assert out == {"a": (0, 0), "b": (0, 0), "c": (1, 1)}


def test_jobs_that_restart_anyway_make_room_and_may_get_their_own_servers_back() -> None:
    cluster = Cluster.uniform(2, 4)
    current = {"a": (0, 0), "b": (1, 1, 1, 1)}
    # a and b both moved with unchanged counts; d (new) took a's GPUs
    new = {"a": (1, 1), "b": (0, 0, 1, 1), "d": (0, 0)}
    out = restore_servers(new, current, cluster)
    assert out == {"a": (0, 0), "b": (1, 1, 1, 1), "d": (0, 0)}


def test_no_job_is_spread_over_more_servers_to_save_a_restart() -> None:
    cluster = Cluster.uniform(3, 4)
    current = {"a": (0, 0)}
    # c was packed on server 0; taking 2 of its GPUs back would split it over two servers
    new = {"a": (1, 1), "c": (0, 0, 0, 0)}
    assert restore_servers(new, current, cluster) == new


def test_a_job_that_changes_its_gpu_count_is_left_alone() -> None:
    cluster = Cluster.uniform(2, 4)
    current = {"a": (0, 0)}
    new = {"a": (1, 1, 1), "c": (0, 0)}
    assert restore_servers(new, current, cluster) == new


@pytest.mark.parametrize("restart_s", [5.68, 30.0])
def test_fapes_restarts_jobs_less_with_restart_avoidance(
    models: dict[str, AppModel], traces_dir: Path, restart_s: float
) -> None:
    """On the first 20 jobs of Pollux workload 1 (3 epochs each), keeping servers, sticky
    back-fills and the take-back charge cut restarts by a quarter or more, and every job
    still finishes (heSRPT's linear weights, ``srpt=1``, in both runs)."""
    jobs = load_workload(resolve_workload("workload-1", traces_dir))[:20]
    jobs = [replace(j, epochs=3) for j in jobs]
    cluster = Cluster.uniform(4, 4, 2)
    config = SimConfig(restart_s=restart_s)
    runs = {
        on: simulate(
            jobs,
            models,
            cluster,
            FapesPolicy(restart_s=restart_s, srpt=1.0, keep_servers=on, sticky=on, horizon=on),
            config,
        )
        for on in (True, False)
    }
    for result in runs.values():
        assert all(r.completion_s is not None for r in result.jobs)
    assert runs[True].summary()["restarts"] <= 0.75 * runs[False].summary()["restarts"]
