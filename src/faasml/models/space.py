"""The allocation space Θ (CE-scaling eq. 1) evaluated at once into a table of estimates."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.cost import epoch_cost, startup_cost
from faasml.models.perf import epoch_time
from faasml.models.sync import item_mb
from faasml.types import Allocation, AllocationEstimate, Breakdown
from faasml.workload import Workload

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]

DEFAULT_MEMORY_STEP_MB = 64
"""Memory grid for planning: 64 MB steps keep the space small and lose little (u(m) is smooth)."""

MAX_ALLOCATIONS = 8_000_000
"""Most allocations (memory sizes × function counts × sync options) a space may hold: each
takes a few hundred bytes while the table is built, so this keeps planning within a few GB.
The defaults on every shipped catalog stay well below it."""


@dataclass
class Exclusions:
    """Why allocations were left out of the space, with counts, and storages left out whole."""

    counts: Counter[str] = field(default_factory=Counter)
    storages: dict[str, str] = field(default_factory=dict)
    """Storage/scheme pairs that no allocation could use, with the reason."""

    def add(self, reason: str, mask: NDArray[np.bool_]) -> None:
        count = int(np.count_nonzero(mask))
        if count:
            self.counts[reason] += count

    def merge(self, other: Exclusions) -> None:
        self.counts.update(other.counts)
        self.storages.update(other.storages)


@dataclass(frozen=True)
class AllocationTable:
    """Allocations and their per-epoch estimates as parallel arrays (one row per θ)."""

    n: IntArray
    memory_mb: IntArray
    option: IntArray
    """Index into ``options``: the (storage, scheme) pair of the row."""
    options: tuple[tuple[str, str], ...]
    load_s: Array
    compute_s: Array
    sync_s: Array
    invoke_s: Array
    function_usd: Array
    invocation_usd: Array
    storage_usd: Array
    startup_usd: Array
    startup_s: Array
    """Cold start of this allocation's functions (platform.cold_start_time of its memory)."""
    """Cost of the cold start of this allocation's n functions (once per start, not per epoch)."""

    def __len__(self) -> int:
        return int(self.n.shape[0])

    @property
    def time_s(self) -> Array:
        result: Array = self.load_s + self.compute_s + self.sync_s + self.invoke_s
        return result

    @property
    def cost_usd(self) -> Array:
        result: Array = self.function_usd + self.invocation_usd + self.storage_usd
        return result

    def take(self, rows: ArrayLike) -> AllocationTable:
        index = np.asarray(rows)
        return AllocationTable(
            n=self.n[index],
            memory_mb=self.memory_mb[index],
            option=self.option[index],
            options=self.options,
            load_s=self.load_s[index],
            compute_s=self.compute_s[index],
            sync_s=self.sync_s[index],
            invoke_s=self.invoke_s[index],
            function_usd=self.function_usd[index],
            invocation_usd=self.invocation_usd[index],
            storage_usd=self.storage_usd[index],
            startup_usd=self.startup_usd[index],
            startup_s=self.startup_s[index],
        )

    def allocation(self, row: int) -> Allocation:
        storage, scheme = self.options[int(self.option[row])]
        return Allocation(int(self.n[row]), int(self.memory_mb[row]), storage, scheme)

    def breakdown(self, row: int) -> Breakdown:
        return Breakdown(
            load_s=float(self.load_s[row]),
            compute_s=float(self.compute_s[row]),
            sync_s=float(self.sync_s[row]),
            invoke_s=float(self.invoke_s[row]),
            function_usd=float(self.function_usd[row]),
            invocation_usd=float(self.invocation_usd[row]),
            storage_usd=float(self.storage_usd[row]),
        )

    def estimate(self, row: int) -> AllocationEstimate:
        return AllocationEstimate(
            self.allocation(row),
            self.breakdown(row),
            startup_s=float(self.startup_s[row]),
            startup_usd=float(self.startup_usd[row]),
        )

    @staticmethod
    def concatenate(
        parts: list[AllocationTable], options: tuple[tuple[str, str], ...]
    ) -> AllocationTable:
        def cat(name: str) -> NDArray[np.generic]:
            return np.concatenate([getattr(p, name) for p in parts])

        return AllocationTable(
            n=cat("n").astype(np.int64),
            memory_mb=cat("memory_mb").astype(np.int64),
            option=cat("option").astype(np.int64),
            options=options,
            load_s=cat("load_s").astype(float),
            compute_s=cat("compute_s").astype(float),
            sync_s=cat("sync_s").astype(float),
            invoke_s=cat("invoke_s").astype(float),
            function_usd=cat("function_usd").astype(float),
            invocation_usd=cat("invocation_usd").astype(float),
            storage_usd=cat("storage_usd").astype(float),
            startup_usd=cat("startup_usd").astype(float),
            startup_s=cat("startup_s").astype(float),
        )


