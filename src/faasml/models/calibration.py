"""Live re-calibration: the model's inputs corrected by what the run measures (pure).

A measured profile prices the job before it runs; the run then measures every epoch. For each
memory size the run used, the epochs' time besides synchronisation, loading and the
per-invocation latency is attributed to computation (evaluation included, as the probe folds
it in), giving a measured u(m) point — seconds per MB of the function's partition — that
replaces the profile's at that memory (the per-allocation correction: u(m) is what differs
between allocations of the same job). ``apply`` returns the workload with those points; the
tuning run re-predicts its remaining stages with it and re-plans them when the prediction
moves by more than δ.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faasml.catalog import Catalog, FunctionPlatform
from faasml.workload import ComputeProfile, Workload

REPLAN_DELTA = 0.1
"""Re-plan the remaining stages when their predicted time or cost moves by more than this."""


@dataclass
class Calibration:
    """Measured u(m) points by memory size (from epochs the run completed)."""

    samples: dict[int, list[float]] = field(default_factory=dict)
    """Memory MB -> measured seconds per MB of partition, one per epoch observed."""
    demands: dict[int, list[float]] = field(default_factory=dict)
    """Memory MB -> the vCPUs demanded by the functions running beside each sample's epoch
    (its own included; 0: not known, taken as alone)."""

    def observe(
        self,
        histories: Iterable[Sequence[Mapping[str, Any]]],
        epochs: range,
        workload: Workload,
        catalog: Catalog,
    ) -> None:
        """Add the epochs in ``epochs`` of each trial's history. A trial's first epoch on an
        allocation may have paid a cold start, so it counts only where no later epoch on that
        allocation was measured (then less the platform's cold start at that memory)."""
        for history in histories:
            for (n, memory), (records, warm) in _epochs_by_allocation(history, epochs).items():
                cold = float(catalog.platform.cold_start_time(memory))
                for record in records:
                    self._add(record, n, memory, 0.0 if warm else cold, workload, catalog)

    def _add(
        self,
        record: Mapping[str, Any],
        n: int,
        memory: int,
        cold_s: float,
        workload: Workload,
        catalog: Catalog,
    ) -> None:
        partition_mb = workload.dataset_mb / max(n, 1)
        fixed = int(record.get("invocations", 1)) * catalog.platform.warm_start_s + cold_s
        busy = float(record["epoch_s"]) - float(record["sync_s"]) - float(record["load_s"])
        busy = max(busy - fixed, float(record["compute_s"]))
        # The epoch shared the machine with the functions running beside it (their mean vCPU
        # demand while it ran): kept with the sample, ``apply`` takes it back to one alone.
        alone = float(catalog.platform.vcpus(memory)) * n
        # Worker 0 evaluated the whole test set (eq. 2's φ): u of one function's partition.
        share = workload.evaluation_share
        per_mb = partition_mb * ((1.0 - share) + share * n)
        self.samples.setdefault(memory, []).append(busy / max(per_mb, 1e-12))
        demand = max(alone, float(record.get("vcpu_demand", 0.0)))
        self.demands.setdefault(memory, []).append(demand)

    def to_dict(self) -> dict[str, list[list[float]]]:
        """Memory MB -> [u, vCPU demand] per sample (the record's form)."""
        return {
            str(m): [[u, d] for u, d in zip(v, self._demands(m), strict=True)]
            for m, v in sorted(self.samples.items())
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Calibration:
        """From ``to_dict``'s form (a bare number per sample, as older records hold it: demand
        not known)."""
        samples: dict[int, list[float]] = {}
        demands: dict[int, list[float]] = {}
        for m, values in data.items():
            pairs = [(x, 0.0) if isinstance(x, int | float) else (x[0], x[1]) for x in values]
            samples[int(m)] = [float(u) for u, _ in pairs]
            demands[int(m)] = [float(d) for _, d in pairs]
        return Calibration(samples, demands)

    def _demands(self, memory: int) -> list[float]:
        known = self.demands.get(memory, [])
        return known + [0.0] * (len(self.samples[memory]) - len(known))

    def delivered(self, catalog: Catalog) -> float | None:
        """The vCPUs the machine delivered to the run's functions, fitted to its epochs: at a
        memory size, u measured at demand D is u₀ · max(1, D / C), so the C whose u₀ agree
        best (least spread of log u₀ within each size) is what the machine delivered. Only
        where one size ran at demands 25 % apart (else the catalog's figure stands); on an
        unbounded platform None."""
        platform = catalog.platform
        if platform.capacity_vcpus is None:
            return platform.delivered_vcpus
        groups = [
            [(u, d) for u, d in zip(v, self._demands(m), strict=True) if d > 0 and u > 0]
            for m, v in self.samples.items()
        ]
        groups = [g for g in groups if g and max(d for _, d in g) > 1.25 * min(d for _, d in g)]
        if not groups:
            return platform.delivered_vcpus

        def spread(supply: float) -> float:
            total = 0.0
            for group in groups:
                logs = [math.log(u / max(1.0, d / supply)) for u, d in group]
                mean = sum(logs) / len(logs)
                total += sum((x - mean) ** 2 for x in logs)
            return total

        grid = [platform.capacity_vcpus * 0.02 * 1.04**i for i in range(101)]
        grid = [c for c in grid if c <= platform.capacity_vcpus] + [platform.capacity_vcpus]
        scores = [spread(c) for c in grid]
        least = min(scores)
        # Where the epochs show no crowding, every C above their demand fits: the largest.
        return max(
            c for c, score in zip(grid, scores, strict=True) if score <= least * 1.01 + 1e-12
        )

    def alone(self, platform: FunctionPlatform) -> dict[float, float]:
        """Memory MB -> the median u of its epochs, each taken back to a function alone (its
        demand's ``platform.contention`` divided out)."""
        return {
            float(m): statistics.median(
                u / platform.contention(d) for u, d in zip(v, self._demands(m), strict=True)
            )
            for m, v in self.samples.items()
        }

    def recalibrated(self, workload: Workload, catalog: Catalog) -> tuple[Workload, Catalog]:
        """``apply``'s workload and the catalog with the vCPUs the machine delivered."""
        platform = dataclasses.replace(catalog.platform, delivered_vcpus=self.delivered(catalog))
        catalog = dataclasses.replace(catalog, platform=platform)
        return self.apply(workload, catalog), catalog

    def apply(self, workload: Workload, catalog: Catalog) -> Workload:
        """The workload with u(m) measured by the run at every memory it used (the median of
        its epochs there, which leaves out the cold ones); elsewhere the profile's u(m) times
        the median ratio of measured to profiled u where both are known (what the probe
        missed — a loaded machine, a framework's warm-up — applies to every size)."""
        if not self.samples:
            return workload
        points = dict(_points(workload.compute))
        # Each epoch taken back to a function alone (what the machine delivered, fitted).
        platform = dataclasses.replace(catalog.platform, delivered_vcpus=self.delivered(catalog))
        measured = self.alone(platform)
        memories = list(measured)
        before = workload.compute.seconds_per_mb(catalog.platform.vcpus(memories), memories)
        ratio = statistics.median(
            measured[m] / max(float(b), 1e-15) for m, b in zip(memories, before, strict=True)
        )
        points = {m: u * ratio for m, u in points.items() if m not in measured}
        points.update(measured)
        # The table form keeps u(m) non-increasing in memory: a measured point above a smaller
        # size's value would be cut to it, so sizes below a measured one are raised to it.
        ordered = sorted(points.items())
        fixed = [
            (m, max(u, max((v for n, v in measured.items() if n >= m), default=u)))
            for m, u in ordered
        ]
        table = ComputeProfile("table", points=tuple(fixed))
        return dataclasses.replace(workload, compute=table)


def trial_factors(
    histories: Sequence[Sequence[Mapping[str, Any]]],
    epochs: range,
    workload: Workload,
    catalog: Catalog,
) -> list[float]:
    """Each trial's computation over the trials' together (``Calibration.apply``'s u(m), the
    median of all their epochs): its own median u over theirs at each memory size both ran
    on, the median of those ratios (1 where none). ``stage_estimate`` prices a stage of these
    trials with them: where the search space sizes the model, one wide trial kept can outlast
    the rest."""
    together = Calibration()
    together.observe(histories, epochs, workload, catalog)
    platform = dataclasses.replace(catalog.platform, delivered_vcpus=together.delivered(catalog))
    base = together.alone(platform)
    factors = []
    for history in histories:
        own = Calibration()
        own.observe([history], epochs, workload, catalog)
        ratios = [u / base[m] for m, u in own.alone(platform).items() if base.get(m, 0) > 0]
        factors.append(statistics.median(ratios) if ratios else 1.0)
    return factors


def compute_ratio(
    histories: Iterable[Sequence[Mapping[str, Any]]],
    epochs: range,
    points: Sequence[tuple[int, float]],
    train_samples: int,
    catalog: Catalog,
) -> float | None:
    """The run's training computation per sample over ``points`` ((memory MB, seconds per
    sample), as a profile's probe timed them): the median over the epochs in ``epochs`` of
    the slowest worker's computation per sample of its partition, taken back to a function
    alone. A trial's first epoch on an allocation (a framework's warm-up) counts only where
    no later one was measured. None without epochs. Computation alone, not the epoch's time:
    a small job's epoch is mostly invocation and synchronisation, which the probe prices
    apart."""
    platform = catalog.platform
    ratios: list[float] = []
    for history in histories:
        for (n, memory), (records, _) in _epochs_by_allocation(history, epochs).items():
            expected = _interpolated(points, memory)
            alone = float(platform.vcpus(memory)) * n
            for record in records:
                demand = max(alone, float(record.get("vcpu_demand", 0.0)))
                seconds = float(record["compute_s"]) / platform.contention(demand)
                per_sample = seconds / max(train_samples / max(n, 1), 1.0)
                if expected > 0 and per_sample > 0:
                    ratios.append(per_sample / expected)
    return statistics.median(ratios) if ratios else None


def _epochs_by_allocation(
    history: Sequence[Mapping[str, Any]], epochs: range
) -> dict[tuple[int, int], tuple[list[Mapping[str, Any]], bool]]:
    """A trial's epochs in ``epochs`` by allocation (n, memory MB), and whether they are warm:
    its first epoch on an allocation may have paid a cold start (or a framework's warm-up),
    so it is left out where a later epoch on that allocation was measured."""
    seen: set[tuple[int, int]] = set()
    chosen: dict[tuple[int, int], list[tuple[bool, Mapping[str, Any]]]] = {}
    for record in history:
        key = (int(record["n"]), int(record["memory_mb"]))
        first = key not in seen
        seen.add(key)
        if int(record["epoch"]) in epochs:
            chosen.setdefault(key, []).append((first, record))
    out = {}
    for key, entries in chosen.items():
        warm = [r for first, r in entries if not first]
        out[key] = (warm or [r for _, r in entries], bool(warm))
    return out


def _interpolated(points: Sequence[tuple[int, float]], memory: float) -> float:
    """``points``' seconds at ``memory``: linear between two, the nearest beyond them."""
    ordered = sorted(points)
    if not ordered:
        return 0.0
    if memory <= ordered[0][0]:
        return float(ordered[0][1])
    for (m0, s0), (m1, s1) in itertools.pairwise(ordered):
        if memory <= m1:
            return float(s0 + (s1 - s0) * (memory - m0) / max(m1 - m0, 1e-12))
    return float(ordered[-1][1])


def _points(compute: ComputeProfile) -> tuple[tuple[float, float], ...]:
    if compute.kind == "table":
        return compute.points
    # An analytical profile: sample it on a grid so measured points can replace its values.
    grid = (128.0, 512.0, 1024.0, 1769.0, 3538.0, 10240.0)
    values = compute.seconds_per_mb([g / 1769.0 for g in grid], grid)
    return tuple((g, float(v)) for g, v in zip(grid, values, strict=True))


def moved(before: tuple[float, float], after: tuple[float, float], delta: float) -> bool:
    """True when time or cost changed by more than ``delta`` relative to ``before``."""
    return any(abs(a - b) > delta * max(abs(b), 1e-12) for b, a in zip(before, after, strict=True))
