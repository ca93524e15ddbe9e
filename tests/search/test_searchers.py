"""Searchers through their public contract: synthetic landscapes with a known optimum."""

from __future__ import annotations

import numpy as np
import pytest

from faasml.exceptions import ConfigError, UnknownNameError
from faasml.search import SEARCHERS, GPEISearcher, LatentObjective, SearchBudget, create_searcher


def grid_features(size: int = 25) -> np.ndarray:
    axis = np.linspace(0.0, 1.0, size)
    xs, ys = np.meshgrid(axis, axis, indexing="ij")
    return np.stack([xs.ravel(), ys.ravel()], axis=1)


def bowl(x: np.ndarray, centre: tuple[float, float]) -> np.ndarray:
    """A smooth landscape with one minimum at ``centre`` (value 0 there)."""
    return (x[:, 0] - centre[0]) ** 2 + 2.0 * (x[:, 1] - centre[1]) ** 2


def drive(searcher, values: np.ndarray, noise: float = 0.0, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    while (index := searcher.propose()) is not None:
        searcher.observe(index, float(values[index] + rng.normal(0.0, noise)), cost_usd=1.0)
    return searcher.best()


@pytest.mark.parametrize("centre", [(0.2, 0.7), (0.8, 0.3)])
def test_gp_ei_finds_the_minimum_of_a_bowl_cold(centre: tuple[float, float]) -> None:
    x = grid_features()
    values = bowl(x, centre)
    searcher = GPEISearcher(x, SearchBudget(max_probes=15, ei_threshold=1e-4), noise=1e-3)
    best = drive(searcher, values)
    assert values[best] <= 0.01  # within a grid step or so of the optimum
    assert len(searcher.observed) <= 15


def test_gp_ei_beats_random_search_on_average_at_equal_probes() -> None:
    x = grid_features(15)
    gp_gaps, random_gaps = [], []
    for seed in range(3):
        centre = tuple(np.random.default_rng(seed).uniform(0.1, 0.9, size=2))
        values = bowl(x, centre)  # type: ignore[arg-type]
        budget = SearchBudget(max_probes=10, ei_threshold=0.0)
        gp = GPEISearcher(x, budget, seed=seed, noise=1e-3)
        rnd = create_searcher("random", x, budget, seed=seed)
        gp_gaps.append(values[drive(gp, values)])
        random_gaps.append(values[drive(rnd, values)])
    assert np.mean(gp_gaps) < np.mean(random_gaps)


def test_a_good_prior_puts_the_first_probe_at_its_optimum_and_stops_early() -> None:
    x = grid_features()
    values = bowl(x, (0.3, 0.6))
    prior = values + 0.5  # right shape, wrong level: the GP learns the offset
    searcher = GPEISearcher(
        x, SearchBudget(max_probes=10, ei_threshold=0.01), prior=prior, noise=1e-3
    )
    first = searcher.propose()
    assert first == int(np.argmin(prior))
    best = drive(searcher, values)
    assert best == first
    assert searcher.stop_reason is not None and "expected improvement" in searcher.stop_reason
    assert len(searcher.observed) < 10


def test_the_dollar_budget_stops_a_search() -> None:
    x = grid_features(5)
    searcher = create_searcher("random", x, SearchBudget(max_probes=20, max_usd=2.5))
    drive(searcher, bowl(x, (0.5, 0.5)))  # each probe costs 1 dollar
    assert len(searcher.observed) == 3
    assert searcher.stop_reason is not None and "search budget" in searcher.stop_reason


def test_no_candidate_is_proposed_twice_and_every_one_can_be_measured() -> None:
    x = grid_features(2)
    for name in SEARCHERS.names():
        searcher = create_searcher(name, x, SearchBudget(max_probes=50, ei_threshold=0.0))
        seen = []
        while (index := searcher.propose()) is not None:
            seen.append(index)
            searcher.observe(index, float(index % 4))
        assert sorted(seen) == list(range(4)), name
        assert searcher.stop_reason == "every candidate measured"


def test_grid_covers_the_space_coarsely() -> None:
    x = grid_features(21)
    searcher = create_searcher("grid", x, SearchBudget(max_probes=9))
    probes = []
    while (index := searcher.propose()) is not None:
        probes.append(x[index])
        searcher.observe(index, 0.0)
    points = {tuple(np.round(p, 2)) for p in probes}
    assert len(points) == 9
    assert {0.0, 0.5, 1.0} == {float(v) for p in points for v in p}


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="max_probes is 0"):
        SearchBudget(max_probes=0)
    with pytest.raises(ConfigError, match="max_usd"):
        SearchBudget(max_usd=-1.0)
    with pytest.raises(UnknownNameError, match="choose one of: gp-ei, grid, random, tpe"):
        create_searcher("bayes", grid_features(2), SearchBudget())
    searcher = create_searcher("random", grid_features(2), SearchBudget())
    with pytest.raises(ConfigError, match="not among the 4 candidates"):
        searcher.observe(7, 1.0)
    with pytest.raises(ConfigError, match="not finite"):
        searcher.observe(0, float("nan"))
    with pytest.raises(ConfigError, match="one finite value per candidate"):
        create_searcher("gp-ei", grid_features(2), SearchBudget(), prior=np.zeros(3))


