"""Typed catalog records (MISSION C1): a function platform and the storage services beside it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

SCHEMES = ("allreduce", "scatter-reduce", "param-server")
"""Synchronisation schemes the model knows (CE-scaling eq. 3; SMLT Fig. 5)."""


@dataclass(frozen=True)
class Source:
    """Where a figure comes from and when it was read."""

    what: str
    reference: str
    date: str


@dataclass(frozen=True)
class PiecewiseLinear:
    """y(x) through sorted points, linear between them, flat outside (e.g. bandwidth by memory)."""

    points: tuple[tuple[float, float], ...]

    def __call__(self, x: ArrayLike) -> NDArray[np.float64]:
        xs = np.array([p[0] for p in self.points], dtype=float)
        ys = np.array([p[1] for p in self.points], dtype=float)
        return np.interp(np.asarray(x, dtype=float), xs, ys)


@dataclass(frozen=True)
class Architecture:
    """Price and relative compute speed of one CPU architecture of a platform."""

    price_per_gb_s: float
    compute_speed: float = 1.0
    """Relative speed of u(m) against the profile's reference (1.0 = as profiled)."""


@dataclass(frozen=True)
class FunctionPlatform:
    """A FaaS platform: memory, CPU share, prices and limits (CE-scaling Table III: p_f, p_invk)."""

    name: str
    architectures: dict[str, Architecture]
    architecture: str
    """The architecture in force; ``with_architecture`` picks another."""
    price_per_invocation: float
    memory_min_mb: int
    memory_max_mb: int
    memory_step_mb: int
    mb_per_vcpu: float
    """vCPU share = memory / mb_per_vcpu (1769 MB per vCPU on AWS Lambda)."""
    max_vcpus: float
    max_duration_s: float
    concurrency_limit: int
    cold_start_s: float
    """Start of a new function instance at one full vCPU or more."""
    warm_start_s: float
    bills_cold_start: bool
    network_mbps: PiecewiseLinear
    """A function's network bandwidth in MB/s as a function of its memory in MB."""
    data_store: str
    """The storage service that holds training data partitions (the object store)."""
    capacity_vcpus: float | None = None
    """Total vCPUs of the machine(s) behind the platform, when bounded (the local machine)."""
    capacity_memory_mb: float | None = None
    cold_start_scales_with_cpu: bool = False
    """True where a function starts under its CPU share (a cgroup quota from the first
    instruction, as on the local platform): a start then takes cold_start_s / min(vCPUs, 1)."""
    delivered_vcpus: float | None = None
    """vCPUs the machine behind a bounded platform was measured to deliver to functions
    running side by side (a job profile measures it; None: ``capacity_vcpus``)."""
    keeps_partition: bool = False
    """True where a warm instance keeps the data partition it loaded (its globals, as
    faasml's workers do on every platform): a function loads its partition once, at its start
    (priced with the cold start), not at every invocation as CE-scaling eq. 2 reloads it. A
    real run's plans set it (``runtime.job_profile.planning_inputs``); False in catalogs."""
    coordinator_s: float = 0.0
    """Seconds a run's coordinator takes between one invocation of a trial ending and its
    next starting (noticing the end, committing the run's record, launching): in the time of
    every invocation round, not billed (no function runs then). A real run measures it
    (``runtime.job_profile.planning_inputs``); 0 in catalogs, so plans made without running
    are CE-scaling's."""

    @property
    def price_per_gb_s(self) -> float:
        return self.architectures[self.architecture].price_per_gb_s

    @property
    def compute_speed(self) -> float:
        return self.architectures[self.architecture].compute_speed

    def with_architecture(self, architecture: str) -> FunctionPlatform:
        if architecture not in self.architectures:
            from faasml.exceptions import CatalogError

            raise CatalogError(
                f"the value of architecture is {architecture!r}, but platform {self.name} "
                f"offers: {', '.join(sorted(self.architectures))}"
            )
        return replace(self, architecture=architecture)

    def vcpus(self, memory_mb: ArrayLike) -> NDArray[np.float64]:
        """CPU share of a function: memory / mb_per_vcpu, capped at max_vcpus."""
        return np.minimum(np.asarray(memory_mb, dtype=float) / self.mb_per_vcpu, self.max_vcpus)

    def cold_start_time(self, memory_mb: ArrayLike) -> NDArray[np.float64]:
        """Seconds to start a new instance of ``memory_mb``: cold_start_s, or, where the start
        runs under the CPU share, cold_start_s / min(vCPUs(m), 1)."""
        memory = np.asarray(memory_mb, dtype=float)
        if not self.cold_start_scales_with_cpu:
            return np.full(memory.shape, self.cold_start_s)
        return self.cold_start_s / np.minimum(self.vcpus(memory), 1.0)

    def contention(self, demand_vcpus: float) -> float:
        """How much slower a function runs while functions demanding ``demand_vcpus`` in all
        run at once: the demand over what the machine delivers, at least 1 (1 where the
        platform is unbounded, as public FaaS)."""
        return float(self.contentions(float(demand_vcpus)))

    def contentions(self, demand_vcpus: ArrayLike) -> NDArray[np.float64]:
        """``contention`` of each demand (vCPUs), as an array."""
        demand = np.asarray(demand_vcpus, dtype=float)
        supply = self.delivered_vcpus or self.capacity_vcpus
        if supply is None or supply <= 0:
            return np.ones(demand.shape)
        return np.maximum(1.0, demand / supply)

    def max_concurrent(self, memory_mb: ArrayLike) -> NDArray[np.int64]:
        """Most functions of this memory that can run at once: the concurrency limit, and
        the machine's vCPUs and memory where the platform is bounded by them."""
        memory = np.asarray(memory_mb, dtype=float)
        limit = np.full(memory.shape, float(self.concurrency_limit))
        if self.capacity_vcpus is not None:
            limit = np.minimum(limit, np.floor(self.capacity_vcpus / self.vcpus(memory) + 1e-9))
        if self.capacity_memory_mb is not None:
            limit = np.minimum(limit, np.floor(self.capacity_memory_mb / memory + 1e-9))
        return limit.astype(np.int64)

    def memory_sizes(self, step_mb: int | None = None) -> NDArray[np.int64]:
        """Memory sizes offered, from the minimum to the maximum in ``step_mb`` steps."""
        step = step_mb or self.memory_step_mb
        sizes = np.arange(self.memory_min_mb, self.memory_max_mb + 1, step, dtype=np.int64)
        if sizes[-1] != self.memory_max_mb:
            sizes = np.append(sizes, self.memory_max_mb)
        return sizes