def evaluate(
    workload: Workload,
    catalog: Catalog,
    n: ArrayLike,
    memory_mb: ArrayLike,
    storage: str,
    scheme: str,
    *,
    exclusions: Exclusions | None = None,
) -> AllocationTable:
    """Estimate every given (n, memory) with one storage and scheme; infeasible rows dropped.

    Rules (each counted in ``exclusions``): the partition, model copies and runtime fit in the
    function's memory; every function gets at least one full batch; n is within the platform's
    concurrency at that memory; a stored value fits the service's item limit; one round's values
    fit the node's memory.
    """
    platform = catalog.platform
    service = catalog.storage(storage)
    if scheme not in service.schemes:
        raise ValueError(f"storage {storage} does not offer scheme {scheme}")
    data_store = catalog.storage(platform.data_store)
    # Keep the inputs' own shapes so that what depends on memory alone (bandwidth, u(m)) is
    # computed once per memory size and broadcast, not once per allocation.
    count = np.asarray(n, dtype=np.int64)
    memory = np.asarray(memory_mb, dtype=np.int64)
    shape = np.broadcast_shapes(count.shape, memory.shape)
    out = exclusions if exclusions is not None else Exclusions()
    keep = _feasible(workload, catalog, storage, scheme, count, memory, out)
    time = epoch_time(workload, platform, data_store, service, scheme, count, memory)
    cost = epoch_cost(workload, platform, data_store, service, scheme, count, memory, time)
    options = catalog.sync_options()

    def rows(values: ArrayLike) -> NDArray[np.generic]:
        return np.broadcast_to(np.asarray(values), shape)[keep]

    kept_n = rows(count).astype(np.int64)
    kept_memory = rows(memory).astype(np.int64)
    # Where warm functions keep their partition, a function's start reads it (billed: it runs
    # inside the first invocation), and eq. 2's epochs do not.
    partition_s = rows(time.partition_s).astype(float)
    partition_usd = kept_n * partition_s * kept_memory / 1024.0 * platform.price_per_gb_s
    return AllocationTable(
        n=kept_n,
        memory_mb=kept_memory,
        option=np.full(kept_n.shape, options.index((storage, scheme)), dtype=np.int64),
        options=options,
        load_s=rows(time.load_s).astype(float),
        compute_s=rows(time.compute_s).astype(float),
        sync_s=rows(time.sync_s).astype(float),
        invoke_s=rows(time.invoke_s).astype(float),
        function_usd=rows(cost.function_usd).astype(float),
        invocation_usd=rows(cost.invocation_usd).astype(float),
        storage_usd=rows(cost.storage_usd).astype(float),
        startup_usd=startup_cost(platform, kept_n, kept_memory) + partition_usd,
        startup_s=platform.cold_start_time(kept_memory) + partition_s,
    )


