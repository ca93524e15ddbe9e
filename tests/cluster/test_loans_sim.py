"""Inference services and loans inside the simulator: SLO first, nothing lost, baselines."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from faasml.cluster import (
    AppModel,
    Cluster,
    Job,
    SimConfig,
    load_workload,
    make_policy,
    resolve_workload,
    simulate,
)
from faasml.cluster.inference import InferenceService, RateTrace


def jobs(traces_dir: Path, count: int = 16) -> list[Job]:
    picked = load_workload(resolve_workload("workload-1", traces_dir))[:count]
    return [replace(j, epochs=3) for j in picked]


def waves(high: float, low: float, period: float = 1200.0, end: float = 20000.0) -> RateTrace:
    """Load that swings between ``high`` and ``low`` every half ``period``."""
    times = np.arange(0.0, end, period / 2)
    rates = np.where(np.arange(len(times)) % 2 == 0, high, low)
    return RateTrace(times, rates)


SERVICES = [
    InferenceService("a", waves(160.0, 20.0), capacity_rps=10.0, slo_ms=100.0, max_scale=16),
    InferenceService("b", waves(30.0, 70.0), capacity_rps=10.0, slo_ms=100.0, max_scale=8),
]


@pytest.mark.parametrize("loaning", ["dedicated", "one-way", "fapes"])
@pytest.mark.parametrize("policy", ["fifo", "pollux", "fapes"])
def test_inference_meets_its_slo_first_under_every_strategy(
    models: dict[str, AppModel], traces_dir: Path, loaning: str, policy: str
) -> None:
    config = SimConfig(loaning=loaning, max_time_s=6000.0)
    result = simulate(
        jobs(traces_dir), models, Cluster.uniform(8, 4), make_policy(policy), config, SERVICES
    )
    s = result.summary()
    assert s["slo_requests"] == 1.0 and s["slo_time"] == 1.0
    assert s["inference_reserve_servers"] == 5  # 16 + 3 GPUs at most at once: 5 servers
    assert all(0.0 <= u <= 1.0 + 1e-9 for _, u in result.utilization)
    if loaning == "dedicated":
        assert s["servers_loaned"] == 0 and s["reclaim_preemptions"] == 0
    else:
        assert s["servers_loaned"] > 0 and s["servers_reclaimed"] > 0


def test_an_overloaded_pool_serves_min_scale_first_and_reports_the_misses(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    hungry = InferenceService("h", waves(500.0, 500.0), 10.0, 100.0, min_scale=4, max_scale=64)
    result = simulate(
        jobs(traces_dir, 4),
        models,
        Cluster.uniform(4, 4),
        make_policy("pollux"),
        SimConfig(max_time_s=1200.0),
        [hungry],
    )
    s = result.summary()
    # 16 GPUs serve 160 of 500 requests/s; training gets nothing and waits.
    assert s["slo_requests"] == pytest.approx(160 / 500)
    assert s["slo_time"] == 0.0
    assert all(j.start_s is None for j in result.jobs)


def test_no_training_work_is_lost_to_reclaims(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    """Reclaims checkpoint and preempt: a job's progress never goes back, and every job
    preempted by a reclaim still finishes its full work."""
    cluster, policy = Cluster.uniform(8, 4), make_policy("pollux")
    seen: dict[str, float] = {}
    preempted = 0
    for until in (1800.0, 2400.0, 3000.0, 3600.0, 4800.0, 60000.0):
        config = SimConfig(loaning="one-way", max_time_s=until)
        result = simulate(jobs(traces_dir), models, cluster, policy, config, SERVICES)
        for record in result.jobs:
            assert record.progress >= seen.get(record.name, 0.0) - 1e-9
            seen[record.name] = record.progress
        preempted = sum(r.reclaim_preemptions for r in result.jobs)
    assert preempted > 0
    assert all(r.completion_s is not None for r in result.jobs)
    done = {j.name: models[j.application].work(j) for j in jobs(traces_dir)}
    assert all(abs(seen[n] - w) < 1e-6 * max(w, 1.0) for n, w in done.items())


def test_loans_shorten_training_against_a_dedicated_partition(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    cluster, policy = Cluster.uniform(8, 4), make_policy("fifo")
    jct = {}
    for loaning in ("dedicated", "fapes"):
        config = SimConfig(loaning=loaning)
        result = simulate(jobs(traces_dir), models, cluster, policy, config, SERVICES)
        jct[loaning] = result.summary()["avg_jct_s"]
    assert jct["fapes"] < jct["dedicated"]


def test_unix_time_traces_with_services_simulate_without_idle_rounds(
    models: dict[str, AppModel], traces_dir: Path
) -> None:
    start = 60.0 * 28_333_333  # about 1.7e9 s, a whole number of rounds
    late = [replace(j, arrival_s=j.arrival_s + start) for j in jobs(traces_dir, 4)]
    shifted = [
        InferenceService(
            s.name,
            RateTrace(s.rate.times_s + start, s.rate.rates),
            s.capacity_rps,
            s.slo_ms,
            s.min_scale,
            s.max_scale,
        )
        for s in SERVICES
    ]
    cluster, policy = Cluster.uniform(8, 4), make_policy("pollux")
    base = simulate(jobs(traces_dir, 4), models, cluster, policy, SimConfig(), SERVICES)
    moved = simulate(late, models, cluster, policy, SimConfig(), shifted)
    assert len(moved.utilization) < 2 * len(base.utilization)  # no 1.7e9 / 60 idle rounds
    assert moved.summary()["slo_requests"] == base.summary()["slo_requests"] == 1.0
    for a, b in zip(base.jobs, moved.jobs, strict=True):
        assert a.jct is not None and b.jct is not None
        assert abs(a.jct - b.jct) < 1e-3 * max(a.jct, 1.0)
