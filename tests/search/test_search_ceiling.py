"""The most a search could reach at a dollar budget, from the truth of each instance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faasml.sim.search_misses import UNPROBEABLE, ceiling, probe_fits, why_missed

# Three instances of two candidates each: which are good (within 5 %) and their probe prices.
GOOD = [np.array([True, False]), np.array([False, True]), np.array([False, False])]
PRICES = [np.array([3.0, 1.0]), np.array([1.0, 0.5]), np.array([1.0, 1.0])]


def test_a_good_deployment_whose_probe_costs_more_than_the_budget_does_not_fit() -> None:
    fits = [probe_fits(g, prices=p, max_usd=2.0) for g, p in zip(GOOD, PRICES, strict=True)]
    assert fits == [False, True, False]
    # Without prices or a dollar budget, any good deployment could be probed.
    assert probe_fits(GOOD[0]) and probe_fits(GOOD[0], prices=PRICES[0])
    assert not probe_fits(GOOD[2])


def test_the_ceiling_counts_hits_and_instances_where_a_good_probe_fits() -> None:
    fits = [probe_fits(g, prices=p, max_usd=2.0) for g, p in zip(GOOD, PRICES, strict=True)]
    # A search that chose candidate 1 everywhere: a miss, a hit, a miss.
    hits = [bool(g[1]) for g in GOOD]
    # The first instance: its good deployment's probe ($3) is dearer than the $2 budget, so
    # only an extrapolation could have chosen it; the third has no good deployment at all.
    assert ceiling(hits, fits) == pytest.approx(1 / 3)
    # A lucky extrapolation on the first instance counts: the search was within there.
    assert ceiling([True, False, False], fits) == pytest.approx(2 / 3)
    # A budget of $3 lets the first instance's good probe fit.
    wider = [probe_fits(g, prices=p, max_usd=3.0) for g, p in zip(GOOD, PRICES, strict=True)]
    assert ceiling(hits, wider) == pytest.approx(2 / 3)


def test_the_ceiling_agrees_with_the_class_of_a_miss() -> None:
    # The first instance's miss is classed unprobeable exactly when its good probe does not fit.
    why = why_missed(GOOD[0], 1, [1], feasible=True, stop_reason="x", prices=PRICES[0], max_usd=2.0)
    assert why == UNPROBEABLE
    why = why_missed(GOOD[0], 1, [1], feasible=True, stop_reason="x", prices=PRICES[0], max_usd=3.0)
    assert why != UNPROBEABLE


def test_no_instance_has_no_ceiling_and_the_lists_must_match() -> None:
    assert math.isnan(ceiling([], []))
    with pytest.raises(ValueError, match="one of each per instance"):
        ceiling([True], [True, False])
