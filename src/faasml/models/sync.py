"""Synchronisation time and storage requests per iteration (CE-scaling eq. 3; SMLT Fig. 5).

All functions take array-like ``n`` and broadcast; one function (n = 1) needs no synchronisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]


def transfers(scheme: str, n: ArrayLike) -> Array:
    """Serial transfers on the critical path of one synchronisation (CE-scaling eq. 3).

    allreduce (stateless storage, one aggregator): 3n − 2 transfers of the whole model —
    n − 1 gradients up, n − 1 down to the aggregator, 1 aggregate up, and every other worker's
    read of it counted serially as the paper does.
    param-server (the server aggregates): 2n − 2.
    scatter-reduce (sharded, every worker aggregates one shard of M/n): 3n − 2 transfers of a
    shard per worker — n − 1 shards up, n − 1 down, its aggregate up, n − 1 aggregates down
    (rounded by one, as the paper's count) — run by all workers in parallel.
    """
    count = np.asarray(n, dtype=float)
    if scheme in ("allreduce", "scatter-reduce"):
        result = 3 * count - 2
    elif scheme == "param-server":
        result = 2 * count - 2
    else:
        raise ValueError(f"unknown scheme {scheme!r}")
    return np.where(count > 1, result, 0.0)


def item_mb(scheme: str, n: ArrayLike, model_mb: float) -> Array:
    """Size of one value stored or transferred: the model, or a shard M/n for scatter-reduce."""
    count = np.asarray(n, dtype=float)
    if scheme == "scatter-reduce":
        return model_mb / count
    return np.full(count.shape, float(model_mb))


def sync_time(
    scheme: str,
    n: ArrayLike,
    model_mb: float,
    bandwidth_mbps: ArrayLike,
    latency_s: float,
    aggregate_mbps: float | None = None,
) -> Array:
    """t^p(θ): seconds for one synchronisation (CE-scaling eq. 3, extended).

    t = transfers · (item / b + ℓ), with b = min(function bandwidth, connection bandwidth), and
    never less than the bytes moved divided by the service's aggregate bandwidth, where the
    service is one node whose NIC every function shares (ElastiCache, a VM).
    """
    count = np.asarray(n, dtype=float)
    item = item_mb(scheme, count, model_mb)
    steps = transfers(scheme, count)
    serial = steps * (item / np.asarray(bandwidth_mbps, dtype=float) + latency_s)
    if aggregate_mbps is None:
        return serial
    writers = count if scheme == "scatter-reduce" else 1.0  # every worker moves its shards
    moved = steps * item * writers
    return np.maximum(serial, moved / aggregate_mbps)


@dataclass(frozen=True)
class SyncRequests:
    """Storage requests of one synchronisation, over the whole job, and their item size."""

    puts: Array
    gets: Array
    item_mb: Array


def sync_requests(scheme: str, n: ArrayLike, model_mb: float) -> SyncRequests:
    """Requests one synchronisation issues to the store (what request-priced storage bills).

    allreduce: n puts (n − 1 gradients and the aggregate), 2(n − 1) gets.
    scatter-reduce: n² puts (n(n − 1) shards and n aggregates), 2n(n − 1) gets, of M/n each.
    param-server: none (a time-priced server).
    """
    count = np.asarray(n, dtype=float)
    single = count <= 1
    if scheme == "allreduce":
        puts, gets = count, 2 * (count - 1)
    elif scheme == "scatter-reduce":
        puts, gets = count**2, 2 * count * (count - 1)
    elif scheme == "param-server":
        puts, gets = np.zeros_like(count), np.zeros_like(count)
    else:
        raise ValueError(f"unknown scheme {scheme!r}")
    return SyncRequests(
        puts=np.where(single, 0.0, puts),
        gets=np.where(single, 0.0, gets),
        item_mb=item_mb(scheme, count, model_mb),
    )
