"""Stages moved onto the functions the stage before left warm where that is no worse (pure):
the planner prices each stage's start on its own; ``keep_warm`` sees the warm pool."""

from __future__ import annotations

import pytest

from faasml.catalog import Catalog, load_catalog
from faasml.runtime.record.records import StageRecord
from faasml.runtime.runs.stage_pricing import keep_warm, stage_estimates
from faasml.types import Allocation, Constraint
from faasml.workload import Workload

from .table_workload import table_workload


@pytest.fixture
def catalog() -> Catalog:
    return load_catalog("aws-lambda")


@pytest.fixture
def workload() -> Workload:
    return table_workload()


def _stage(trials: int, memory_mb: int) -> StageRecord:
    allocation = Allocation(n=1, memory_mb=memory_mb, storage="s3", scheme="allreduce")
    return StageRecord(0, trials, 1, allocation, 0.0, 0.0, 0.0, 0.0)


def _totals(workload: Workload, catalog: Catalog, stages: list[StageRecord]) -> tuple[float, float]:
    estimates = stage_estimates(workload, catalog, stages)
    return sum(t for t, _ in estimates), sum(c for _, c in estimates)


def test_a_stage_moves_onto_the_warm_size_when_that_is_cheaper(
    workload: Workload, catalog: Catalog
) -> None:
    plan = [_stage(8, 1024), _stage(4, 2048)]
    moved = [_stage(8, 1024), _stage(4, 1024)]
    before, after = _totals(workload, catalog, plan), _totals(workload, catalog, moved)
    assert after[1] < before[1] and after[0] > before[0]  # cheaper, slower: a real trade-off
    cheapest = Constraint(deadline_s=after[0] * 2)
    kept = keep_warm(workload, catalog, plan, cheapest)
    assert kept[1].allocation == plan[0].allocation
    assert kept[1].epoch_time_s > 0 and kept[1].trials == 4
    assert plan[1].allocation.memory_mb == 2048  # the input is not changed
    # Fastest within a budget: the move is slower, so the stage stays.
    fastest = Constraint(budget_usd=before[1] * 2)
    assert keep_warm(workload, catalog, plan, fastest)[1].allocation == plan[1].allocation
    # A deadline the moved plan would miss: the stage stays.
    tight = Constraint(deadline_s=(before[0] + after[0]) / 2)
    assert keep_warm(workload, catalog, plan, tight)[1].allocation == plan[1].allocation


def test_stages_before_start_are_left_as_they_are(workload: Workload, catalog: Catalog) -> None:
    plan = [_stage(8, 1024), _stage(4, 2048), _stage(2, 3008)]
    loose = Constraint(deadline_s=1e9)
    kept = keep_warm(workload, catalog, plan, loose, start=2)
    assert [s.allocation.memory_mb for s in kept] == [1024, 2048, 2048]
    assert [s.allocation.memory_mb for s in keep_warm(workload, catalog, plan, loose)] == [
        1024,
        1024,
        1024,
    ]


def test_a_run_of_stages_moves_together_where_one_alone_would_not_pay() -> None:
    """Stages 2-4 on a cheaper size than stage 1's: moving stage 2 alone onto stage 1's warm
    size costs more (stage 3 then pays the cold start stage 2 saved); moving all three saves
    the cheaper size's cold start for good (short epochs: the start is most of the bill)."""
    catalog = load_catalog("aws-lambda")
    workload = table_workload(((128.0, 0.00009), (1024.0, 0.00002), (3538.0, 0.00001)))
    plan = [_stage(2, 1536), _stage(1, 1024), _stage(1, 1024), _stage(1, 1024)]
    one = [_stage(2, 1536), _stage(1, 1536), _stage(1, 1024), _stage(1, 1024)]
    every = [_stage(2, 1536), _stage(1, 1536), _stage(1, 1536), _stage(1, 1536)]
    cost = [_totals(workload, catalog, stages)[1] for stages in (plan, one, every)]
    assert cost[1] > cost[0] > cost[2]  # one alone is worse; all together better
    cheapest = Constraint(deadline_s=100.0)
    kept = keep_warm(workload, catalog, plan, cheapest)
    assert [s.allocation.memory_mb for s in kept] == [1536, 1536, 1536, 1536]
