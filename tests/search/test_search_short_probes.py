"""Probes fitted to the search's dollars (issue 33): a deployment whose full probe does not fit
what is left is probed with fewer rounds, and its measurement counts with the larger noise of
fewer rounds; where no candidate's probe of one whole round fits, a probe runs part of one
round (each function trains that share of its rows, then the round's synchronisation), priced
and measured with its computation scaled and the rest of the round and the start whole. Pure
and deterministic: the simulator's truth is the model's own, or a seeded perturbation of it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.search import SearchBudget
from faasml.search.deployment import (
    DeploymentGoal,
    DeploymentSearch,
    DeploymentSpace,
    Measurement,
    ProbeFit,
)
from faasml.sim.deployment import TrueLandscape
from faasml.types import Allocation, Constraint
from faasml.workload import load_workload

CATALOG = load_catalog("aws-lambda").restricted_to(["s3"])
WORKLOAD = load_workload("mobilenet-cifar10")
SPACE = DeploymentSpace.build(WORKLOAD, CATALOG, memory_step_mb=512, max_functions=64)
GOAL = DeploymentGoal.from_constraint(
    Constraint(budget_usd=1.5 * WORKLOAD.epochs * float(SPACE.table.cost_usd.min())),
    WORKLOAD.epochs,
)
FULL = 5
PARTS = 8
BEST = int(np.argmin(SPACE.prior(GOAL)))
"""The model's optimum: a warm search's first proposal."""


def budget_for(rounds: float) -> SearchBudget:
    """Dollars for a probe of the model's optimum with ``rounds`` rounds and a bit: two of its
    one-round probes fit, its full probe does not."""
    fit = ProbeFit(SPACE, FULL)
    assert fit.full[BEST] == FULL  # the full probe runs every one of its rounds
    price = float(SPACE.probe_price(np.full(len(SPACE), rounds))[BEST])
    return SearchBudget(max_probes=1, max_usd=price * 1.001)


def model_measure(calls: list[tuple[Allocation, int | None]]):  # type: ignore[no-untyped-def]
    """The model's own time and cost, the probe billed at the model's price of its rounds."""

    def measure(allocation: Allocation, rounds: int | None = None) -> Measurement:
        calls.append((allocation, rounds))
        index = SPACE.index_of(allocation)
        assert index is not None
        ran = FULL if rounds is None else rounds
        price = float(SPACE.probe_price(np.full(len(SPACE), float(ran)))[index])
        time_s = float(SPACE.table.time_s[index])
        return Measurement(time_s, float(SPACE.table.cost_usd[index]), 1.0, price)

    return measure


def test_a_probe_that_does_not_fit_whole_is_shortened_to_the_rounds_that_fit() -> None:
    budget = budget_for(2.5)
    full_price = float(SPACE.probe_cost(rounds=FULL)[BEST])
    assert budget.max_usd is not None and full_price > budget.max_usd
    calls: list[tuple[Allocation, int | None]] = []
    fitted = DeploymentSearch(SPACE, GOAL, budget=budget, probe_rounds=FULL)
    probe = fitted.step(model_measure(calls))
    assert probe is not None and probe.allocation == SPACE.allocation(BEST)
    assert calls == [(SPACE.allocation(BEST), 2)]  # two rounds fit, the third does not
    assert probe.rounds == 2
    assert fitted.result().search_usd <= budget.max_usd
    # Full probes only (the rule before): the optimum is never probed, something else is.
    plain = DeploymentSearch(SPACE, GOAL, budget=budget, probe_costs=SPACE.probe_cost(rounds=FULL))
    other = plain.step(model_measure(calls := []))
    assert other is None or other.allocation != SPACE.allocation(BEST)


def test_a_probe_that_fits_whole_runs_its_full_rounds() -> None:
    calls: list[tuple[Allocation, int | None]] = []
    fitted = DeploymentSearch(SPACE, GOAL, budget=budget_for(FULL + 1), probe_rounds=FULL)
    probe = fitted.step(model_measure(calls))
    assert probe is not None and probe.rounds is None  # not shortened
    assert calls == [(SPACE.allocation(BEST), FULL)]


def test_a_shortened_probe_weighs_less_in_the_posterior() -> None:
    """The same measurement from one round leaves the posterior less sure there than from
    the full probe's rounds (its noise √5 times as large)."""
    allocation = SPACE.allocation(BEST)
    measured = Measurement(
        float(SPACE.table.time_s[BEST]) * 1.3, float(SPACE.table.cost_usd[BEST]) * 1.3
    )
    deviation = {}
    mean = {}
    for rounds in (None, 1):
        search = DeploymentSearch(SPACE, GOAL, budget=budget_for(FULL), probe_rounds=FULL)
        probe = search.record(allocation, measured, rounds)
        assert probe.rounds == rounds
        m, sd = search.searcher.posterior()  # type: ignore[attr-defined]
        deviation[rounds], mean[rounds] = float(sd[BEST]), float(m[BEST])
    assert deviation[1] > 1.5 * deviation[None]
    # The full probe pulls the posterior nearer its measurement (30 % slower than the model).
    model = float(np.log(SPACE.table.time_s[BEST]))
    assert mean[None] - model > mean[1] - model > 0


