"""The budget guard's arithmetic: predictions learn a segment's fixed time, and a segment its
reservation stopped is predicted longer each time, so restarts cannot loop forever."""

from __future__ import annotations

import dataclasses
import itertools

from faasml.catalog import load_catalog
from faasml.runtime.coordinator.estimates import (
    BUDGET_MARGIN,
    KILL_SLACK_S,
    MIN_LIMIT_S,
    SegmentEstimator,
    reservation,
)
from faasml.runtime.platforms.contract import Billed
from faasml.types import Allocation

PLATFORM = load_catalog("aws-lambda").platform
ALLOCATION = Allocation(n=1, memory_mb=3584, storage="s3", scheme="allreduce")


def test_measured_overhead_is_added_to_the_rounds() -> None:
    estimator = SegmentEstimator(PLATFORM)
    estimator.observe_round(ALLOCATION, 0.01)
    without = estimator.cost(ALLOCATION, rounds=10, busy=0)
    estimator.observe_round(ALLOCATION, 0.01, overhead_s=0.5)
    with_overhead = estimator.cost(ALLOCATION, rounds=10, busy=0)
    gb_s_price = ALLOCATION.memory_mb / 1024 * PLATFORM.price_per_gb_s
    assert abs((with_overhead - without) - 0.5 * gb_s_price) < 1e-12


def _tiny_warm_estimator() -> SegmentEstimator:
    """Fast rounds on a started (warm) function: the first limit is the least there is."""
    estimator = SegmentEstimator(PLATFORM)
    estimator.observe_round(ALLOCATION, 1e-7)
    estimator.observe_billed(Billed(0.1, ALLOCATION.memory_mb, cold=True, init_s=0.0, ok=True))
    return estimator


def test_repeated_reservation_stops_grow_the_limit_geometrically() -> None:
    estimator = _tiny_warm_estimator()
    limits = []
    for _ in range(10):
        estimate = estimator.cost(ALLOCATION, rounds=10, busy=0)
        limit, capped, _ = reservation(PLATFORM, ALLOCATION, estimate, left=1.0)
        limits.append(limit)
        if not capped:
            break
        estimator.ran_out(ALLOCATION, limit)
    # Even a tiny prediction leaves room for two cold starts (a warm function may be gone).
    cold = float(PLATFORM.cold_start_time(ALLOCATION.memory_mb))
    assert limits[0] >= 2 * cold - KILL_SLACK_S - 1e-9
    assert all(later >= 2 * earlier for earlier, later in itertools.pairwise(limits[:-1]))
    assert limits[-1] == PLATFORM.max_duration_s  # the budget no longer sets the limit


def test_a_stopped_segment_meets_the_budget_guard_in_few_restarts() -> None:
    estimator = _tiny_warm_estimator()
    left = 1e-3
    restarts = 0
    while restarts < 60:
        estimate = estimator.cost(ALLOCATION, rounds=10, busy=0)
        if estimate * BUDGET_MARGIN > left:
            break
        limit, _, _ = reservation(PLATFORM, ALLOCATION, estimate, left)
        estimator.ran_out(ALLOCATION, limit)
        restarts += 1
    assert restarts < 20


def test_a_tiny_prediction_still_leaves_a_busy_machines_delays() -> None:
    """A segment predicted at microseconds, on a platform whose cold start is a fork, is not
    stopped before MIN_LIMIT_S (a busy machine delays it by that order), but never reserves
    more than the budget left."""
    # As a profile measured it: instances forked from the local platform's template.
    local = dataclasses.replace(load_catalog("local").platform, cold_start_s=0.01)
    allocation = Allocation(n=1, memory_mb=256, storage="embedded", scheme="allreduce")
    tiny = 1e-9
    limit, capped, reserve = reservation(local, allocation, tiny, left=1.0)
    assert capped and limit >= MIN_LIMIT_S - KILL_SLACK_S - 1e-9
    limit, _, reserve = reservation(local, allocation, tiny, left=1e-9)
    assert reserve <= 1e-9 and limit < MIN_LIMIT_S
