"""FaPES-Manager: reclaim selection (§3.4) against brute force, loans, SLO first."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from faasml.cluster import Cluster
from faasml.cluster.inference import InferenceService, RateTrace
from faasml.cluster.loans import (
    LoanManager,
    exact_reclaim,
    iterative_reclaim,
    reclaim_cost,
    select_reclaim,
    serve_first,
)
from faasml.exceptions import ConfigError


def brute_force(candidates: list[int], allocation: dict[str, tuple[int, ...]], n: int) -> int:
    """The fewest jobs any choice of ``n`` candidate servers preempts."""
    return min(
        reclaim_cost(list(chosen), allocation)[0]
        for chosen in itertools.combinations(candidates, n)
    )


def random_case(rng: random.Random) -> tuple[list[int], dict[str, tuple[int, ...]], int]:
    servers = rng.randint(2, 7)
    free = {s: 4 for s in range(servers)}
    allocation: dict[str, tuple[int, ...]] = {}
    for j in range(rng.randint(0, 8)):
        want = rng.randint(1, 8)
        taken: list[int] = []
        for s in rng.sample(range(servers), servers):
            k = min(free[s], want - len(taken))
            taken += [s] * k
            free[s] -= k
            if len(taken) == want:
                break
        if taken:
            allocation[f"j{j}"] = tuple(sorted(taken))
    candidates = sorted(rng.sample(range(servers), rng.randint(1, servers)))
    return candidates, allocation, rng.randint(1, len(candidates))


def test_reclaim_choice_is_optimal_against_brute_force_on_small_cases() -> None:
    rng = random.Random(7)
    for _ in range(300):
        candidates, allocation, n = random_case(rng)
        chosen = select_reclaim(candidates, allocation, n)
        assert len(chosen) == n and set(chosen) <= set(candidates)
        assert reclaim_cost(chosen, allocation)[0] == brute_force(candidates, allocation, n)


def test_iterative_selection_is_never_better_than_the_optimum_and_often_equal() -> None:
    rng = random.Random(11)
    equal = 0
    for _ in range(300):
        candidates, allocation, n = random_case(rng)
        chosen = iterative_reclaim(candidates, allocation, n)
        assert len(chosen) == n and set(chosen) <= set(candidates)
        cost = reclaim_cost(chosen, allocation)[0]
        best = brute_force(candidates, allocation, n)
        assert cost >= best
        equal += cost == best
    assert equal >= 250  # §3.4's greedy is a heuristic; it is optimal in most small cases


def test_figure_6a_reclaims_the_two_servers_of_jobs_a_and_b() -> None:
    # Fig. 6(a): jobs A and B both span servers 1 and 2; jobs 3 and 4 fill servers 3 and 4.
    allocation = {
        "A": (1, 1, 2, 2),
        "B": (1, 1, 2, 2),
        "job3": (3, 3, 3, 3),
        "job4": (4, 4, 4, 4),
    }
    for pick in (iterative_reclaim, select_reclaim):
        assert pick([1, 2, 3, 4], allocation, 2) == (1, 2)
    # Idle servers cost nothing and go first.
    assert select_reclaim([1, 2, 3, 4, 5], allocation, 1) == (5,)


def test_exact_search_gives_way_to_the_heuristic_when_many_jobs_run() -> None:
    allocation = {f"j{i}": (i,) for i in range(40)}
    assert exact_reclaim(list(range(40)), allocation, 3) is None
    assert len(select_reclaim(list(range(40)), allocation, 3)) == 3


def flat(rate: float) -> RateTrace:
    return RateTrace(np.array([0.0]), np.array([rate]))


def test_slo_first_gives_every_min_scale_before_any_growth() -> None:
    a = InferenceService("a", flat(1000.0), 10.0, 50.0, min_scale=4, max_scale=100)
    b = InferenceService("b", flat(1000.0), 10.0, 50.0, min_scale=6, max_scale=100)
    assert serve_first([a, b], [1000.0, 1000.0], 300) == [100, 100]
    assert serve_first([a, b], [1000.0, 1000.0], 30) == [24, 6]
    assert serve_first([a, b], [1000.0, 1000.0], 8) == [4, 4]


def test_manager_loans_idle_servers_and_reclaims_by_mode() -> None:
    cluster = Cluster.uniform(6, 4)
    # Training holds server 1 (job x) and server 2 (job y); server 0 is idle.
    allocation = {"x": (1, 1, 1, 1), "y": (2, 2)}
    for mode in ("one-way", "fapes"):
        manager = LoanManager(cluster, reserve=3, mode=mode)
        assert manager.inference == {3, 4, 5}
        event = manager.rebalance(4, {})  # one server's worth: lend two
        assert event.loaned == (4, 5) and event.inference == {3}
        # Training spreads onto the lent servers; then inference needs three servers again.
        allocation2 = {"x": (4, 4, 4, 4), "y": (0, 0)}
        event = manager.rebalance(12, allocation2)
        assert len(event.inference) == 3 and 3 in event.inference
        if mode == "one-way":
            assert event.reclaimed == (4, 5) and event.preempted == ("x",)
        else:  # two-way: idle training servers come back instead, preempting nothing
            assert event.preempted == () and set(event.reclaimed) <= {1, 2, 5}
    dedicated = LoanManager(cluster, reserve=3, mode="dedicated")
    assert dedicated.rebalance(0, allocation).inference == {3, 4, 5}
    with pytest.raises(ConfigError, match="loaning"):
        LoanManager(cluster, reserve=3, mode="sometimes")


def test_one_way_takes_idle_lent_servers_first_and_one_way_blind_the_first_lent() -> None:
    cluster = Cluster.uniform(6, 4)
    taken = {}
    for mode in ("one-way", "one-way-blind"):
        manager = LoanManager(cluster, reserve=3, mode=mode)
        assert manager.rebalance(0, {}).loaned == (3, 4, 5)
        # Training runs x on lent server 3 and y on lent server 4; server 5 stays idle.
        event = manager.rebalance(4, {"x": (3, 3), "y": (4,)})
        assert len(event.reclaimed) == 1 and manager.max_inference_gpus() == 12
        taken[mode] = (event.reclaimed, event.preempted)
    assert taken["one-way"] == ((5,), ())
    assert taken["one-way-blind"] == ((3,), ("x",))
