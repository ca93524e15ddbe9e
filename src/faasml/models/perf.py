"""Execution time of one epoch, t'(θ) (CE-scaling eq. 2), vectorised over n and memory."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faasml.catalog import FunctionPlatform, StorageService
from faasml.models.sync import sync_time
from faasml.workload import Workload

Array = NDArray[np.float64]


@dataclass(frozen=True)
class EpochTime:
    """Seconds per epoch, by part; arrays broadcast over the allocations evaluated."""

    load_s: Array
    """t^l: each function reads its partition D/n from the object store (0 where warm
    functions keep it: ``partition_s`` is then paid once, at the start)."""
    compute_s: Array
    """(D/n) · u(m): gradient computation on the partition."""
    sync_s: Array
    """k · t^p: k synchronisations per epoch, and for n > 1 the straggler wait (the
    workload's ``straggler_share`` of the computation)."""
    invoke_s: Array
    """Warm invocation latency, once per invocation of a function in the epoch, with the
    coordinator's time between invocations (``FunctionPlatform.coordinator_s``, not billed)."""
    iterations: NDArray[np.int64]
    invocations: NDArray[np.int64]
    """Invocations of each function per epoch: more than one when the epoch outlasts the
    platform's duration limit and the function is renewed from its checkpoint."""
    partition_s: Array
    """One read of the partition D/n: what a function's start adds where warm functions keep
    their partition (``FunctionPlatform.keeps_partition``), else 0 (eq. 2's t^l has it)."""

    @property
    def total_s(self) -> Array:
        result: Array = self.load_s + self.compute_s + self.sync_s + self.invoke_s
        return result


def network_mbps(
    platform: FunctionPlatform, storage: StorageService, memory_mb: ArrayLike
) -> Array:
    """b: what one function gets from one connection to ``storage`` — min(function, connection)."""
    return np.minimum(platform.network_mbps(memory_mb), storage.connection_mbps)


def invocations_per_epoch(work_s: ArrayLike, max_duration_s: float) -> NDArray[np.int64]:
    """⌈work / duration limit⌉: how often a function is (re)invoked to finish one epoch."""
    work = np.asarray(work_s, dtype=float)
    return np.maximum(1, np.ceil(work / max_duration_s)).astype(np.int64)


def epoch_time(
    workload: Workload,
    platform: FunctionPlatform,
    data_store: StorageService,
    storage: StorageService,
    scheme: str,
    n: ArrayLike,
    memory_mb: ArrayLike,
) -> EpochTime:
    """t'(θ) = t^l + (D/n)·u(m)·(1 − φ + nφ) + k·t^p + invocation latency (CE-scaling eq. 2
    with φ, the ``evaluation_share`` of u(m) that worker 0 evaluates alone each epoch while
    the others wait: 0 for a paper's workload, which gives eq. 2 as printed), plus for
    n > 1 the straggler wait, ``straggler_share`` × that computation (0 for a paper's workload), and
    per invocation the coordinator's time between invocations (``coordinator_s``: 0 in a
    catalog, measured for a real run; ``models.cost`` does not bill it).

    A function renewed before the duration limit reloads its partition, so the load time is
    paid once per invocation; where warm functions keep it (``keeps_partition``, faasml's
    runtime) it is paid once, at the function's start (``partition_s``).
    """
    count = np.asarray(n, dtype=float)
    memory = np.asarray(memory_mb, dtype=float)
    partition_mb = workload.dataset_mb / count
    load_once = partition_mb / network_mbps(platform, data_store, memory) + data_store.latency_s
    u = workload.compute.seconds_per_mb(platform.vcpus(memory), memory) / platform.compute_speed
    share = workload.evaluation_share
    compute = partition_mb * u * ((1.0 - share) + share * count)
    iterations = workload.iterations_per_epoch(count)
    per_sync = sync_time(
        scheme,
        count,
        workload.model_mb,
        network_mbps(platform, storage, memory),
        storage.latency_for(scheme),
        storage.aggregate_mbps,
    )
    # A round of several functions also waits for the slowest: a share of its computation
    # (measured; so it grows as a smaller CPU share slows the computation).
    straggle = np.where(count > 1, compute * workload.straggler_share, 0.0)
    sync = iterations * per_sync + straggle
    invocations = invocations_per_epoch(load_once + compute + sync, platform.max_duration_s)
    keeps = platform.keeps_partition
    return EpochTime(
        load_s=np.zeros(np.shape(load_once * invocations)) if keeps else load_once * invocations,
        compute_s=compute,
        sync_s=sync,
        invoke_s=(invocations * (platform.warm_start_s + platform.coordinator_s)).astype(float),
        iterations=np.broadcast_to(iterations, compute.shape).copy(),
        invocations=invocations,
        partition_s=np.broadcast_to(load_once if keeps else 0.0, compute.shape).astype(float),
    )
