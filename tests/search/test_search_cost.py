"""The search's dollars follow the bill its probes predict (``bill_share``): a job that turns
out cheaper than its profile gets a smaller search. Pure and deterministic: the probes'
measurements are the model's own, scaled."""

from __future__ import annotations

import numpy as np
import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.search import SearchBudget
from faasml.search.deployment import (
    SEARCH_SHARE,
    DeploymentGoal,
    DeploymentSearch,
    DeploymentSpace,
    Measurement,
)
from faasml.types import Allocation, Constraint
from faasml.workload import load_workload

CATALOG = load_catalog("aws-lambda").restricted_to(["s3"])
WORKLOAD = load_workload("lr-higgs")
SPACE = DeploymentSpace.build(WORKLOAD, CATALOG, memory_step_mb=512, max_functions=64)
COSTS = SPACE.probe_cost()
GOAL = DeploymentGoal.from_constraint(
    Constraint(deadline_s=1.5 * WORKLOAD.epochs * float(SPACE.table.time_s.min())),
    WORKLOAD.epochs,
)
FASTER = 0.5
"""The true job takes half the time the profile predicts: its bill (least cost) is smaller."""


def measure(allocation: Allocation) -> Measurement:
    """The model's time × ``FASTER`` (no noise); the probe billed at its predicted price with
    its rounds' part scaled the same way."""
    index = SPACE.index_of(allocation)
    assert index is not None
    time_s = float(SPACE.table.time_s[index]) * FASTER
    start = float(SPACE.table.startup_usd[index])
    price = start + (float(COSTS[index]) - start) * FASTER
    return Measurement(time_s, time_s * float(SPACE.cost_per_s()[index]), 1.0, price)


def search(bill_share: float | None) -> DeploymentSearch:
    budget = SearchBudget(
        max_probes=10, max_usd=SEARCH_SHARE * SPACE.predicted_bill(GOAL), ei_threshold=0.0
    )
    return DeploymentSearch(SPACE, GOAL, budget=budget, probe_costs=COSTS, bill_share=bill_share)


def test_a_search_spends_at_most_its_share_of_the_bill_its_probes_predict() -> None:
    capped = search(SEARCH_SHARE)
    gp = capped.searcher
    budget = gp.budget.max_usd
    assert budget is not None and gp.max_usd() == budget  # before a probe: the budget's
    while True:
        left = gp.max_usd()
        spent = gp.spent_usd
        probe = capped.step(measure)
        if probe is None:
            break
        index = SPACE.index_of(probe.allocation)
        assert index is not None
        assert left is not None and COSTS[index] <= left - spent + 1e-12  # it fitted
    # The job's bill as the probes see it is about half the predicted one: so is the cap.
    cap = gp.max_usd()
    assert cap is not None and cap < 0.75 * budget
    assert capped.result().search_usd <= cap
    # Without the share the same search spends its whole budget's worth of probes.
    plain = search(None)
    plain.run(measure)
    assert plain.searcher.max_usd() == budget
    assert plain.result().search_usd > capped.result().search_usd
    assert plain.result().search_usd > cap


def test_the_share_is_kept_by_a_retrigger_and_checked() -> None:
    first = search(SEARCH_SHARE)
    first.step(measure)
    assert first.retrigger(SPACE, GOAL).bill_share == SEARCH_SHARE
    for bad in (0.0, -0.1, float("nan")):
        with pytest.raises(ConfigError, match=r"bill_share is .*, but must be positive"):
            search(bad)
    with pytest.raises(ConfigError, match=r"cap_usd is -1\.0, but must be positive"):
        first.searcher.limit_usd(-1.0)
    assert np.isfinite(first.searcher.spent_usd)