def test_the_simulator_bills_and_blurs_a_shorter_probe_as_its_rounds() -> None:
    allocation = SPACE.allocation(BEST)
    truth = TrueLandscape(WORKLOAD, CATALOG, seed=3, probe_rounds=FULL)
    short = [truth.measure(allocation, 1) for _ in range(400)]
    truth = TrueLandscape(WORKLOAD, CATALOG, seed=3, probe_rounds=FULL)
    full = [truth.measure(allocation) for _ in range(400)]
    spread = np.std(np.log([m.time_s for m in short])) / np.std(np.log([m.time_s for m in full]))
    assert spread == pytest.approx(np.sqrt(FULL), rel=1e-6)  # the same draws, √5 as wide
    assert max(m.probe_usd for m in short) < min(m.probe_usd for m in full)


def test_the_fit_is_kept_by_a_retrigger_and_checked() -> None:
    first = DeploymentSearch(SPACE, GOAL, budget=budget_for(FULL), probe_rounds=FULL)
    again = first.retrigger(SPACE, GOAL)
    assert again.fit is not None and again.fit.full_rounds == FULL
    with pytest.raises(ConfigError, match="probe_rounds is 0, but must be an integer >= 1"):
        DeploymentSearch(SPACE, GOAL, probe_rounds=0)


def test_a_part_round_costs_its_computation_share_and_the_whole_rest() -> None:
    whole = SPACE.probe_price(1.0)
    assert SPACE.part_price(1.0) == pytest.approx(whole)
    start = SPACE.table.startup_usd
    half = SPACE.part_price(0.5)
    # Half the computation is saved, the synchronisation, load and start are not.
    assert np.all(half < whole) and np.all(half > start + (whole - start) / 2)
    k = np.maximum(SPACE.workload_rounds.astype(float), 1.0)
    compute = SPACE.table.function_usd * SPACE.table.compute_s / SPACE.table.time_s / k
    assert whole - half == pytest.approx(compute / 2)


@pytest.mark.parametrize(("eighths", "expected"), [(3.2, 3 / 8), (7.9, 7 / 8), (0.4, 1 / 8)])
def test_the_fit_runs_the_parts_of_one_round_that_the_dollars_left_pay(
    eighths: float, expected: float
) -> None:
    fit = ProbeFit(SPACE, FULL, parts=PARTS)
    price = float(SPACE.part_price(eighths / PARTS)[BEST])
    assert fit.rounds(BEST, price) == pytest.approx(expected)
    assert fit.noise_factor(BEST, expected) == pytest.approx(math.sqrt(FULL / expected))
    # One whole round fits: whole rounds, as without parts.
    assert fit.rounds(BEST, float(SPACE.probe_price(2.5)[BEST])) == 2
    assert ProbeFit(SPACE, FULL).rounds(BEST, price) == 1  # no parts: one round at least


def test_a_search_where_no_round_fits_probes_part_of_one() -> None:
    """Dollars for a few eighths of a round: no candidate's one-round probe fits, so without
    parts nothing is probed (the model's choice); with them the part that fits is."""
    rounds: list[float] = []
    truth = TrueLandscape(WORKLOAD, CATALOG, seed=1, probe_rounds=FULL)

    def measure(allocation, ran):  # type: ignore[no-untyped-def]
        rounds.append(ran)
        return truth.measure(allocation, ran)

    price = 2.2 * float(SPACE.part_price(1 / PARTS).min())
    assert price < float(ProbeFit(SPACE, FULL).shortest.min())
    budget = SearchBudget(max_probes=3, max_usd=price)
    whole = DeploymentSearch(SPACE, GOAL, budget=budget, probe_rounds=FULL)
    assert whole.step(measure) is None and rounds == []
    assert "the model's choice" in whole.result().stop_reason
    search = DeploymentSearch(SPACE, GOAL, budget=budget, probe_rounds=FULL, round_parts=PARTS)
    probe = search.step(measure)
    assert probe is not None and probe.rounds is not None and 0 < probe.rounds < 1
    assert rounds == [probe.rounds]
    result = search.run(measure)
    assert result.search_usd <= price and "the model's choice" not in result.stop_reason
    assert all(r < 1 for r in rounds)


def test_the_simulator_bills_a_part_round_as_the_model_prices_it() -> None:
    truth = TrueLandscape(WORKLOAD, CATALOG, noise=0.0, probe_rounds=FULL)
    allocation = SPACE.allocation(BEST)
    for fraction in (0.125, 0.5, 1.0):
        measured = truth.measure(allocation, fraction)
        assert measured.probe_usd == pytest.approx(
            float(SPACE.part_price(fraction)[BEST]), rel=1e-6
        )
        assert measured.time_s == pytest.approx(float(SPACE.table.time_s[BEST]), rel=1e-6)
    with pytest.raises(ConfigError, match=r"rounds is 0\.0, but must be positive"):
        truth.measure(allocation, 0.0)


def test_part_rounds_are_checked_and_kept_by_a_retrigger() -> None:
    first = DeploymentSearch(SPACE, GOAL, probe_rounds=FULL, round_parts=PARTS)
    again = first.retrigger(SPACE, GOAL)
    assert again.fit is not None and again.fit.parts == PARTS
    with pytest.raises(ConfigError, match="round_parts is 1, but must be an integer >= 2"):
        DeploymentSearch(SPACE, GOAL, probe_rounds=FULL, round_parts=1)
    with pytest.raises(ConfigError, match="round_parts needs probe_rounds"):
        DeploymentSearch(SPACE, GOAL, round_parts=PARTS)
