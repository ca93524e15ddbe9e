"""A simulated deployment landscape for searches: the analytical model of a *true* job (the
profile perturbed the way a real job differs from its profile) plus measurement noise.

``TrueLandscape.measure`` is a probe: a few rounds on an allocation, billed (cold start plus
those rounds), returning the time and cost per epoch it measured (truth × lognormal noise).
``TrueLandscape.exact`` gives the noiseless truth of every candidate of a space, from which the
exhaustive optimum is taken.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.cost import EpochCost, epoch_cost, startup_cost
from faasml.models.perf import EpochTime, epoch_time
from faasml.search.deployment import DeploymentSpace, Measurement
from faasml.types import Allocation
from faasml.workload import ComputeProfile, Workload

Array = NDArray[np.float64]


def perturbed_workload(
    workload: Workload, rng: np.random.Generator, *, spread: float = 1.0
) -> Workload:
    """A job that differs from its profile as real jobs do: computation ×U(0.6, 1.6) with a
    memory tilt (m/1024)^U(−0.2, 0.2) (a different parallel fraction), the model ×U(0.7, 1.4)
    (more or less to synchronise); ``spread`` scales the log of each perturbation."""
    scale = float(np.exp(spread * rng.uniform(np.log(0.6), np.log(1.6))))
    tilt = float(spread * rng.uniform(-0.2, 0.2))
    model = float(np.exp(spread * rng.uniform(np.log(0.7), np.log(1.4))))
    compute = workload.compute
    if compute.kind == "amdahl":
        memories = np.array([128.0, 512.0, 1769.0, 3538.0, 5308.0, 7077.0, 10240.0])
        vcpus = np.minimum(memories / 1769.0, 6.0)
        base = compute.seconds_per_mb(vcpus, memories)
    else:
        memories = np.array([p[0] for p in compute.points])
        base = np.array([p[1] for p in compute.points])
    values = base * scale * (memories / 1024.0) ** tilt
    points = tuple((float(m), float(v)) for m, v in zip(memories, values, strict=True))
    return dataclasses.replace(
        workload, compute=ComputeProfile("table", points=points), model_mb=workload.model_mb * model
    )


def other_law_workload(workload: Workload, rng: np.random.Generator) -> tuple[Workload, float]:
    """A true job whose computation follows another law than its profile's, not a rescaling:
    the perturbation of ``perturbed_workload``, then computation that stops speeding up past
    c vCPUs (c ~ U(1, 2): a job whose framework uses one or two cores), and the straggler
    share s ~ U(0, 0.15) for ``TrueLandscape.straggle`` (the computation of n functions
    waits for the slowest: × (1 + s · ln n)), neither of which the model's terms express."""
    true = perturbed_workload(workload, rng)
    cores = float(rng.uniform(1.0, 2.0))
    straggle = float(rng.uniform(0.0, 0.15))
    memories = np.array([p[0] for p in true.compute.points])
    values = np.array([p[1] for p in true.compute.points])
    knee = cores * 1769.0  # the memory that buys ``cores`` vCPUs (AWS Lambda)
    at_knee = float(np.exp(np.interp(np.log(knee), np.log(memories), np.log(values))))
    kept = memories < knee
    memories = np.append(memories[kept], [knee, max(float(memories.max()), knee) * 1.01])
    values = np.append(values[kept], [at_knee, at_knee])
    points = tuple((float(m), float(v)) for m, v in zip(memories, values, strict=True))
    compute = ComputeProfile("table", points=points)
    return dataclasses.replace(true, compute=compute), straggle


