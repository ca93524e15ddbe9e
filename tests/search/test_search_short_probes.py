"""Probes fitted to the search's dollars (issue 33): a deployment whose full probe does not fit
what is left is probed with fewer rounds, and its measurement counts with the larger noise of
fewer rounds. Pure and deterministic: the simulator's truth is the model's own, or a seeded
perturbation of it."""

from __future__ import annotations

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
