"""What probes say of the true job's memory: a probe that ran out of memory raises the floor
of every later proposal and choice; a deployment no probe ran is chosen only with a margin
over the profile's model footprint, or as much room as a probe that ran."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.search import SearchBudget, create_searcher
from faasml.search.deployment import (
    MODEL_MARGIN,
    DeploymentGoal,
    DeploymentSearch,
    DeploymentSpace,
    Measurement,
)
from faasml.sim.deployment import TrueLandscape
from faasml.types import Allocation, Constraint
from faasml.workload import load_workload

CATALOG = load_catalog("aws-lambda").restricted_to(["s3"])
PROFILE = load_workload("bert-imdb")
TRUE_JOB = dataclasses.replace(PROFILE, model_mb=PROFILE.model_mb * 1.3)
"""The true job: its model 30 % larger than profiled (BERT's own case in the benchmark)."""


def small_space() -> DeploymentSpace:
    return DeploymentSpace.build(PROFILE, CATALOG, memory_step_mb=256, max_functions=16)


def least_cost(space: DeploymentSpace, epochs: int = 3) -> DeploymentGoal:
    """A loose deadline: the least cost is the smallest memory that holds the model."""
    deadline = 3.0 * epochs * float(space.table.time_s.min())
    return DeploymentGoal.from_constraint(Constraint(deadline_s=deadline), epochs)


def fits_true_job(allocation: Allocation) -> bool:
    return bool(TRUE_JOB.memory_needed_mb(allocation.n) <= allocation.memory_mb)


def test_a_probe_out_of_memory_raises_the_floor_of_later_probes_and_the_choice() -> None:
    space = small_space()
    room = space.model_room()
    assert room is not None and np.all(room >= 1.0)  # the profile's rules: all fit it
    truth = TrueLandscape(TRUE_JOB, CATALOG, noise=0.0)
    search = DeploymentSearch(space, least_cost(space), budget=SearchBudget(max_probes=6))
    result = search.run(truth.measure)
    first = result.probes[0]
    # The model's optimum is too small for the true job: the first probe fails.
    assert first.measurement.failed == "out of memory"
    floor = 0.0
    for probe in result.probes:
        at = float(room[space.index_of(probe.allocation)])
        assert at > floor  # above every earlier failure's room
        if probe.measurement.failed is not None:
            floor = at
    assert search.model_floor == pytest.approx(floor)
    assert fits_true_job(result.choice)
    assert result.chosen_probe() is not None or room[result.choice_index] >= MODEL_MARGIN * floor
    # A re-trigger keeps what the failure showed.
    later = search.retrigger(space, least_cost(space), budget=SearchBudget(max_probes=2))
    assert later.model_floor == pytest.approx(floor)
    assert fits_true_job(later.run(truth.measure).choice)


def test_a_choice_no_probe_ran_has_room_for_a_larger_model_than_profiled() -> None:
    space = small_space()
    room = space.model_room()
    assert room is not None
    # Without the rule the model's own choice would be the smallest room; no probe fits
    # this search budget, so the choice is the model's best among those with the margin.
    goal = least_cost(space)
    prior_best = int(np.argmin(space.prior(goal) + 0.0))
    assert room[prior_best] < MODEL_MARGIN
    costs = space.probe_cost()
    search = DeploymentSearch(
        space,
        goal,
        budget=SearchBudget(max_probes=3, max_usd=float(costs.min()) / 10),
        probe_costs=costs,
    )
    result = search.run(TrueLandscape(TRUE_JOB, CATALOG, noise=0.0).measure)
    assert result.probes == ()
    assert room[result.choice_index] >= MODEL_MARGIN
    assert fits_true_job(result.choice)


def test_a_probe_that_ran_shows_its_room_is_enough() -> None:
    space = small_space()
    room = space.model_room()
    assert room is not None
    goal = least_cost(space)
    # A probe measured at the smallest room that holds the true job: the choice may then be
    # any candidate with at least that room, not only those with the margin.
    fits = np.flatnonzero(TRUE_JOB.memory_needed_mb(space.table.n) <= space.table.memory_mb)
    row = int(fits[np.argmin(room[fits])])
    assert room[row] < MODEL_MARGIN
    search = DeploymentSearch(space, goal, budget=SearchBudget(max_probes=1))
    search.record(space.allocation(row), Measurement(10.0, 0.001))
    assert search.searcher.choosable[row] and search.searcher.choosable[room >= room[row]].all()
    assert not search.searcher.choosable[room < room[row]].any()
    # A failure that is not about memory says nothing of it.
    other = DeploymentSearch(space, goal, budget=SearchBudget(max_probes=2))
    other.record(space.allocation(row), Measurement(0.0, 0.0, failed="timeout"))
    assert other.model_floor == 0.0 and other.searcher.allowed.all()


def test_a_restricted_searcher_never_proposes_nor_chooses_what_is_ruled_out() -> None:
    grid = np.linspace(0.0, 1.0, 21)
    features = np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2)
    value = np.sum((features - 0.2) ** 2, axis=1)  # the minimum at (0.2, 0.2)
    banned = np.all(features <= 0.3, axis=1)  # the minimum's corner: never proposed
    unverified = features[:, 0] <= 0.5  # chosen only once measured
    for name in ("gp-ei", "random"):
        searcher = create_searcher(name, features, SearchBudget(max_probes=8), seed=1)
        searcher.restrict(~banned, ~unverified)
        while (index := searcher.propose()) is not None:
            assert not banned[index]
            searcher.observe(index, float(value[index]))
        best = searcher.best()
        assert not banned[best]
        assert not unverified[best] or best in searcher.tried()
    with pytest.raises(ConfigError, match="one flag per candidate"):
        searcher.restrict(np.ones(3, dtype=bool))