def test_a_constraint_keeps_the_choice_feasible_and_steers_the_search() -> None:
    """Minimise x0 subject to x0 + x1 >= 1 written as a limit on the observed value
    g = 1 - (x0 + x1) <= 0, with objective g + offset where offset = x0 - g."""
    x = grid_features(21)
    g = 1.0 - (x[:, 0] + x[:, 1])
    goal = LatentObjective(offset=x[:, 0] - g, limit=np.zeros(len(x)))
    searcher = GPEISearcher(
        x, SearchBudget(max_probes=15, ei_threshold=1e-4), objective=goal, noise=1e-3
    )
    best = drive(searcher, g)
    assert g[best] <= 1e-9  # keeps the constraint
    assert x[best, 0] <= 0.15  # and is near the feasible optimum x0 = 0 (x1 = 1)


def test_the_terms_scales_are_learnt_and_the_optimum_found() -> None:
    """The prior is log(a + b) of two terms; the truth scales them by 1.6 and 0.7: a few
    probes calibrate both scales (near log 1.6 and log 0.7) and find the true minimum."""
    x = grid_features(21)
    first = 1.0 / (0.05 + x[:, 0])  # falls with x0 (computation shared by more workers)
    second = 0.5 + 4.0 * x[:, 0] ** 2 + x[:, 1]  # grows with x0 (synchronisation)
    truth = np.log(1.6 * first + 0.7 * second)
    searcher = GPEISearcher(
        x, SearchBudget(max_probes=6, ei_threshold=0.0), seed=0, terms=np.stack([first, second])
    )
    best = drive(searcher, truth)
    assert truth[best] <= truth.min() + 0.01
    scales = searcher.scales()
    assert scales is not None
    theta, deviation = scales
    assert abs(theta[0] - np.log(1.6)) < 0.1 and abs(theta[1] - np.log(0.7)) < 0.15
    assert np.all(deviation < 0.5)  # narrower than the prior's


def test_a_search_no_probe_fits_recommends_the_priors_choice() -> None:
    x = grid_features(9)
    prior = bowl(x, (0.25, 0.75))
    searcher = GPEISearcher(
        x, SearchBudget(max_probes=5, max_usd=0.5), prior=prior, costs=np.ones(len(x))
    )
    assert searcher.propose() is None
    assert "budget" in (searcher.stop_reason or "")
    assert searcher.best() == int(np.argmin(prior))


