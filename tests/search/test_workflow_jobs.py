"""Job files' ``workflow:``: what runs and the one-line errors for what cannot."""

from __future__ import annotations

from typing import Any

import pytest

from faasml.exceptions import ConfigError
from faasml.job import JobSpec, from_mapping
from faasml.runtime.runs.workflow import workflow_phases

BASE: dict[str, Any] = {
    "name": "flow",
    "model": {"name": "logistic-regression"},
    "dataset": {"synthetic": "higgs-like", "samples": 1000, "test_fraction": 0.2},
    "optimizer": {"name": "sgd", "lr": 0.1},
    "training": {"max_epochs": 6},
    "batch_size": 32,
}


def job(workflow: Any, **changes: Any) -> JobSpec:
    return from_mapping({**BASE, **changes, "workflow": workflow})


def test_a_schedule_splits_training_into_phases_and_marks_only_real_changes() -> None:
    spec = job({"batch_size_schedule": {0: 32, 2: 32, 3: 128}})
    assert spec.workflow is not None and spec.workflow.kind == "dynamic-batching"
    phases = workflow_phases(spec.workflow, 32, {"name": "logistic-regression"}, 800, 6)
    assert [(p.first_epoch, p.epochs, p.batch_size) for p in phases] == [
        (0, 2, 32),
        (2, 1, 32),
        (3, 3, 128),
    ]
    assert [p.change for p in phases] == ["", "", "batch size 32 -> 128"]


def test_a_schedule_starting_late_keeps_the_jobs_batch_size_first() -> None:
    spec = job({"batch_size_schedule": {2: 64}})
    assert spec.workflow is not None
    phases = workflow_phases(spec.workflow, 32, {"name": "logistic-regression"}, 800, 6)
    assert [(p.first_epoch, p.batch_size) for p in phases] == [(0, 32), (2, 64)]


def test_the_workflow_round_trips_through_to_dict() -> None:
    spec = job({"batch_size_schedule": {0: 32, 3: 64}, "search": {"max_probes": 2}})
    again = from_mapping(spec.to_dict(redact=False))
    assert again.workflow == spec.workflow


def test_the_search_choice_rule_is_read_kept_and_likeliest_by_default() -> None:
    plain = job({"batch_size_schedule": {0: 32}})
    assert plain.workflow is not None and plain.workflow.search.choice == "likeliest"
    spec = job({"batch_size_schedule": {0: 32}, "search": {"choice": "upper"}})
    assert spec.workflow is not None and spec.workflow.search.choice == "upper"
    again = from_mapping(spec.to_dict(redact=False))
    assert again.workflow is not None and again.workflow.search.choice == "upper"


@pytest.mark.parametrize(
    ("workflow", "message"),
    [
        ({"batch_size_schedule": {0: 32, 3: 64, 2: 128}}, "epoch 2 after epoch 3, but its epochs"),
        ({"batch_size_schedule": {0: 32, 6: 64}}, "before training.max_epochs \\(6\\)"),
        ({"batch_size_schedule": {0: 5000}}, "is 5000, but must be <= the 800 training samples"),
        ({"batch_size_schedule": {0: 0}}, "batch_size_schedule.0 is 0"),
        ({"batch_size_schedule": []}, "must be a mapping of epoch -> batch size"),
        ({}, "exactly one of batch_size_schedule"),
        ({"batch_size_schedule": {0: 8}, "online": {"chunks": 2}}, "exactly one of"),
        ({"online": {"chunks": [0.5, 0.2]}}, "must sum to 1"),
        ({"online": {"chunks": 0}}, "chunks is 0, but must be >= 1"),
        ({"online": {"chunks": [0.0001, 0.9999]}}, "a chunk must hold at least one"),
        ({"nas": {"widths": [8], "depths": [1]}}, "samples widths and depths of mlp"),
        ({"batch_size_schedule": {0: 8}, "search": {"searcher": "bayes"}}, "searcher is 'bayes'"),
        ({"batch_size_schedule": {0: 8}, "search": {"max_probes": 0}}, "max_probes is 0"),
        ({"batch_size_schedule": {0: 8}, "search": {"probes": 3}}, "unknown field\\(s\\): probes"),
        (
            {"batch_size_schedule": {0: 8}, "search": {"choice": "best"}},
            "workflow.search.choice is 'best', but must be one of: likeliest, upper",
        ),
        (
            {"batch_size_schedule": {0: 8}, "search": {"choice": 1}},
            "workflow.search.choice is 1, but must be a non-empty string",
        ),
    ],
)
def test_a_workflow_that_cannot_run_is_a_one_line_error(workflow: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        job(workflow)


def test_a_nas_sampler_draws_distinct_widths_and_depths() -> None:
    spec = job(
        {"nas": {"widths": [8, 16, 32], "depths": [1, 2], "count": 4, "seed": 3}},
        model={"name": "mlp"},
    )
    assert spec.workflow is not None
    models = [tuple(m["hidden"]) for m in spec.workflow.models]
    assert len(models) == len(set(models)) == 4
    assert all(set(h) <= {8, 16, 32} and len(h) in (1, 2) for h in models)
    with pytest.raises(ConfigError, match="count is 7, but must be <= 6"):
        job({"nas": {"widths": [8, 16, 32], "depths": [1, 2], "count": 7}}, model={"name": "mlp"})
