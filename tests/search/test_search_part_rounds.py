"""Part-round probes (issue 33): where no candidate's probe of one whole round fits the
dollars a search has left, a probe runs part of one round (each function trains that share
of its rows, then the round's synchronisation), priced and measured with its computation
scaled and the rest of the round and the start whole. Pure and deterministic: the
simulator's truth is the model's own."""

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
    ProbeFit,
)
from faasml.sim.deployment import TrueLandscape
from faasml.types import Constraint
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