@pytest.mark.parametrize(("cheapest", "probes"), [(0.6, False), (0.4, True)])
def test_a_warm_search_that_cannot_pay_two_probes_takes_the_priors_choice(
    cheapest: float, probes: bool
) -> None:
    """A $1 budget whose cheapest probe costs $0.60 affords one probe, not two: no probe,
    the prior's choice. At $0.40 two fit, and the search probes."""
    x = grid_features(9)
    prior = bowl(x, (0.25, 0.75))
    costs = np.full(len(x), 0.9)
    costs[-1] = cheapest
    searcher = GPEISearcher(x, SearchBudget(max_probes=5, max_usd=1.0), prior=prior, costs=costs)
    first = searcher.propose()
    if probes:
        assert first is not None
    else:
        assert first is None
        assert "no two probes" in (searcher.stop_reason or "")
        assert searcher.best() == int(np.argmin(prior))


def test_after_a_probe_that_breaks_the_constraint_the_next_aims_at_the_best_that_keeps_it() -> None:
    """Minimise x0 subject to x0 + x1 >= 1 (as above), with a prior that wrongly thinks
    x0 + x1 >= 0.9 is enough: its first probe, (0, 0.9), breaks the constraint. The next probe
    improves on the posterior's own choice (x0 near 0, x1 near 1), not merely the candidate
    surest to keep the constraint (the far corner, x0 = 1)."""
    x = grid_features(21)
    g = 1.0 - (x[:, 0] + x[:, 1])
    goal = LatentObjective(offset=x[:, 0] - g, limit=np.zeros(len(x)))
    searcher = GPEISearcher(
        x, SearchBudget(max_probes=3, ei_threshold=0.0), objective=goal, prior=g - 0.1
    )
    first = searcher.propose()
    assert first is not None and x[first, 0] == 0.0 and g[first] > 0  # breaks it
    searcher.observe(first, float(g[first]))
    second = searcher.propose()
    assert second is not None
    assert x[second, 0] <= 0.2
    searcher.observe(second, float(g[second]))
    assert g[searcher.best()] <= 1e-9 and x[searcher.best(), 0] <= 0.2


def _bowl_measured_beside_its_minimum(
    budget: SearchBudget, costs: np.ndarray | None = None
) -> GPEISearcher:
    """A 1-D bowl whose prior is exact, measured on both sides of its minimum (x = 0.5) but
    not at it: the posterior's choice is the unmeasured minimum."""
    x = np.linspace(0.0, 1.0, 11)[:, None]
    values = (x[:, 0] - 0.5) ** 2
    searcher = GPEISearcher(x, budget, prior=values.copy(), costs=costs)
    for index in (3, 7):
        searcher.observe(index, float(values[index]), cost_usd=1.0)
    return searcher


def test_an_unmeasured_choice_is_measured_before_the_search_stops() -> None:
    # The expected improvement is below the (high) threshold: the search would stop with a
    # choice no probe measured; it measures the choice first, then stops.
    searcher = _bowl_measured_beside_its_minimum(SearchBudget(max_probes=10, ei_threshold=0.5))
    assert searcher.best() == 5 and 5 not in searcher.tried()
    assert searcher.propose() == 5
    searcher.observe(5, 0.0, cost_usd=1.0)
    assert searcher.propose() is None and searcher.best() == 5
    assert searcher.stop_reason is not None and "expected improvement" in searcher.stop_reason
    # Without the rule, the same search stops at once on the unmeasured choice.
    unconfirmed = _bowl_measured_beside_its_minimum(SearchBudget(max_probes=10, ei_threshold=0.5))
    unconfirmed.confirm = False
    assert unconfirmed.propose() is None and unconfirmed.best() == 5


def test_a_choice_whose_probe_does_not_fit_the_dollars_left_stays_unmeasured() -> None:
    costs = np.ones(11)
    costs[5] = 5.0  # the minimum's probe costs more than the $2 left of $4
    searcher = _bowl_measured_beside_its_minimum(
        SearchBudget(max_probes=10, ei_threshold=0.5, max_usd=4.0), costs
    )
    assert searcher.propose() is None
    assert searcher.best() == 5 and 5 not in searcher.tried()
