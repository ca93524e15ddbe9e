"""A real run on a local multi-node Ray cluster: jobs, a service, a reclaim, clean shutdown."""

from __future__ import annotations

import numpy as np
import pytest

from faasml.cluster import AppModel, Cluster, Job, make_policy
from faasml.cluster.inference import InferenceService, RateTrace

pytest.importorskip("ray")
pytest.importorskip("torch")


@pytest.mark.slow
def test_real_jobs_and_a_service_with_a_reclaim_on_ray(models: dict[str, AppModel]) -> None:
    import ray

    from faasml.cluster.ray_run import RunConfig, run_on_ray

    day_s = 60.0
    scale = 86400.0 / day_s
    # No load for 6 s (the first round lends the idle inference server), then one server's
    # worth of load (10 requests/s: one GPU) for a minute: a later round reclaims it.
    rate = RateTrace(np.array([0.0, 6 * scale, 66 * scale]), np.array([0.0, 10.0, 0.0]))
    service = InferenceService(
        "web", rate, capacity_rps=10.0, slo_ms=3000.0, min_scale=0, max_scale=4
    )
    jobs = [Job("a", "cifar10", 0.0, 2, 128), Job("b", "cifar10", 0.0, 2, 128)]
    # Nothing depends on the machine's speed. Round 0 (t = 0) sees no load, lends the
    # inference server and starts a and b, one per server; rounds are at least 2 s apart, so
    # the first round after t = 4 s that sees the load is round 1, 2 or 3, and it reclaims a
    # busy server: at most 12 steps a round, each job runs for at least 10 rounds. The time
    # limit only guards against a hang.
    config = RunConfig(
        round_s=2.0,
        steps=120,
        steps_per_round=12,
        day_s=day_s,
        rate_scale=0.3,
        max_time_s=3000.0,
    )
    result = run_on_ray(
        jobs, models, Cluster.uniform(2, 2), make_policy("fifo", 2.0), config, [service]
    )
    assert not ray.is_initialized()  # shut down
    s = result.summary()
    assert s["completed"] == 2
    assert s["servers_loaned"] >= 1 and s["servers_reclaimed"] >= 1
    assert s["reclaim_preemptions"] >= 1
    # A warm serving slot per GPU of each server was started before the clock (fapes
    # loaning: inference may use any server). Requests were really sent and measured; how
    # many met the SLO depends on this machine's load (docs/cluster.md reports a run).
    assert s["serving_slots"] == 4
    assert s["requests"] > 0 and 0 <= s["slo_requests"] <= 1
    for job in result.jobs:
        assert job.steps == 120  # every step done once: nothing lost to the reclaim
        assert job.step_history == sorted(job.step_history)
        assert job.last_loss < job.first_loss  # it really trained
