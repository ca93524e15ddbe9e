"""Pareto pruning of the allocation space in time × cost (CE-scaling §III-B3, MISSION C3)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faasml.models.space import AllocationTable


def pareto_indices(time_s: ArrayLike, cost_usd: ArrayLike) -> NDArray[np.int64]:
    """Rows not dominated in (time, cost), ordered by increasing time (decreasing cost).

    θ₂ is dropped when some θ₁ is no slower and no dearer and better in one of the two; of
    rows with equal time and cost one is kept. O(N log N): sort by time (cost breaking ties),
    keep a row when its cost is below every cost before it.
    """
    time = np.asarray(time_s, dtype=float)
    cost = np.asarray(cost_usd, dtype=float)
    if time.size == 0:
        return np.zeros(0, dtype=np.int64)
    # One cheap pass sorted by time alone keeps every non-dominated row (and, at most, a few
    # rows tied in time); an exact pass with cost breaking ties then runs on those few.
    candidates = _below_running_min(np.argsort(time, kind="stable"), cost)
    exact = candidates[np.lexsort((cost[candidates], time[candidates]))]
    return _below_running_min(exact, cost).astype(np.int64)


def _below_running_min(order: NDArray[np.int64], cost: NDArray[np.float64]) -> NDArray[np.int64]:
    """Rows of ``order`` whose cost is below the cost of every row before them."""
    sorted_cost = cost[order]
    best_before = np.minimum.accumulate(np.concatenate(([np.inf], sorted_cost[:-1])))
    return order[sorted_cost < best_before]


def pareto_front(table: AllocationTable) -> AllocationTable:
    """The Pareto-optimal allocations 𝒫 of a table, fastest first."""
    return table.take(pareto_indices(table.time_s, table.cost_usd))
