"""What a search could reach at a dollar budget, from the truth of each instance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faasml.sim.search_misses import (
    UNPROBEABLE,
    hybrid_reach,
    probe_fits,
    probed_bound,
    why_missed,
)

# Three instances of two candidates each: which are good (within 5 %) and their probe prices.
GOOD = [np.array([True, False]), np.array([False, True]), np.array([False, False])]
PRICES = [np.array([3.0, 1.0]), np.array([1.0, 0.5]), np.array([1.0, 1.0])]


def _fits(max_usd: float) -> list[bool]:
    return [probe_fits(g, prices=p, max_usd=max_usd) for g, p in zip(GOOD, PRICES, strict=True)]


def test_a_good_deployment_whose_probe_costs_more_than_the_budget_does_not_fit() -> None:
    assert _fits(2.0) == [False, True, False]
    # Without prices or a dollar budget, any good deployment could be probed.
    assert probe_fits(GOOD[0]) and probe_fits(GOOD[0], prices=PRICES[0])
    assert not probe_fits(GOOD[2])


def test_no_searcher_that_chooses_a_probed_deployment_passes_the_bound() -> None:
    # Random instances and random searchers that keep the rules: every probe's price within
    # the dollars left, the choice one of the probes. Whatever they probe and choose, the
    # share within never exceeds the bound.
    rng = np.random.default_rng(7)
    for _ in range(200):
        size, count = 6, 5
        goods = [rng.random(size) < 0.25 for _ in range(count)]
        prices = [rng.uniform(0.1, 2.0, size) for _ in range(count)]
        budget = 1.0
        hits = []
        for good, price in zip(goods, prices, strict=True):
            left, probed = budget, []
            for i in rng.permutation(size):
                if price[i] <= left and rng.random() < 0.7:
                    probed.append(int(i))
                    left -= price[i]
            hits.append(bool(probed) and bool(good[int(rng.choice(probed))]))
        fits = [probe_fits(g, prices=p, max_usd=budget) for g, p in zip(goods, prices, strict=True)]
        assert sum(hits) / count <= probed_bound(fits)


def test_an_unprobed_choice_can_pass_the_bound() -> None:
    # The first instance's only good deployment costs $3 to probe against a $2 budget: a
    # search that chose it from its prior, unprobed, is within where no verified choice is.
    fits = _fits(2.0)
    assert probed_bound(fits) == pytest.approx(1 / 3)
    hits = [True, True, False]
    assert sum(hits) / 3 > probed_bound(fits)
    # The hybrid figure counts that hit; it is a what-if of one search, not a bound.
    assert hybrid_reach(hits, fits) == pytest.approx(2 / 3)


def test_the_hybrid_counts_hits_and_instances_where_a_good_probe_fits() -> None:
    fits = _fits(2.0)
    # A search that chose candidate 1 everywhere: a miss, a hit, a miss.
    hits = [bool(g[1]) for g in GOOD]
    assert hybrid_reach(hits, fits) == pytest.approx(1 / 3)
    # A budget of $3 lets the first instance's good probe fit: both figures rise.
    assert hybrid_reach(hits, _fits(3.0)) == pytest.approx(2 / 3)
    assert probed_bound(_fits(3.0)) == pytest.approx(2 / 3)


def test_the_bound_agrees_with_the_class_of_a_miss() -> None:
    # The first instance's miss is classed unprobeable exactly when its good probe does not fit.
    why = why_missed(GOOD[0], 1, [1], feasible=True, stop_reason="x", prices=PRICES[0], max_usd=2.0)
    assert why == UNPROBEABLE
    why = why_missed(GOOD[0], 1, [1], feasible=True, stop_reason="x", prices=PRICES[0], max_usd=3.0)
    assert why != UNPROBEABLE


def test_no_instance_has_no_figure_and_the_lists_must_match() -> None:
    assert math.isnan(probed_bound([]))
    assert math.isnan(hybrid_reach([], []))
    with pytest.raises(ValueError, match="one of each per instance"):
        hybrid_reach([True], [True, False])
