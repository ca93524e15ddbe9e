"""𝒫, the Pareto-optimal allocations a training policy searches, and the choices over it:
which rows fit what is left of the budget or time, and the best of them for the goal."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.space import AllocationTable, allocation_space
from faasml.planners.pareto import pareto_front
from faasml.types import Objective
from faasml.units import format_duration, format_money
from faasml.workload import Workload

Array = NDArray[np.float64]


def training_frontier(
    workload: Workload,
    catalog: Catalog,
    *,
    memory_step_mb: int | None = None,
    max_functions: int | None = None,
    storages: Sequence[str] | None = None,
) -> AllocationTable:
    """𝒫: the Pareto-optimal allocations in (epoch time, epoch cost) (CE-scaling §III-B3); a
    scheduler searches only these. ``storages`` keeps only those sync storages (the data store
    stays whatever the platform uses). Compute once and pass to many schedulers."""
    space = allocation_space(
        workload, catalog, memory_step_mb=memory_step_mb, max_functions=max_functions
    )
    if storages is not None:
        wanted = [i for i, (name, _) in enumerate(space.options) if name in storages]
        space = space.take(np.flatnonzero(np.isin(space.option, wanted)))
    if len(space) == 0:
        raise ConfigError(
            f"no allocation of {catalog.name} can run {workload.name}"
            + (f" with storage {', '.join(storages)}" if storages is not None else "")
        )
    return pareto_front(space)


def admits(
    time: Array, cost: Array, budget: float | None, time_left: float | None
) -> NDArray[np.bool_]:
    """Which rows of (time, cost) fit the budget and the time left (None: unbounded)."""
    ok = np.ones(time.shape, dtype=bool)
    if budget is not None:
        ok &= cost <= budget
    if time_left is not None:
        ok &= time <= time_left
    return ok


def fits(cost: float, time: float, budget: float | None, time_left: float | None) -> bool:
    """Whether one (cost, time) fits the budget and the time left (None: unbounded)."""
    return (budget is None or cost <= budget) and (time_left is None or time <= time_left)


def what_is_left(budget: float | None, time_left: float | None) -> str:
    """The budget and time left, in words, for a decision's reason."""
    parts = []
    if budget is not None:
        parts.append(f"{format_money(max(budget, 0.0))} left")
    if time_left is not None:
        parts.append(f"{format_duration(max(time_left, 0.0))} left")
    return " and ".join(parts)


def best_row(rows: NDArray[np.int64], time: Array, cost: Array, goal: Objective) -> int:
    """The row of ``rows`` best for ``goal`` (the other measure breaks ties)."""
    primary, secondary = (time, cost) if goal is Objective.MIN_TIME else (cost, time)
    return int(rows[np.lexsort((secondary[rows], primary[rows]))[0]])
