"""A search's verdict that no deployment keeps the constraint (``SearchResult.infeasible``):
the right answer where the user's budget or deadline cannot be kept. Pure and seeded."""

from __future__ import annotations

import numpy as np

from faasml.catalog import load_catalog
from faasml.search import GPEISearcher, LatentObjective, SearchBudget
from faasml.search.deployment import DeploymentGoal, DeploymentSearch, DeploymentSpace
from faasml.sim.deployment import TrueLandscape, perturbed_workload
from faasml.types import Constraint, Objective
from faasml.workload import load_workload

CATALOG = load_catalog("aws-lambda").restricted_to(["s3"])
WORKLOAD = load_workload("lr-higgs")


def landscape(room: float) -> tuple[GPEISearcher, np.ndarray]:
    """One feature; the latent's limit sits ``room`` above the latent everywhere (below it
    where ``room`` < 0: no candidate keeps the constraint)."""
    x = np.linspace(0.0, 1.0, 21)[:, None]
    latent = np.log(1.0 / (0.2 + x[:, 0]) + 0.5 * x[:, 0] ** 2)
    goal = LatentObjective(np.zeros(len(x)), latent + room)
    terms = np.stack([1.0 / (0.2 + x[:, 0]), 0.5 * x[:, 0] ** 2])
    return GPEISearcher(x, SearchBudget(max_probes=5), terms=terms, objective=goal), latent


def test_the_gp_says_none_keeps_the_constraint_only_when_its_posterior_says_so() -> None:
    for room, expected in ((-0.5, True), (0.3, False)):
        search, latent = landscape(room)
        assert search.keeps_none() is expected  # the prior alone, before any probe
        search.observe(10, float(latent[10]))
        assert search.keeps_none() is expected


def test_a_probe_far_slower_than_the_prior_turns_the_verdict() -> None:
    search, latent = landscape(0.3)
    assert not search.keeps_none()
    for index in (0, 10, 20):  # every probe 3x slower than the model: over every limit
        search.observe(index, float(latent[index]) + np.log(3.0))
    assert search.keeps_none()


def space_and_goal(share: float) -> tuple[DeploymentSpace, DeploymentGoal]:
    space = DeploymentSpace.build(WORKLOAD, CATALOG, memory_step_mb=256, max_functions=128)
    budget = share * WORKLOAD.epochs * float(space.table.cost_usd.min())
    return space, DeploymentGoal.from_constraint(Constraint(budget_usd=budget), WORKLOAD.epochs)


def test_a_budget_below_the_cheapest_run_is_reported_gp_from_its_posterior() -> None:
    truth = TrueLandscape(perturbed_workload(WORKLOAD, np.random.default_rng(1)), CATALOG, seed=1)
    exact_cost = truth.exact(space_and_goal(1.0)[0])[1]
    for share, expected in ((0.3, True), (3.0, False)):
        space, goal = space_and_goal(share)
        assert goal.limit is not None
        # The truth agrees: at 0.3 × no deployment keeps it, at 3 × some does.
        assert bool(np.any(WORKLOAD.epochs * exact_cost <= goal.limit)) is not expected
        for name, warm in (("gp-ei", True), ("gp-ei", False), ("random", False)):
            search = DeploymentSearch(
                space, goal, searcher=name, warm=warm, budget=SearchBudget(max_probes=4), seed=1
            )
            result = search.run(truth.measure)
            if name == "random":
                # No posterior: its verdict is what its probes measured.
                kept = any(
                    goal.keeps(p.measurement.time_s, p.measurement.cost_usd) for p in result.probes
                )
                assert result.infeasible is not kept
                assert result.infeasible or not expected
            else:
                assert result.infeasible is expected, (name, warm, share)


def test_no_constraint_is_never_infeasible() -> None:
    space, _ = space_and_goal(1.0)
    goal = DeploymentGoal(Objective.MIN_TIME, WORKLOAD.epochs)  # no limit
    truth = TrueLandscape(perturbed_workload(WORKLOAD, np.random.default_rng(2)), CATALOG, seed=2)
    result = DeploymentSearch(space, goal, budget=SearchBudget(max_probes=2)).run(truth.measure)
    assert not result.infeasible
