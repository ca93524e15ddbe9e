"""A real run on a local multi-node Ray cluster: jobs, a service, a reclaim, clean shutdown,
and the calibration the simulator predicts the run from."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from faasml.cluster import AppModel, Cluster, Job, make_policy
from faasml.cluster.inference import InferenceService, RateTrace

pytest.importorskip("ray")
pytest.importorskip("torch")


@pytest.mark.slow
def test_real_jobs_and_a_service_with_a_reclaim_on_ray(
    models: dict[str, AppModel], record_property: Callable[[str, object], None]
) -> None:
    import ray

    from faasml.cluster.ray_predict import compare, fit_run_model, predict_run
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
    # Nothing depends on the machine's speed. The service is sized as a real manager would:
    # from the load observed in the rounds before (max over 5 rounds, 20 % headroom), a
    # slot it gets serving 0.5 s after the round began. Round 0 (t = 0) has seen no load,
    # lends the inference server and starts a and b, one per server; rounds are at least
    # 2 s apart, so the first round after t = 6 s, which has seen the load, is round 1 to 4,
    # and it reclaims a busy server: at most 12 steps a round, each job runs for at least
    # 10 rounds. The time limit only guards against a hang.
    config = RunConfig(
        round_s=2.0,
        steps=120,
        steps_per_round=12,
        day_s=day_s,
        rate_scale=0.3,
        max_time_s=3000.0,
        forecast="max",
        headroom=1.2,
        inference_start_s=0.5,
    )
    # Before the clock: a calibration on one GPU, then (a restart) one GPU on each server.
    cluster = Cluster.uniform(2, 2)
    result = run_on_ray(
        jobs, models, cluster, make_policy("fifo", 2.0), config, [service], [(0,), (0, 1)]
    )
    assert not ray.is_initialized()  # shut down
    s = result.summary()
    assert s["completed"] == 2
    assert s["servers_loaned"] >= 1 and s["servers_reclaimed"] >= 1
    assert s["reclaim_preemptions"] >= 1
    # A warm serving slot per GPU of each server was started before the clock (fapes
    # loaning: inference may use any server). Requests were really sent and measured; how
    # many met the SLO depends on this machine's load (benchmarks/results/cluster_run.md
    # reports runs).
    assert s["serving_slots"] == 4
    assert s["requests"] > 0 and 0 <= s["slo_requests"] <= 1
    assert (result.forecast, result.headroom, result.inference_start_s) == ("max", 1.2, 0.5)
    # The rounds are the driver's: each starts a round after the one before began, or later.
    assert len(result.rounds_s) > 10 and all(np.diff(result.rounds_s) >= config.round_s - 1e-9)
    for job in result.jobs:
        assert job.steps == 120  # every step done once: nothing lost to the reclaim
        assert job.step_history == sorted(job.step_history)
        # A finished job was checkpointed once per restart the driver counted.
        assert len(job.step_history) == job.restarts
        assert job.last_loss < job.first_loss  # it really trained
        assert job.completion_s is not None and 0 < job.running_s <= job.completion_s
    # The calibration measured both layouts (and a start and a restart); the simulator
    # predicts the run from it.
    cal = result.calibration
    assert cal is not None
    assert [x.layout.counts for x in cal.steps] == [(1,), (1, 1)]
    assert all(x.step_s > 0 for x in cal.steps) and len(cal.restarts_s) == 2
    model = fit_run_model(cal)
    predicted = predict_run(
        jobs, models, cluster, make_policy("fifo", 2.0), config, [service], model
    )
    cmp = compare(result, predicted)
    assert [row.name for row in cmp.jobs] == ["a", "b"]
    assert all(row.predicted_s is not None and row.error is not None for row in cmp.jobs)
    assert cmp.slo_predicted is not None and cmp.slo_measured == s["slo_requests"]
    # What the run measured, for the docs (pytest --junitxml keeps it); nothing asserted.
    for key in ("requests", "slo_requests", "p50_latency_ms", "p99_latency_ms", "avg_jct_s"):
        record_property(key, s[key])
    record_property("slo_predicted", cmp.slo_predicted)
    record_property("jct_predicted", cmp.avg_jct.predicted_s)
