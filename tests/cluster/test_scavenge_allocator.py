"""The Resource Allocator: the MILP on counts is optimal (brute force on small instances),
respects bounds and the pool, maps counts to nodes without migration, and falls back to a
feasible allocation when out of time."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from faasml.cluster.scavenge import (
    AllocJob,
    PiecewiseCurve,
    allocate_counts,
    candidate_values,
    map_to_nodes,
)
from faasml.exceptions import ConfigError


def _random_jobs(rng: np.random.Generator, count: int) -> list[AllocJob]:
    jobs = []
    for j in range(count):
        low = int(rng.integers(1, 3))
        high = int(rng.integers(low, 6))
        s1 = float(rng.uniform(50, 200))
        sigma = float(rng.uniform(0.0, 0.6))
        ns = (1.0, 2.0, 4.0, 8.0)
        rates = tuple(s1 * n / (1 + sigma * (n - 1)) for n in ns)
        jobs.append(
            AllocJob(
                f"J{j}",
                int(rng.integers(0, high + 1)),
                low,
                high,
                float(rng.uniform(5, 60)),
                float(rng.uniform(1, 20)),
                PiecewiseCurve(ns, rates),
            )
        )
    return jobs


def _brute_force(jobs: list[AllocJob], pool: int, window: float, metric: str) -> float:
    options = [candidate_values(j, pool, window, metric) for j in jobs]
    best = -1.0
    for picks in itertools.product(*(range(len(c)) for c, _ in options)):
        if sum(int(options[j][0][k]) for j, k in enumerate(picks)) <= pool:
            best = max(best, sum(float(options[j][1][k]) for j, k in enumerate(picks)))
    return best


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("metric", ["throughput", "efficiency"])
@pytest.mark.parametrize("reduce", [True, False])
def test_milp_matches_brute_force(seed: int, metric: str, reduce: bool) -> None:
    rng = np.random.default_rng(seed)
    jobs = _random_jobs(rng, int(rng.integers(1, 5)))
    pool = int(rng.integers(0, 14))
    window = float(rng.choice([30.0, 120.0, 600.0]))
    result = allocate_counts(
        jobs, pool, window_s=window, metric=metric, time_limit_s=10, reduce=reduce
    )
    assert result.status in ("optimal", "trivial")
    assert result.objective == pytest.approx(_brute_force(jobs, pool, window, metric), rel=2e-3)
    assert sum(result.counts.values()) <= pool
    for job in jobs:
        n = result.counts[job.job]
        assert n == 0 or job.min_nodes <= n <= job.max_nodes


@pytest.mark.parametrize("seed", range(4))
def test_reduction_keeps_the_optimum_with_fewer_variables(seed: int) -> None:
    """Lagrangian reduction: the same optimum as the full MILP on 40 jobs, from fewer
    binaries (none when the bound proves the incumbent)."""
    rng = np.random.default_rng(100 + seed)
    jobs = _random_jobs(rng, 40)
    pool = int(rng.integers(20, 90))
    full = allocate_counts(jobs, pool, time_limit_s=60, reduce=False, gap=0.0)
    reduced = allocate_counts(jobs, pool, time_limit_s=60, gap=0.0)
    assert full.status == reduced.status == "optimal"
    assert reduced.objective == pytest.approx(full.objective, rel=1e-9)
    assert reduced.variables < full.variables
    assert sum(reduced.counts.values()) <= pool


def test_rescale_cost_keeps_a_job_where_it_is_over_a_short_window() -> None:
    curve = PiecewiseCurve((1.0, 2.0, 4.0), (100.0, 190.0, 360.0))
    job = AllocJob("A", 2, 1, 4, scale_up_s=50.0, scale_down_s=10.0, curve=curve)
    # Over 60 s, growing to 4 nodes pays a 50 s pause: 360·10 < 190·60, so it stays at 2.
    assert allocate_counts([job], 4, window_s=60.0).counts == {"A": 2}
    # Over an hour the pause is worth it.
    assert allocate_counts([job], 4, window_s=3600.0).counts == {"A": 4}


def test_out_of_time_falls_back_to_a_feasible_allocation() -> None:
    rng = np.random.default_rng(7)
    jobs = _random_jobs(rng, 40)
    result = allocate_counts(jobs, 60, window_s=600.0, time_limit_s=1e-6)
    assert result.status in ("fallback", "time-limit", "optimal")
    assert sum(result.counts.values()) <= 60
    assert result.objective > 0
    for job in jobs:
        n = result.counts[job.job]
        assert n == 0 or job.min_nodes <= n <= job.max_nodes


def test_bad_metric_and_pool_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="metric is 'speed'"):
        allocate_counts([], 3, metric="speed")
    with pytest.raises(ConfigError, match="pool is -1 nodes"):
        allocate_counts([], -1)


def test_counts_map_to_nodes_keeping_current_nodes() -> None:
    current = {"A": ("n1", "n2", "n3"), "B": ("n4",), "C": ("n5", "n6")}
    out = map_to_nodes(current, {"A": 2, "B": 3, "C": 2}, ["n7", "n8"])
    assert set(out["A"]) <= set(current["A"]) and len(out["A"]) == 2
    assert set(current["B"]) <= set(out["B"]) and len(out["B"]) == 3
    assert out["C"] == current["C"]
    every = [n for nodes in out.values() for n in nodes]
    assert len(every) == len(set(every))  # no node twice
    with pytest.raises(ValueError, match="more nodes"):
        map_to_nodes(current, {"A": 3, "B": 1, "C": 5}, [])