@dataclass(frozen=True)
class StorageService:
    """A storage service that carries synchronisation (CE-scaling Table I; b_s, ℓ_s, p_s).

    ``pricing`` is 'request' (a price per PUT and per GET, optionally per unit of item size,
    as DynamoDB's request units) or 'time' (an hourly price for a node that runs while the
    job runs, as ElastiCache or a VM parameter server) or 'function' (a cache in the memory of
    ``cache_nodes`` functions of ``cache_memory_mb`` each, InfiniCache: the model prices it as
    those functions billed for the whole run, ``hourly_usd`` derived from the platform's
    GB-second price; a run is billed from the nodes' real invocations).
    """

    name: str
    description: str
    pricing: str
    schemes: tuple[str, ...]
    latency_s: float
    connection_mbps: float
    """Bandwidth of one connection in MB/s."""
    aggregate_mbps: float | None = None
    """Bandwidth of the whole service in MB/s (a node's NIC); None when it scales out."""
    put_usd: float = 0.0
    get_usd: float = 0.0
    put_unit_kb: float | None = None
    """When set, a PUT costs put_usd per started unit of this many KB (DynamoDB WRU = 1 KB)."""
    get_unit_kb: float | None = None
    hourly_usd: float = 0.0
    node: str | None = None
    node_memory_mb: float | None = None
    """Memory of the node, bounding what one synchronisation round may hold."""
    max_item_kb: float | None = None
    """Largest value one key may hold (DynamoDB: 400 KB)."""
    sources: tuple[Source, ...] = field(default=())
    cache_nodes: int = 0
    """'function' pricing: the cache-node functions the model bills for the run."""
    cache_memory_mb: float = 0.0
    """'function' pricing: the memory of each cache node."""
    offered: str = "always"
    """'always': a plan may choose it whenever the catalog is used unrestricted; 'named':
    only when a job's stores or ``--storages`` name it (plans that do not name it unchanged)."""
    scheme_latency_s: Mapping[str, float] = field(default_factory=dict)
    """Effective latency per transfer of a scheme where it was measured (``faasml profile``
    fits eq. 3 per scheme: schemes poll and overlap differently); others use ``latency_s``."""

    @property
    def billed_by_time(self) -> bool:
        """Whether the model prices it per second of the run ('time' and 'function')."""
        return self.pricing in ("time", "function")

    def latency_for(self, scheme: str) -> float:
        """ℓ_s of eq. 3 for ``scheme``: its measured effective latency, else ``latency_s``."""
        return self.scheme_latency_s.get(scheme, self.latency_s)


@dataclass(frozen=True)
class Catalog:
    """A versioned catalog: one function platform and the storage services it can use."""

    name: str
    version: str
    date: str
    platform: FunctionPlatform
    storages: dict[str, StorageService]
    sources: tuple[Source, ...] = field(default=())
    path: str | None = None
    sync_storages: tuple[str, ...] | None = None
    """The storages offered for synchronisation (``restricted_to``); None: all of them."""

    def storage(self, name: str) -> StorageService:
        from faasml.exceptions import UnknownNameError

        try:
            return self.storages[name]
        except KeyError:
            raise UnknownNameError(
                f"catalog {self.name} has no storage '{name}'; "
                f"choose one of: {', '.join(sorted(self.storages))}"
            ) from None

    def with_architecture(self, architecture: str) -> Catalog:
        return replace(self, platform=self.platform.with_architecture(architecture))

    def with_concurrency(self, limit: int) -> Catalog:
        """The same catalog running at most ``limit`` functions at once (never more than now)."""
        if limit >= self.platform.concurrency_limit:
            return self
        return replace(self, platform=replace(self.platform, concurrency_limit=max(limit, 1)))

    def restricted_to(self, storages: list[str]) -> Catalog:
        """The same catalog synchronising only through the named services (each must exist).

        The platform's data store stays in ``storages`` (training data is read from it) but
        is offered for synchronisation only when it is named.
        """
        chosen = tuple(self.storage(name).name for name in storages)
        return replace(self, sync_storages=chosen)

    def sync_options(self) -> tuple[tuple[str, str], ...]:
        """Every (storage, scheme) pair a plan may synchronise through."""
        names = self.sync_storages
        if names is None:
            names = tuple(n for n, s in self.storages.items() if s.offered == "always")
        return tuple((name, scheme) for name in names for scheme in self.storages[name].schemes)