def _feasible(
    workload: Workload,
    catalog: Catalog,
    storage: str,
    scheme: str,
    count: IntArray,
    memory: IntArray,
    out: Exclusions,
) -> NDArray[np.bool_]:
    """Which (n, memory) of the broadcast ``count`` × ``memory`` ``evaluate``'s rules keep;
    each row left out is counted in ``out`` under the first rule it breaks."""
    platform = catalog.platform
    service = catalog.storage(storage)
    shape = np.broadcast_shapes(count.shape, memory.shape)
    keep = np.ones(shape, dtype=bool)

    def rule(reason: str, broken: NDArray[np.bool_]) -> None:
        nonlocal keep
        out.add(reason, broken & keep)
        keep &= ~broken

    rule(
        "memory too small for the data partition and model",
        workload.memory_needed_mb(count) > memory,
    )
    if workload.global_batch:  # each function must hold rows of every round of the batch
        rule("global batch under 2 rows per function", count > workload.max_functions)
    else:
        rule("fewer samples than one batch per function", count > workload.max_functions)
    rule("more functions than the platform runs at once", count > platform.max_concurrent(memory))
    item = item_mb(scheme, count, workload.model_mb)
    if service.max_item_kb is not None:
        too_big = np.broadcast_to(item * 1024 > service.max_item_kb, shape)
        rule(f"{storage}: value larger than its {service.max_item_kb:g} KB item limit", too_big)
        if too_big.all() and too_big.size:
            out.storages[f"{storage}/{scheme}"] = (
                f"a {workload.model_mb:g} MB model exceeds the {service.max_item_kb:g} KB item "
                f"limit of {storage} with {scheme}"
            )
    if service.node_memory_mb is not None:
        rule(
            f"{storage}: one round does not fit the node's memory",
            (count + 1) * workload.model_mb > service.node_memory_mb,
        )
    return keep


def evaluate_allocation(
    workload: Workload, catalog: Catalog, allocation: Allocation
) -> AllocationTable:
    """``evaluate`` of one allocation: a table of one row, or none where it is infeasible."""
    return evaluate(
        workload,
        catalog,
        [allocation.n],
        [allocation.memory_mb],
        allocation.storage,
        allocation.scheme,
    )


def allocation_space(
    workload: Workload,
    catalog: Catalog,
    *,
    memory_step_mb: int | None = None,
    max_functions: int | None = None,
    exclusions: Exclusions | None = None,
) -> AllocationTable:
    """Θ = {(n, m, s)}: every memory size (in ``memory_step_mb`` steps) × 1..max_functions ×
    every storage and scheme of the catalog, evaluated; infeasible allocations are dropped and
    counted in ``exclusions``."""
    platform = catalog.platform
    for name, value in (("memory step (MB)", memory_step_mb), ("most functions", max_functions)):
        if value is not None and (not _whole(value) or value < 1):
            raise ConfigError(f"the {name} is {value!r}, but must be a whole number >= 1")
    step = memory_step_mb or max(platform.memory_step_mb, DEFAULT_MEMORY_STEP_MB)
    memories = platform.memory_sizes(step)
    top = max_functions or int(platform.max_concurrent(memories).max())
    options = catalog.sync_options()
    _check_size(len(memories), top, len(options))
    counts = np.arange(1, top + 1, dtype=np.int64)
    out = exclusions if exclusions is not None else Exclusions()
    # A single function synchronises with nobody: every option gives it the same time and cost
    # (time-priced nodes are not started), so n = 1 is evaluated once, with the first option
    # over the data store.
    single = next((o for o in options if o[0] == platform.data_store), options[0])
    parts = [
        evaluate(
            workload,
            catalog,
            (counts if option == single else counts[1:])[:, None],
            memories[None, :],
            *option,
            exclusions=out,
        )
        for option in options
    ]
    return AllocationTable.concatenate(parts, options)


def _whole(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _check_size(memories: int, functions: int, options: int) -> None:
    """ConfigError, before anything is allocated, when the space would hold more than
    ``MAX_ALLOCATIONS`` allocations (a fine memory step or a huge function count)."""
    size = memories * functions * options
    if size > MAX_ALLOCATIONS:
        raise ConfigError(
            f"the allocation space would hold {size:,} allocations ({memories:,} memory sizes × "
            f"{functions:,} function counts × {options} sync options), but may hold at most "
            f"{MAX_ALLOCATIONS:,}: raise the memory step (--memory-step) or lower the most "
            "functions (--max-functions)"
        )
