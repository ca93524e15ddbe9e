"""The deployment search's choice and the user's constraint: never a deployment its posterior
says breaks the budget or deadline by more than the noise; where no probe fits the search's
dollars, the model's choice, said in one line. Pure and seeded."""

from __future__ import annotations

import numpy as np
import pytest

from faasml.catalog import load_catalog
from faasml.search import GPEISearcher, LatentObjective, SearchBudget
from faasml.search._base import Array
from faasml.search.deployment import DeploymentGoal, DeploymentSearch, DeploymentSpace
from faasml.types import Constraint
from faasml.workload import load_workload

NOISE = 0.05


class FixedPosterior(GPEISearcher):
    """A fake posterior (the GP's fit is not what is tested here): fixed means, deviations
    and chances of being good, so the choice rule alone decides."""

    def __init__(self, mean: Array, chance: Array, limit: Array) -> None:
        x = np.linspace(0.0, 1.0, len(mean))[:, None]
        terms = np.ones((1, len(mean)))
        goal = LatentObjective(np.zeros(len(mean)), limit)
        super().__init__(
            x,
            SearchBudget(max_probes=5),
            terms=terms,
            objective=goal,
            choice="likeliest",
            noise=NOISE,
        )
        self.observe(1, float(mean[1]))
        self._mean, self._chance = mean, chance

    def posterior(self) -> tuple[Array, Array]:
        return self._mean, np.full(len(self._mean), 0.3)

    def chance_good(self, eligible: np.ndarray | None = None) -> Array | None:
        return self._chance


def test_the_likeliest_good_is_not_chosen_where_its_posterior_breaks_the_constraint() -> None:
    limit = np.zeros(3)
    # Candidate 0 is the likeliest good (a wide posterior puts it under the limit in many
    # draws), but its posterior mean is over the limit by twice the noise; 1 and 2 keep it.
    mean = np.array([2 * NOISE, -0.01, -0.2])
    chance = np.array([0.6, 0.3, 0.1])
    search = FixedPosterior(mean, chance, limit)
    assert search.best() == 1
    # Over the limit by less than the noise: still the likeliest good.
    search = FixedPosterior(np.array([0.5 * NOISE, -0.01, -0.2]), chance, limit)
    assert search.best() == 0


def test_where_no_candidate_keeps_it_the_least_violation_and_the_verdict() -> None:
    catalog = load_catalog("aws-lambda").restricted_to(["s3"])
    workload = load_workload("lr-higgs")
    space = DeploymentSpace.build(workload, catalog, memory_step_mb=1024, max_functions=16)
    cheapest = workload.epochs * float(space.table.cost_usd.min())
    goal = DeploymentGoal.from_constraint(Constraint(budget_usd=0.1 * cheapest), workload.epochs)
    search = DeploymentSearch(space, goal, budget=SearchBudget(max_probes=3))
    result = search.result()  # before any probe: the model's view
    assert result.infeasible


def space_and_goal() -> tuple[DeploymentSpace, DeploymentGoal]:
    catalog = load_catalog("aws-lambda").restricted_to(["s3"])
    workload = load_workload("lr-higgs")
    space = DeploymentSpace.build(workload, catalog, memory_step_mb=512, max_functions=32)
    budget = 1.5 * workload.epochs * float(space.table.cost_usd.min())
    return space, DeploymentGoal.from_constraint(Constraint(budget_usd=budget), workload.epochs)


@pytest.mark.parametrize(
    ("searcher", "warm"), [("gp-ei", True), ("gp-ei", False), ("random", False)]
)
def test_no_probe_fits_the_dollars_the_models_choice_said_in_one_line(
    searcher: str, warm: bool
) -> None:
    space, goal = space_and_goal()
    costs = space.probe_cost()
    tiny = 0.5 * float(costs.min())
    search = DeploymentSearch(
        space,
        goal,
        searcher=searcher,
        warm=warm,
        budget=SearchBudget(max_probes=5, max_usd=tiny),
        probe_costs=costs,
    )
    result = search.run(lambda a: pytest.fail(f"probed {a}"))
    assert result.probes == ()
    assert result.choice_index == int(np.argmin(space.prior(goal)))
    line = result.stop_reason
    assert "\n" not in line
    assert line.startswith("no probe fits the search budget")
    assert f"${tiny:.6g}" in line and f"${float(costs.min()):.6g}" in line
    assert line.endswith("the model's choice, unmeasured")


def test_a_warm_search_whose_dollars_pay_one_probe_takes_the_models_choice_and_says_why() -> None:
    space, goal = space_and_goal()
    costs = space.probe_cost()
    search = DeploymentSearch(
        space,
        goal,
        budget=SearchBudget(max_probes=5, max_usd=1.5 * float(costs.min())),
        probe_costs=costs,
    )
    result = search.run(lambda a: pytest.fail(f"probed {a}"))
    assert result.probes == ()
    assert result.choice_index == int(np.argmin(space.prior(goal)))
    assert result.stop_reason.startswith("no two probes fit the search budget ($")
    assert result.stop_reason.endswith("the model's choice, unmeasured")
