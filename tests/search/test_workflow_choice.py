"""``workflow.search.choice`` reaches the GP + EI searcher of a workflow's phases, and a bad
rule given through the API is a one-line error. Nothing runs: the searches are built only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faasml.catalog import load_catalog
from faasml.exceptions import ConfigError
from faasml.job import from_mapping
from faasml.runtime.profile.record import JobProfile
from faasml.runtime.runs.workflow import WorkflowRun
from faasml.search import GPEISearcher
from faasml.search.deployment import DeploymentGoal, DeploymentSearch, DeploymentSpace
from faasml.types import Constraint
from faasml.workload import load_workload

JOB: dict[str, Any] = {
    "name": "flow",
    "model": {"name": "logistic-regression"},
    "dataset": {"synthetic": "higgs-like", "samples": 1000, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "batch_size": 32,
    "seed": 0,
    "platform": "local",
    "store": "embedded",
    "catalog": "local",
    "training": {"max_epochs": 4},
}

PROFILE = JobProfile(
    key="k",
    params=29,
    model_mb=0.0001,
    bytes_per_sample=120.0,
    footprint_mb=100.0,
    compute_points=((256, 2e-5), (1728, 5e-6)),
    eval_points=((256, 0.0), (1728, 0.0)),
    checkpoint_s=0.001,
    cold_start_s=0.5,
    dispatch_s=0.002,
    train_samples=800,
    test_samples=200,
    configs=1,
    profiling_usd=0.0,
    profiling_s=1.0,
)
"""A measured profile, hand-made: with it the phases' searches are warm (the rule applies)."""


def searches(folder: Path, search: dict[str, Any]) -> list[DeploymentSearch]:
    """The first phase's search and the second's, re-triggered from it (not run)."""
    workflow = {"batch_size_schedule": {0: 32, 2: 128}, "search": search}
    flow = WorkflowRun(
        from_mapping({**JOB, "workflow": workflow}), Constraint(budget_usd=1.0), folder
    )
    flow.profile = PROFILE
    built: list[DeploymentSearch] = []
    for phase in flow.phases:
        goal = flow.phase_goal(phase, 0.0, 0.0)
        last = built[-1] if built else None
        built.append(flow.search_for(phase, last, flow.phase_space(phase), goal))
    return built


@pytest.mark.parametrize("rule", ["upper", "likeliest", None])
def test_the_job_files_choice_rule_reaches_each_phases_searcher(
    tmp_path: Path, rule: str | None
) -> None:
    built = searches(tmp_path, {} if rule is None else {"choice": rule})
    assert len(built) == 2
    for search in built:
        assert search.warm
        assert isinstance(search.searcher, GPEISearcher)
        assert search.searcher.terms is not None  # warm: the rule is the one it follows
        assert search.searcher.choice == (rule or "likeliest")


def test_an_unknown_choice_rule_given_to_a_deployment_search_is_a_one_line_error() -> None:
    workload = load_workload("lr-higgs")
    catalog = load_catalog("aws-lambda").restricted_to(["s3"])
    space = DeploymentSpace.build(workload, catalog, memory_step_mb=1024, max_functions=8)
    goal = DeploymentGoal.from_constraint(Constraint(budget_usd=1.0), workload.epochs)
    for warm, searcher in ((True, "gp-ei"), (False, "gp-ei"), (False, "random")):
        with pytest.raises(ConfigError, match="is 'best', but must be one of: likeliest, upper"):
            DeploymentSearch(space, goal, searcher=searcher, warm=warm, choice="best")