@dataclass
class TrueLandscape:
    """The truth a search probes: ``workload`` (the real job) on ``catalog``, measured with
    lognormal noise of ``noise`` (relative), each probe ``probe_rounds`` rounds long."""

    workload: Workload
    catalog: Catalog
    noise: float = 0.05
    probe_rounds: int = 5
    probe_cap_s: float = 10.0
    """A probe stops after this many seconds of rounds (at least one round is measured)."""
    seed: int = 0
    straggle: float = 0.0
    """The computation of n functions takes × (1 + straggle · ln n): a law the model lacks."""
    rng: np.random.Generator = field(init=False)
    probes: int = 0

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def truth(
        self, n: NDArray[np.int64], memory_mb: NDArray[np.int64], option: tuple[str, str]
    ) -> tuple[Array, Array, Array, Array]:
        """(time per epoch, cost per epoch, start time, start cost); inf where the job does
        not fit the function's memory."""
        platform = self.catalog.platform
        time, cost = self._epoch(n, memory_mb, option)
        total_s = np.asarray(time.load_s + time.compute_s + time.sync_s + time.invoke_s, float)
        total_usd = np.asarray(cost.function_usd + cost.invocation_usd + cost.storage_usd, float)
        fits = self.workload.memory_needed_mb(n) <= memory_mb
        start_s = platform.cold_start_time(memory_mb) * np.ones_like(total_s)
        start_usd = startup_cost(platform, n, memory_mb) * np.ones_like(total_s)
        inf = np.full_like(total_s, np.inf)
        return (
            np.where(fits, total_s, inf),
            np.where(fits, total_usd, inf),
            start_s,
            start_usd,
        )

    def _epoch(
        self, n: NDArray[np.int64], memory_mb: NDArray[np.int64], option: tuple[str, str]
    ) -> tuple[EpochTime, EpochCost]:
        """The true job's epoch on these deployments, by part (time and cost)."""
        catalog = self.catalog
        platform = catalog.platform
        storage, scheme = option
        data = catalog.storage(platform.data_store)
        service = catalog.storage(storage)
        time = epoch_time(self.workload, platform, data, service, scheme, n, memory_mb)
        if self.straggle:
            slow = 1.0 + self.straggle * np.log(np.asarray(n, dtype=float))
            time = dataclasses.replace(time, compute_s=time.compute_s * slow)
        cost = epoch_cost(self.workload, platform, data, service, scheme, n, memory_mb, time)
        return time, cost

    def part_of_round(self, allocation: Allocation, fraction: float) -> tuple[float, float]:
        """The time and cost of ``fraction`` of one round as shares of a whole round's: the
        computation scales with it (each function trains that share of its rows), the
        synchronisation, load and invocation do not (as ``DeploymentSpace.part_price``)."""
        n = np.array([allocation.n])
        memory = np.array([allocation.memory_mb])
        time, cost = self._epoch(n, memory, (allocation.storage, allocation.scheme))
        total_s = float(time.total_s[0])
        compute = float(time.compute_s[0]) / total_s if total_s > 0 else 0.0
        function_usd = float(cost.function_usd[0])
        total_usd = float(cost.total_usd[0])
        cost_share = 1.0 - (1.0 - fraction) * compute * function_usd / max(total_usd, 1e-300)
        return 1.0 - (1.0 - fraction) * compute, cost_share

    def exact(self, space: DeploymentSpace) -> tuple[Array, Array]:
        """Noiseless time and cost per epoch of every candidate of ``space`` (inf: no fit)."""
        table = space.table
        time = np.full(len(table), np.inf)
        cost = np.full(len(table), np.inf)
        for k, option in enumerate(table.options):
            rows = np.flatnonzero(table.option == k)
            if rows.size:
                t, c, _, _ = self.truth(table.n[rows], table.memory_mb[rows], option)
                time[rows], cost[rows] = t, c
        return time, cost

    def measure(self, allocation: Allocation, rounds: float | None = None) -> Measurement:
        """One billed probe of ``allocation``: cold start plus ``probe_rounds`` rounds, or
        ``rounds`` when fewer (a shortened probe: its noise √(full rounds / rounds) times a
        full probe's, as fewer rounds average out less of it); below one, that part of one
        round (``part_of_round``), extrapolated to a whole one."""
        self.probes += 1
        n = np.array([allocation.n])
        memory = np.array([allocation.memory_mb])
        time, cost, start_s, start_usd = self.truth(
            n, memory, (allocation.storage, allocation.scheme)
        )
        if not np.isfinite(time[0]):
            # The function runs out of memory at once: billed for its start only.
            return Measurement(
                np.inf, np.inf, float(start_s[0]), float(start_usd[0]), failed="out of memory"
            )
        per_epoch = float(self.workload.iterations_per_epoch(allocation.n))
        draw = float(self.rng.normal(0.0, 1.0))
        factor = float(np.exp(self.noise * draw))
        per_round = float(time[0]) * factor / max(per_epoch, 1.0)
        full = min(
            self.probe_rounds, per_epoch, max(1.0, self.probe_cap_s // max(per_round, 1e-12))
        )
        ran = full if rounds is None else min(float(rounds), full)
        if ran >= 1.0 or rounds is None:
            ran = max(1.0, ran)
            time_share = cost_share = ran / max(per_epoch, 1.0)
        elif ran > 0:
            part_s, part_usd = self.part_of_round(allocation, ran)
            time_share, cost_share = (
                part_s / max(per_epoch, 1.0),
                part_usd / max(per_epoch, 1.0),
            )
        else:
            raise ConfigError(f"the value of rounds is {rounds}, but must be positive")
        if ran < full:
            factor = float(np.exp(self.noise * np.sqrt(full / ran) * draw))
        return Measurement(
            time_s=float(time[0]) * factor,
            cost_usd=float(cost[0]) * factor,
            probe_s=float(start_s[0] + time_share * time[0] * factor),
            probe_usd=float(start_usd[0] + cost_share * cost[0] * factor),
        )
