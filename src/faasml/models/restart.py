"""What switching a training job to another allocation costs, with and without a delayed restart
(CE-scaling §III-D, Fig. 8).

A switch starts the new functions cold and has them pull the latest model. Without delay
(Cirrus-like) the old functions stop at the end of an epoch and the new ones start then: the
cold start and the model pull are on the critical path, and the new functions are billed while
they pull. With a delayed restart the decision taken at the end of epoch k−1 launches the new
functions during epoch k, ``launch_after_s`` = t'(θ_old) − cold start into it (the optimal launch
time: ready exactly at the synchronisation point), and they take over at the end of epoch k:
the old functions upload their gradient and stop, the new ones pull the aggregated model in
place of the old ones' own pull. What stays visible is the part of the cold start longer than
the epoch. A delayed restart runs old and new functions at once; when both together exceed the
platform's concurrency limit, it is not possible and the switch falls back to a plain restart.
The INIT time of the new functions is billed either way (``startup_cost``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faasml.catalog import Catalog
from faasml.models.cost import startup_cost
from faasml.models.perf import network_mbps
from faasml.types import Allocation
from faasml.workload import Workload

Array = NDArray[np.float64]


@dataclass(frozen=True)
class SwitchCosts:
    """Switch overheads for many candidate allocations at once (parallel arrays)."""

    total_s: Array
    """Cold start plus model pull: the switch time when nothing is hidden."""
    hidden_s: Array
    """The part of ``total_s`` overlapped with the last epoch of the old allocation."""
    cost_usd: Array
    """INIT of the new functions, their billed pull time when visible, and time-priced
    storage billed while the switch is visible."""
    delayed: NDArray[np.bool_]
    """True where a delayed restart is possible (concurrency allows old and new together)."""
    launch_after_s: Array
    """Seconds into the old allocation's last epoch at which to launch the new functions."""

    @property
    def visible_s(self) -> Array:
        result: Array = self.total_s - self.hidden_s
        return result


@dataclass(frozen=True)
class SwitchCost:
    """The switch overhead of one change of allocation."""

    total_s: float
    hidden_s: float
    cost_usd: float
    delayed: bool
    launch_after_s: float

    @property
    def visible_s(self) -> float:
        return self.total_s - self.hidden_s

    @property
    def hidden_share(self) -> float:
        """Share of the switch time hidden by the delayed restart (0 without it)."""
        return self.hidden_s / self.total_s if self.total_s > 0 else 1.0


def switch_costs(
    workload: Workload,
    catalog: Catalog,
    old: Allocation,
    old_epoch_s: float,
    n: ArrayLike,
    memory_mb: ArrayLike,
    storage: Sequence[str],
    *,
    delayed: bool,
) -> SwitchCosts:
    """Switch overheads from ``old`` (whose epoch takes ``old_epoch_s``) to each candidate
    (n, memory, storage), with or without a delayed restart (CE-scaling Fig. 8)."""
    platform = catalog.platform
    count = np.asarray(n, dtype=float)
    memory = np.asarray(memory_mb, dtype=float)
    cold = platform.cold_start_s
    names = np.asarray(storage, dtype=object).reshape(memory.shape)
    pull = np.zeros(memory.shape)
    hourly = np.zeros(memory.shape)
    for name in set(storage):
        rows = names == name
        service = catalog.storage(name)
        pull[rows] = (
            workload.model_mb / network_mbps(platform, service, memory[rows]) + service.latency_s
        )
        hourly[rows] = service.hourly_usd if service.pricing == "time" else 0.0
    total = cold + pull
    fits = count + old.n <= platform.max_concurrent(np.maximum(memory, old.memory_mb))
    can_delay = np.asarray(fits & delayed, dtype=bool)
    hidden = np.where(can_delay, np.minimum(cold, old_epoch_s) + pull, 0.0)
    visible = total - hidden
    price = platform.price_per_gb_s
    cost = (
        startup_cost(platform, count, memory)
        + np.where(can_delay, 0.0, count * pull * memory / 1024.0 * price)
        + visible * hourly / 3600.0
    )
    return SwitchCosts(
        total_s=np.broadcast_to(total, memory.shape).astype(float),
        hidden_s=np.asarray(hidden, dtype=float),
        cost_usd=np.asarray(cost, dtype=float),
        delayed=can_delay,
        launch_after_s=np.where(can_delay, np.maximum(old_epoch_s - cold, 0.0), 0.0),
    )


def switch_cost(
    workload: Workload,
    catalog: Catalog,
    old: Allocation,
    old_epoch_s: float,
    new: Allocation,
    *,
    delayed: bool,
) -> SwitchCost:
    """The overhead of switching from ``old`` to ``new``; zero when they are the same."""
    if new == old:
        return SwitchCost(0.0, 0.0, 0.0, delayed, 0.0)
    table = switch_costs(
        workload,
        catalog,
        old,
        old_epoch_s,
        [new.n],
        [new.memory_mb],
        [new.storage],
        delayed=delayed,
    )
    return SwitchCost(
        total_s=float(table.total_s[0]),
        hidden_s=float(table.hidden_s[0]),
        cost_usd=float(table.cost_usd[0]),
        delayed=bool(table.delayed[0]),
        launch_after_s=float(table.launch_after_s[0]),
    )
