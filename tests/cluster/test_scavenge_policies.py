"""Every scavenging policy's decision fits the pool and each job's bounds, on random views
(a fresh job holding nodes after an aborted profile included); MalleTrain profiles fresh
jobs with free nodes and one donor's spare nodes."""

from __future__ import annotations

import numpy as np
import pytest

from faasml.cluster.policies import IDLE_NODES, POLICIES
from faasml.cluster.scavenge import JobView, ScavengeJob, make_scavenge_policy


def _spec(name: str, low: int = 1, high: int = 16, sigma: float = 0.1) -> ScavengeJob:
    counts = (0, 1, 2, 4, 8, 16)
    rates = tuple(0.0 if n == 0 else 100 * n / (1 + sigma * (n - 1)) for n in counts)
    return ScavengeJob(name, "m", 0.0, low, high, 20.0, 5.0, 1e9, counts, rates)


@pytest.mark.parametrize("name", POLICIES.names(IDLE_NODES))
@pytest.mark.parametrize("seed", range(8))
def test_decisions_fit_the_pool_and_bounds(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    policy = make_scavenge_policy(name)
    views = []
    left = pool = int(rng.integers(0, 40))
    for j in range(int(rng.integers(1, 8))):
        low = int(rng.integers(1, 3))
        spec = _spec(f"J{j}", low, int(rng.integers(low, 17)), float(rng.uniform(0, 0.5)))
        held = int(min(left, rng.integers(0, spec.max_nodes + 1)))
        held = held if held >= low else 0
        left -= held
        if rng.random() < 0.6:  # a job the monitor already knows
            policy.observe(spec.job, 2, 190.0)
        views.append(JobView(spec, held, profiling=False, last_interrupt_s=float(rng.random())))
    decision = policy.allocate(0.0, pool, views)
    assert sum(decision.counts.values()) <= pool
    for view in views:
        n = decision.counts[view.spec.job]
        assert n == 0 or view.spec.min_nodes <= n <= view.spec.max_nodes
    for job, order in decision.profile.items():
        assert order[0] == decision.counts[job]
        assert list(order) == sorted(order, reverse=True)


def test_malletrain_profiles_a_fresh_job_with_free_and_donated_nodes() -> None:
    policy = make_scavenge_policy("malletrain")
    old, new = _spec("OLD"), _spec("NEW")
    policy.observe("OLD", 6, 500.0)
    # 8 nodes: OLD holds 6 (min 1), 2 are free; NEW takes the 2 and 5 of OLD's (LRU donor).
    decision = policy.allocate(0.0, 8, [JobView(old, 6), JobView(new, 0)])
    assert decision.counts == {"OLD": 1, "NEW": 7}
    assert decision.profile == {"NEW": (7, 4, 2, 1)}


def test_a_job_being_profiled_keeps_its_nodes() -> None:
    policy = make_scavenge_policy("freetrain")
    decision = policy.allocate(
        0.0, 10, [JobView(_spec("A"), 3, profiling=True), JobView(_spec("B"), 0)]
    )
    assert decision.counts["A"] == 3 and decision.counts["B"] == 7


@pytest.mark.parametrize(("donors", "want"), [(1, {"A": 1, "B": 5}), (2, {"A": 1, "B": 1})])
def test_malletrain_takes_from_more_donors_only_when_allowed(
    donors: int, want: dict[str, int]
) -> None:
    policy = make_scavenge_policy("malletrain")
    policy.donors = donors  # type: ignore[attr-defined]
    a, b, new = _spec("A"), _spec("B"), _spec("NEW")
    policy.observe("A", 5, 400.0)
    policy.observe("B", 5, 400.0)
    # A was interrupted first (least recently): it is the first donor, B the second.
    views = [JobView(a, 5, last_interrupt_s=1.0), JobView(b, 5, last_interrupt_s=2.0)]
    decision = policy.allocate(0.0, 10, [*views, JobView(new, 0)])
    assert {k: decision.counts[k] for k in ("A", "B")} == want
    assert decision.counts["NEW"] == 10 - sum(want.values())
    assert decision.profile["NEW"][0] == decision.counts["NEW"]


@pytest.mark.parametrize(("pool", "more"), [(16, True), (40, False)])
def test_malletrain_stops_profiling_down_when_nodes_are_spare(pool: int, more: bool) -> None:
    policy = make_scavenge_policy("malletrain")
    a, new = _spec("A", high=16), _spec("NEW", high=16)
    policy.observe("A", 16, 1000.0)
    decision = policy.allocate(0.0, pool, [JobView(a, 0), JobView(new, 0)])
    assert decision.profile["NEW"][0] == decision.counts["NEW"] > 0
    policy.observe("NEW", decision.counts["NEW"], 900.0)  # the first profiled count
    # 16 nodes: none left idle, the step down's nodes have a taker: go on profiling.
    # 40 nodes: both jobs at their max and 8 idle: a step down would waste its nodes.
    assert policy.profile_more("NEW") is more
    policy.stop_when_spare = False  # type: ignore[attr-defined]
    assert policy.profile_more("NEW") is True


def test_one_registry_two_groups_each_made_by_its_own_command() -> None:
    from faasml.cluster.policies import GPU_POOL, make_policy
    from faasml.exceptions import ConfigError

    assert set(POLICIES.names(IDLE_NODES)) == {
        "malletrain",
        "freetrain",
        "freetrain-guess",
        "greedy",
        "equal",
    }
    assert {"fifo", "pollux", "fapes"} <= set(POLICIES.names(GPU_POOL))
    assert set(POLICIES.names()) == set(POLICIES.names(IDLE_NODES)) | set(POLICIES.names(GPU_POOL))
    with pytest.raises(
        ConfigError, match=r"'malletrain' is a policy of the idle-nodes group .*scavenge"
    ):
        make_policy("malletrain")
    with pytest.raises(
        ConfigError, match=r"'fapes' is a policy of the gpu-pool group .*cluster simulate"
    ):
        make_scavenge_policy("fapes")
    with pytest.raises(ConfigError, match="unknown idle-nodes policy 'bogus'; choose one of: eq"):
        make_scavenge_policy("bogus")
