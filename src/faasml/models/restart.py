"""What switching a training job to another allocation costs, with and without a delayed restart
(CE-scaling §III-D, Fig. 8).

A switch decided at the end of epoch k−1 starts the new functions cold; they load their data
partition and pull the latest model.

Without delay (Cirrus-like) the old functions stop at the end of epoch k−1; the cold start and
the model pull are on the critical path, then the new allocation runs epoch k.

With a delayed restart the new functions are launched at the start of epoch k while the old ones
go on training. Once started and loaded (after cold start + their partition load, ``ready_s``)
they take over at the next synchronisation point: the old functions upload their gradient and
stop, the new ones pull the aggregated model in place of the old ones' own pull, and finish the
epoch's remaining share of the work. What was hidden is the cold start, the load and the pull.
When the epoch is shorter than ``ready_s`` the new functions take over at its end and the part
of the cold start beyond the epoch stays visible. Old and new functions run at once: when both
together exceed the platform's concurrency limit a delayed restart is impossible and the switch
falls back to a plain one. The new functions' INIT is billed either way (``startup_cost``).

The model gives, for each candidate, the duration and cost of the switching epoch k; the epochs
after it run on the new allocation at its t'(θ) and c'(θ).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.cost import startup_cost
from faasml.models.perf import network_mbps
from faasml.models.space import AllocationTable, evaluate
from faasml.types import Allocation
from faasml.workload import Workload

Array = NDArray[np.float64]


@dataclass(frozen=True)
class SwitchCosts:
    """Switch overheads for many candidate allocations at once (parallel arrays)."""

    total_s: Array
    """Cold start plus model pull: the switch time when nothing is hidden."""
    hidden_s: Array
    """Switch time overlapped with the old allocation's training."""
    cost_usd: Array
    """Extra money of the switch: INIT of the new functions, their billed pull while visible,
    and time-priced storage billed while the switch is visible."""
    delayed: NDArray[np.bool_]
    """True where a delayed restart is possible (concurrency allows old and new together)."""
    mid_epoch: NDArray[np.bool_]
    """True where the new functions take over within epoch k (delayed and ready in time)."""
    epoch_s: Array
    """Duration of the switching epoch k, overheads included."""
    epoch_usd: Array
    """Cost of the switching epoch k, overheads included."""

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
    mid_epoch: bool
    epoch_s: float
    """Duration of the switching epoch, overheads included."""
    epoch_usd: float
    """Cost of the switching epoch, overheads included."""

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
    old_epoch_usd: float,
    new: AllocationTable,
    *,
    delayed: bool,
) -> SwitchCosts:
    """Switch overheads from ``old`` (one epoch: ``old_epoch_s``, ``old_epoch_usd``) to each
    row of ``new``, with or without a delayed restart (CE-scaling Fig. 8)."""
    platform = catalog.platform
    count = new.n.astype(float)
    memory = new.memory_mb.astype(float)
    cold = platform.cold_start_time(memory)
    pull = np.zeros(memory.shape)
    hourly = np.zeros(memory.shape)
    for option in np.unique(new.option):
        rows = new.option == option
        service = catalog.storage(new.options[int(option)][0])
        pull[rows] = (
            workload.model_mb / network_mbps(platform, service, memory[rows]) + service.latency_s
        )
        hourly[rows] = service.hourly_usd if service.billed_by_time else 0.0
    total = cold + pull
    fits = count + old.n <= platform.max_concurrent(np.maximum(memory, old.memory_mb))
    can_delay = np.asarray(fits & delayed, dtype=bool)
    init = startup_cost(platform, count, memory)
    rate = new.cost_usd / np.maximum(new.time_s, 1e-12)  # the new allocation's $ per second
    work_s = np.maximum(new.time_s - new.load_s, 0.0)  # its epoch without the partition load
    # Delayed, ready within the epoch: the old functions do the share `ready / t_old` of it.
    ready = cold + new.load_s
    mid = can_delay & (ready < old_epoch_s)
    share = np.clip(ready / max(old_epoch_s, 1e-12), 0.0, 1.0)
    mid_s = ready + (1.0 - share) * work_s
    mid_usd = share * old_epoch_usd + init + rate * (new.load_s + (1.0 - share) * work_s)
    # Delayed, not ready in time: a full old epoch; the cold start beyond it is visible.
    late_visible = np.maximum(cold - old_epoch_s, 0.0)
    late_s = old_epoch_s + late_visible
    late_usd = old_epoch_usd + init + late_visible * hourly / 3600.0
    # Plain restart: cold start and pull first, then a whole epoch of the new allocation.
    plain_s = total + new.time_s
    plain_usd = init + count * pull * memory / 1024.0 * platform.price_per_gb_s
    plain_usd = plain_usd + total * hourly / 3600.0 + new.cost_usd
    hidden = np.where(mid, total, np.where(can_delay, total - late_visible, 0.0))
    visible = total - hidden
    extra = np.where(
        can_delay,
        init + visible * hourly / 3600.0,
        init + count * pull * memory / 1024.0 * platform.price_per_gb_s + total * hourly / 3600.0,
    )
    return SwitchCosts(
        total_s=np.asarray(total, dtype=float),
        hidden_s=np.asarray(hidden, dtype=float),
        cost_usd=np.asarray(extra, dtype=float),
        delayed=can_delay,
        mid_epoch=np.asarray(mid, dtype=bool),
        epoch_s=np.where(mid, mid_s, np.where(can_delay, late_s, plain_s)),
        epoch_usd=np.where(mid, mid_usd, np.where(can_delay, late_usd, plain_usd)),
    )


def switch_cost(
    workload: Workload,
    catalog: Catalog,
    old: Allocation,
    new: Allocation,
    *,
    delayed: bool,
) -> SwitchCost:
    """The overhead of switching from ``old`` to ``new``; none when they are the same."""
    before = _row(workload, catalog, old)
    seconds, dollars = float(before.time_s[0]), float(before.cost_usd[0])
    if new == old:
        return SwitchCost(0.0, 0.0, 0.0, delayed, False, seconds, dollars)
    table = switch_costs(
        workload, catalog, old, seconds, dollars, _row(workload, catalog, new), delayed=delayed
    )
    return SwitchCost(
        total_s=float(table.total_s[0]),
        hidden_s=float(table.hidden_s[0]),
        cost_usd=float(table.cost_usd[0]),
        delayed=bool(table.delayed[0]),
        mid_epoch=bool(table.mid_epoch[0]),
        epoch_s=float(table.epoch_s[0]),
        epoch_usd=float(table.epoch_usd[0]),
    )


def _row(workload: Workload, catalog: Catalog, allocation: Allocation) -> AllocationTable:
    table = evaluate(
        workload,
        catalog,
        [allocation.n],
        [allocation.memory_mb],
        allocation.storage,
        allocation.scheme,
    )
    if len(table) == 0:
        raise ConfigError(f"{allocation} cannot run {workload.name} on {catalog.name}")
    return table
