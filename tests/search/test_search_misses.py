"""Each miss of a simulated search is put in exactly one class, from the truth."""

from __future__ import annotations

import numpy as np

from faasml.sim.search_misses import (
    INFEASIBLE,
    PICK,
    STOP_COUNT,
    STOP_EI,
    STOP_USD,
    UNPROBEABLE,
    why_missed,
)

GOOD = np.array([False, False, True, True, False])
PRICES = np.array([1.0, 1.0, 5.0, 2.0, 1.0])


def test_a_good_choice_is_no_miss() -> None:
    assert why_missed(GOOD, 2, [0, 2], feasible=True, stop_reason="probe budget spent") is None


def test_an_impossible_constraint_comes_first() -> None:
    assert why_missed(GOOD, 0, [2], feasible=False, stop_reason="x") == INFEASIBLE


def test_a_good_probe_not_chosen_is_a_pick() -> None:
    assert why_missed(GOOD, 0, [0, 3], feasible=True, stop_reason="x") == PICK


def test_good_deployments_too_dear_to_probe() -> None:
    why = why_missed(GOOD, 0, [0], feasible=True, stop_reason="x", prices=PRICES, max_usd=1.5)
    assert why == UNPROBEABLE
    # One good deployment (3, at $2) fits a $2 budget: then the stop is to blame.
    why = why_missed(
        GOOD,
        0,
        [0],
        feasible=True,
        stop_reason="search budget spent ($2 of $2)",
        prices=PRICES,
        max_usd=2.0,
    )
    assert why == STOP_USD


def test_the_stop_reason_names_what_ended_the_search() -> None:
    ei = "expected improvement 0.0010 below the threshold 0.01 after 3 probes"
    assert why_missed(GOOD, 1, [0, 1], feasible=True, stop_reason=ei) == STOP_EI
    count = "probe budget spent (10 probes)"
    assert why_missed(GOOD, 1, [0, 1], feasible=True, stop_reason=count) == STOP_COUNT
