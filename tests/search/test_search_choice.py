"""GP + EI's choice rule: the candidate most likely to keep the constraint and be within 5 %
of the best (``likeliest``), against the lowest upper bound among those whose posterior mean
keeps it (``upper``). Pure and seeded: deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.search import GPEISearcher, LatentObjective, SearchBudget
from faasml.search.deployment import DeploymentGoal, DeploymentSearch, DeploymentSpace
from faasml.sim.deployment import TrueLandscape, perturbed_workload
from faasml.types import Constraint
from faasml.workload import load_workload

CATALOG = load_catalog("aws-lambda").restricted_to(["s3"])
WORKLOAD = load_workload("lr-higgs")


def edge_landscape() -> tuple[np.ndarray, np.ndarray, np.ndarray, LatentObjective]:
    """One feature x: a computation term that falls with x and a synchronisation term that
    grows with it; the latent's limit falls with x (dearer per second), so the best that
    keeps the constraint sits on its edge, x = 0.5 under the prior's mean."""
    x = np.linspace(0.0, 1.0, 41)[:, None]
    compute = 1.0 / (0.2 + x[:, 0])
    sync = 0.5 * x[:, 0] ** 2
    latent = np.log(compute + sync)
    limit = latent[20] + 1.0 - 2.0 * x[:, 0]
    return x, np.stack([compute, sync]), latent, LatentObjective(np.zeros(len(x)), limit)


def searcher(choice: str) -> GPEISearcher:
    """One probe at x = 0, where only the computation counts: its scale is calibrated, the
    synchronisation's (which matters at the edge) stays as uncertain as the prior's."""
    x, terms, latent, goal = edge_landscape()
    search = GPEISearcher(x, SearchBudget(max_probes=5), terms=terms, objective=goal, choice=choice)
    search.observe(0, float(latent[0]))
    return search


def test_the_likeliest_choice_is_further_inside_the_constraint_than_the_upper_bounds() -> None:
    upper, likeliest = searcher("upper"), searcher("likeliest")
    a, b = upper.best(), likeliest.best()
    assert a == 20  # on the edge: its posterior mean keeps the constraint, just
    assert upper.feasible()[a] == pytest.approx(0.5, abs=0.02)
    chance = likeliest.chance_good()
    assert chance is not None and np.all((chance >= 0) & (chance <= 1))
    assert b == int(np.argmax(chance))  # the rule: the most likely good
    assert b < a  # a step inside the edge ...
    assert likeliest.feasible()[b] > 0.6  # ... where it keeps the constraint more often
    assert chance[b] > chance[a]


def test_the_chance_of_being_good_is_deterministic_and_needs_terms() -> None:
    first, second = searcher("likeliest").chance_good(), searcher("likeliest").chance_good()
    assert first is not None and second is not None
    assert np.array_equal(first, second)
    x, _, latent, goal = edge_landscape()
    plain = GPEISearcher(x, SearchBudget(max_probes=5), prior=latent, objective=goal)
    plain.observe(0, float(latent[0]))
    assert plain.chance_good() is None


def test_an_unknown_choice_rule_is_a_one_line_error() -> None:
    x, terms, _, goal = edge_landscape()
    with pytest.raises(ConfigError, match="choice rule is 'best', but must be one of"):
        GPEISearcher(x, SearchBudget(), terms=terms, objective=goal, choice="best")


def test_a_deployment_search_chooses_the_likeliest_and_its_retrigger_too() -> None:
    space = DeploymentSpace.build(WORKLOAD, CATALOG, memory_step_mb=256, max_functions=128)
    budget = 1.5 * WORKLOAD.epochs * float(space.table.cost_usd.min())
    goal = DeploymentGoal.from_constraint(Constraint(budget_usd=budget), WORKLOAD.epochs)
    truth = TrueLandscape(perturbed_workload(WORKLOAD, np.random.default_rng(3)), CATALOG, seed=3)
    search = DeploymentSearch(space, goal, budget=SearchBudget(max_probes=4), seed=3)
    result = search.run(truth.measure)
    gp = search.searcher
    assert isinstance(gp, GPEISearcher) and gp.choice == "likeliest"
    chance = gp.chance_good()
    assert chance is not None
    assert result.choice_index == int(np.argmax(np.where(gp.eligible(), chance, -1.0)))
    again = search.retrigger(space, goal, budget=SearchBudget(max_probes=2))
    assert isinstance(again.searcher, GPEISearcher) and again.searcher.choice == "likeliest"
    upper = DeploymentSearch(space, goal, choice="upper")
    assert isinstance(upper.searcher, GPEISearcher) and upper.searcher.choice == "upper"


def test_a_probe_on_the_constraints_edge_is_measured_again_with_repeats() -> None:
    x, terms, latent, goal = edge_landscape()
    for repeats, expected in ((1, None), (2, 20)):
        search = GPEISearcher(
            x, SearchBudget(max_probes=5), terms=terms, objective=goal, repeats=repeats
        )
        search.observe(20, float(latent[20]))  # exactly on the edge: one probe cannot tell
        assert search.unsettled() == expected
    search.observe(20, float(latent[20]))
    assert search.unsettled() is None  # measured twice: no more repeats of it


def test_a_probe_well_inside_the_constraint_is_not_measured_again() -> None:
    x, terms, latent, goal = edge_landscape()
    search = GPEISearcher(x, SearchBudget(max_probes=5), terms=terms, objective=goal, repeats=2)
    search.observe(20, float(latent[20]) - 0.5)  # far inside: its side of the edge is sure
    assert search.feasible()[20] > 0.84
    assert search.unsettled() is None


def test_the_last_probe_repeats_an_unsettled_measured_choice() -> None:
    x, terms, latent, goal = edge_landscape()
    search = GPEISearcher(
        x, SearchBudget(max_probes=2), terms=terms, objective=goal, repeats=2, choice="upper"
    )
    search.observe(20, float(latent[20]))
    assert search.best() == 20  # measured: nothing to confirm, but its side is unsure
    assert search.propose() == 20
    search.observe(20, float(latent[20]))
    assert search.propose() is None
    assert [i for i, _ in search.observed] == [20, 20]


def test_repeats_must_be_a_positive_integer() -> None:
    x, terms, _, goal = edge_landscape()
    with pytest.raises(ConfigError, match="repeats is 0, but must be an integer >= 1"):
        GPEISearcher(x, SearchBudget(), terms=terms, objective=goal, repeats=0)


def test_a_deployment_search_repeats_at_most_as_often_as_allowed_and_its_retrigger_too() -> None:
    space = DeploymentSpace.build(WORKLOAD, CATALOG, memory_step_mb=256, max_functions=128)
    budget = 1.5 * WORKLOAD.epochs * float(space.table.cost_usd.min())
    goal = DeploymentGoal.from_constraint(Constraint(budget_usd=budget), WORKLOAD.epochs)
    truth = TrueLandscape(perturbed_workload(WORKLOAD, np.random.default_rng(0)), CATALOG, seed=0)
    counts: dict[int, int] = {}
    for repeats in (1, 2):
        search = DeploymentSearch(
            space, goal, budget=SearchBudget(max_probes=6), seed=0, repeats=repeats
        )
        result = search.run(truth.measure)
        probed = [(p.allocation.n, p.allocation.memory_mb) for p in result.probes]
        counts[repeats] = max(probed.count(a) for a in probed)
        again = search.retrigger(space, goal, budget=SearchBudget(max_probes=3))
        assert isinstance(again.searcher, GPEISearcher) and again.searcher.repeats == repeats
    assert counts == {1: 1, 2: 2}  # this instance's edge needs one repeat; never a third
