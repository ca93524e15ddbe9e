"""Monetary cost of one epoch, c'(θ) (CE-scaling eqs. 4–5), and of the cold start."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faasml.catalog import FunctionPlatform, StorageService
from faasml.models.perf import EpochTime
from faasml.models.sync import sync_requests
from faasml.workload import Workload

Array = NDArray[np.float64]


@dataclass(frozen=True)
class EpochCost:
    """US dollars per epoch, by part; arrays broadcast over the allocations evaluated."""

    function_usd: Array
    """n · t' · m/1024 · p_f: GB-seconds of every function for the whole epoch (BSP: a function
    waiting at a barrier is still billed)."""
    invocation_usd: Array
    """n · invocations · p_invk."""
    storage_usd: Array
    """Requests (request-priced) or node time (time-priced) of the sync storage, plus the
    partition reads from the object store."""

    @property
    def total_usd(self) -> Array:
        result: Array = self.function_usd + self.invocation_usd + self.storage_usd
        return result


def request_price(unit_price: float, unit_kb: float | None, item_mb: ArrayLike) -> Array:
    """Price of one request: flat, or per started unit of ``unit_kb`` (DynamoDB request units)."""
    item = np.asarray(item_mb, dtype=float)
    if unit_kb is None:
        return np.full(item.shape, unit_price)
    result: Array = unit_price * np.maximum(1.0, np.ceil(item * 1024 / unit_kb))
    return result


def epoch_cost(
    workload: Workload,
    platform: FunctionPlatform,
    data_store: StorageService,
    storage: StorageService,
    scheme: str,
    n: ArrayLike,
    memory_mb: ArrayLike,
    time: EpochTime,
) -> EpochCost:
    """c'(θ) = n·invocations·p_invk + n·t'·(m/1024)·p_f + c^s(θ) (CE-scaling eqs. 4–5), t'
    less the coordinator's time between invocations (``FunctionPlatform.coordinator_s``).

    c^s for request-priced storage: k · (puts · p_put + gets · p_get) for the scheme's requests
    (sync.sync_requests); for time-priced storage: t'/3600 · hourly price of the node, billed
    per second while the job runs, and nothing for a single function (no node is needed);
    function-priced storage (InfiniCache) likewise, its nodes' GB-seconds as the hourly price.
    Reading the partitions costs n · invocations GETs.
    """
    count = np.asarray(n, dtype=float)
    memory = np.asarray(memory_mb, dtype=float)
    total_s = time.total_s
    # The coordinator's time between invocations runs no function: not billed.
    billed_s = total_s - time.invocations * platform.coordinator_s
    function = count * billed_s * (memory / 1024.0) * platform.price_per_gb_s
    invocation = (count * time.invocations * platform.price_per_invocation).astype(float)
    requests = sync_requests(scheme, count, workload.model_mb)
    if storage.billed_by_time:
        # One function synchronises with nobody: no node is started for it.
        sync_usd = np.where(count > 1, total_s / 3600.0 * storage.hourly_usd, 0.0)
    else:
        per_sync = requests.puts * request_price(
            storage.put_usd, storage.put_unit_kb, requests.item_mb
        ) + requests.gets * request_price(storage.get_usd, storage.get_unit_kb, requests.item_mb)
        sync_usd = time.iterations * per_sync
    partition_mb = workload.dataset_mb / count
    data_usd = (
        count
        * time.invocations
        * request_price(data_store.get_usd, data_store.get_unit_kb, partition_mb)
    )
    return EpochCost(
        function_usd=function,
        invocation_usd=invocation,
        storage_usd=sync_usd + data_usd,
    )


def startup_cost(platform: FunctionPlatform, n: ArrayLike, memory_mb: ArrayLike) -> Array:
    """Cost of starting n cold functions: their start time (platform.cold_start_time), where
    the platform bills it."""
    if not platform.bills_cold_start:
        return np.zeros(np.broadcast(np.asarray(n), np.asarray(memory_mb)).shape)
    result: Array = (
        np.asarray(n, dtype=float)
        * platform.cold_start_time(memory_mb)
        * (np.asarray(memory_mb, dtype=float) / 1024.0)
        * platform.price_per_gb_s
    )
    return result
