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
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from faasml.catalog import Catalog
from faasml.models.cost import startup_cost
from faasml.models.space import evaluate_allocation
from faasml.planners.tuning._problem import trials_per_wave
from faasml.runtime.estimates import fits_capacity
from faasml.types import Allocation, Constraint, Objective
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
            seen: set[tuple[int, int]] = set()
            chosen: dict[tuple[int, int], list[tuple[bool, Mapping[str, Any]]]] = {}
            for record in history:
                key = (int(record["n"]), int(record["memory_mb"]))
                first = key not in seen
                seen.add(key)
                if int(record["epoch"]) in epochs:
                    chosen.setdefault(key, []).append((first, record))
            for (n, memory), entries in chosen.items():
                warm = [r for first, r in entries if not first]
                cold = float(catalog.platform.cold_start_time(memory))
                for record in warm or [r for _, r in entries]:
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
        self.samples.setdefault(memory, []).append(busy / max(partition_mb, 1e-12))
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
        measured = {
            float(m): statistics.median(
                u / platform.contention(d) for u, d in zip(v, self._demands(m), strict=True)
            )
            for m, v in self.samples.items()
        }
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


def _points(compute: ComputeProfile) -> tuple[tuple[float, float], ...]:
    if compute.kind == "table":
        return compute.points
    # An analytical profile: sample it on a grid so measured points can replace its values.
    grid = (128.0, 512.0, 1024.0, 1769.0, 3538.0, 10240.0)
    values = compute.seconds_per_mb([g / 1769.0 for g in grid], grid)
    return tuple((g, float(v)) for g, v in zip(grid, values, strict=True))


class EarlyStart(NamedTuple):
    """A stage's functions started during the last wave of the stage before (the runtime's
    prewarm: ``prewarmed``)."""

    functions: int
    hidden_s: float
    """Seconds of their start that the wave before can hide (its length)."""
    contention: float = 1.0
    """How much slower the starts run beside that wave (``Platform.contention`` of the two
    together's vCPU demand)."""


NO_EARLY_START = EarlyStart(0, 0.0)


def stage_estimate(
    workload: Workload,
    catalog: Catalog,
    allocation: Allocation,
    trials: int,
    epochs: int,
    warm: int = 0,
    prewarm: EarlyStart = NO_EARLY_START,
) -> tuple[float, float]:
    """T_i and C_i of one stage on ``allocation`` (CE-scaling eqs. 7–8 with waves); ``warm``
    functions of its memory size are left warm by the stage before, and when they cover the
    stage's first wave it pays no cold start (a platform reuses a warm function). ``prewarm``:
    functions started during the stage before (``prewarmed``); where they complete the first
    wave their start is still billed, at the contention it ran at beside that stage, but only
    the part not hidden is waited for, and the partition's read that follows the start always
    is. On a bounded platform each wave runs ``contention`` times slower where its functions
    together demand more vCPUs than the machine delivers (a public FaaS has no such bound:
    factor 1)."""
    table = evaluate_allocation(workload, catalog, allocation)
    if len(table) == 0:
        return float("inf"), float("inf")
    k = int(trials_per_wave(table, catalog)[0])
    platform = catalog.platform
    wave = min(trials, k)
    first = platform.contention(wave_demand(catalog, allocation, wave))
    start_s = float(platform.cold_start_time(allocation.memory_mb))
    start_usd = float(startup_cost(platform, allocation.n, allocation.memory_mb))
    read_s = float(table.startup_s[0]) - start_s
    read_usd = float(table.startup_usd[0]) - start_usd
    time = cost = 0.0
    if wave * allocation.n > warm + prewarm.functions:  # a cold first wave
        time = (start_s + read_s) * first
        cost = wave * (start_usd + read_usd) * first
    elif wave * allocation.n > warm:
        # Started early: only the platform's start is hidden; the data partition is read by
        # the first invocation, after it.
        started = start_s * prewarm.contention
        time = max(0.0, started - prewarm.hidden_s) + read_s * first
        cost = wave * (start_usd * prewarm.contention + read_usd * first)
    epoch_s, function_usd = float(table.time_s[0]), float(table.function_usd[0])
    rest = float(table.cost_usd[0]) - function_usd
    left = trials
    while left > 0:
        wave = min(left, k)
        slower = platform.contention(wave_demand(catalog, allocation, wave))
        time += epochs * epoch_s * slower
        cost += wave * epochs * (function_usd * slower + rest)
        left -= wave
    return time, cost


def wave_demand(catalog: Catalog, allocation: Allocation, trials: int) -> float:
    """vCPUs that ``trials`` trials of ``allocation`` running at once demand."""
    return trials * allocation.n * float(catalog.platform.vcpus(allocation.memory_mb))


def warm_after(catalog: Catalog, workload: Workload, allocation: Allocation, trials: int) -> int:
    """Functions of ``allocation``'s size a stage of ``trials`` trials leaves warm."""
    table = evaluate_allocation(workload, catalog, allocation)
    if len(table) == 0:
        return 0
    return min(trials, int(trials_per_wave(table, catalog)[0])) * allocation.n


def stage_estimates(
    workload: Workload,
    catalog: Catalog,
    stages: list[dict[str, Any]],
    warm: Mapping[int, int] | None = None,
) -> list[tuple[float, float]]:
    """T_i and C_i of each planned stage (dicts with allocation, trials, epochs) in turn, each
    starting on the functions the stages before left warm (``warm``: memory MB -> functions
    warm before the first, e.g. the probe's). A stage whose last wave the next stage's
    functions start beside is slowed by them (``overlap_delay``)."""
    pool = dict(warm or {})
    out: list[tuple[float, float]] = []
    for index, stage in enumerate(stages):
        allocation = Allocation(**stage["allocation"])
        trials, epochs = stage["trials"], stage["epochs"]
        ready = pool.get(allocation.memory_mb, 0)
        early = NO_EARLY_START
        if index > 0:
            before = stages[index - 1]
            early = prewarmed(workload, catalog, before, stage, pool)
            delay_s, delay_usd = overlap_delay(workload, catalog, before, stage, early)
            out[-1] = (out[-1][0] + delay_s, out[-1][1] + delay_usd)
        out.append(stage_estimate(workload, catalog, allocation, trials, epochs, ready, early))
        pool = warm_pool(workload, catalog, [stage], pool)
    return out


def _last_wave(workload: Workload, catalog: Catalog, stage: Mapping[str, Any]) -> int:
    """Trials in ``stage``'s last wave (0 where its allocation cannot run)."""
    table = evaluate_allocation(workload, catalog, Allocation(**stage["allocation"]))
    if len(table) == 0:
        return 0
    k = int(trials_per_wave(table, catalog)[0])
    trials = int(stage["trials"])
    return trials - (math.ceil(trials / k) - 1) * k


def prewarmed(
    workload: Workload,
    catalog: Catalog,
    stage: Mapping[str, Any],
    following: Mapping[str, Any],
    pool: Mapping[int, int],
) -> EarlyStart:
    """What the runtime's prewarm (``Coordinator.run(..., then=Prewarm(...))``, the rule of
    ``SegmentLaunching._prewarm_next``) gives ``following``: the functions started during
    ``stage``'s last wave, the seconds of their start hidden behind it, and the contention
    they start at beside it. They are the functions its first wave needs beyond those warm
    after ``stage`` (``pool``), and only where all of them fit beside the last wave's
    functions within the platform's capacity (else none is counted: the runtime may still
    start some as that wave's trials finish, which no prediction promises). Their start
    overlaps the last wave's epochs: hidden up to the wave's length (the runtime starts them
    at most PREWARM_LEAD × a start before the stage's predicted end, so a longer wave hides
    all of it)."""
    before, after = Allocation(**stage["allocation"]), Allocation(**following["allocation"])
    need = warm_after(catalog, workload, after, following["trials"])
    extra = need - pool.get(after.memory_mb, 0)
    last = _last_wave(workload, catalog, stage)
    if extra <= 0 or last == 0:
        return NO_EARLY_START
    busy = last * before.n
    idle = pool.get(after.memory_mb, 0) - (busy if after.memory_mb == before.memory_mb else 0)
    sizes = [(before.memory_mb, busy), (after.memory_mb, max(idle, 0) + extra)]
    if not fits_capacity(catalog, sizes):
        return NO_EARLY_START
    platform = catalog.platform
    demand = wave_demand(catalog, before, last)
    beside = platform.contention(demand + extra * float(platform.vcpus(after.memory_mb)))
    slower = platform.contention(demand)
    epoch_s = float(evaluate_allocation(workload, catalog, before).time_s[0])
    return EarlyStart(extra, int(stage["epochs"]) * epoch_s * slower, beside)


def overlap_delay(
    workload: Workload,
    catalog: Catalog,
    stage: Mapping[str, Any],
    following: Mapping[str, Any],
    early: EarlyStart,
) -> tuple[float, float]:
    """Seconds and dollars ``stage`` gains from ``following``'s functions starting beside its
    last wave (``early``). While both run the wave runs at c_wave / c_both of its speed (each
    the platform's contention at their vCPU demand), so an overlap of o seconds delays it by
    o·(1 − c_wave / c_both), billed to the wave's functions; 0 where the machine delivers
    what both demand."""
    if early.functions == 0:
        return 0.0, 0.0
    before = Allocation(**stage["allocation"])
    last = _last_wave(workload, catalog, stage)
    alone = catalog.platform.contention(wave_demand(catalog, before, last))
    if early.contention <= alone:
        return 0.0, 0.0
    after = Allocation(**following["allocation"])
    started = float(catalog.platform.cold_start_time(after.memory_mb)) * early.contention
    overlap = min(started, early.hidden_s)
    delay = overlap * (1.0 - alone / early.contention)
    table = evaluate_allocation(workload, catalog, before)
    per_second = float(table.function_usd[0]) / float(table.time_s[0])  # one trial's functions
    return delay, last * per_second * delay


def warm_pool(
    workload: Workload,
    catalog: Catalog,
    stages: list[dict[str, Any]],
    warm: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """Memory MB -> functions warm after ``stages`` ran in turn, from ``warm`` before them
    (least recently used first, as the dict's order). On a bounded machine a stage's functions
    need room: idle ones of other sizes are stopped, the least recently used first (as the
    local platform makes room), so only those that fit beside the stage's stay warm (a stage
    planned onto the probe's size after stages on another found it stopped, and paid a cold
    start no prediction had)."""
    pool = dict(warm or {})
    for stage in stages:
        allocation = Allocation(**stage["allocation"])
        left = warm_after(catalog, workload, allocation, stage["trials"])
        memory = allocation.memory_mb
        own = max(pool.pop(memory, 0), left)
        pool = {**_room(catalog, pool, memory, own), memory: own}
    return pool


def _room(catalog: Catalog, idle: Mapping[int, int], memory: int, count: int) -> dict[int, int]:
    """``idle`` (memory MB -> instances, least recently used first) less those a bounded
    platform stops, the least recently used first, so that ``count`` functions of ``memory``
    fit beside the rest within its vCPUs, memory and concurrency."""

    def fits(pool: Mapping[int, int]) -> bool:
        return fits_capacity(catalog, [*((m, c) for m, c in pool.items()), (memory, count)])

    kept = {m: c for m, c in idle.items() if c > 0}
    for size in list(kept):
        while kept[size] > 0 and not fits(kept):
            kept[size] -= 1
        if kept[size] == 0:
            del kept[size]
    return kept


def moved(before: tuple[float, float], after: tuple[float, float], delta: float) -> bool:
    """True when time or cost changed by more than ``delta`` relative to ``before``."""
    return any(abs(a - b) > delta * max(abs(b), 1e-12) for b, a in zip(before, after, strict=True))


def keep_warm(
    workload: Workload,
    catalog: Catalog,
    stages: list[dict[str, Any]],
    constraint: Constraint,
    warm: Mapping[int, int] | None = None,
    start: int = 0,
) -> list[dict[str, Any]]:
    """Stages ``start``… moved, one at a time in order, onto the allocation of the stage before
    where ``stage_estimates`` (which knows the functions each stage leaves warm) says the rest
    is then no worse for the constraint's goal and still within it. The planner prices every
    stage's start on its own (stages are independent in its knapsack); a stage on the size the
    one before left warm pays no cold start, which only this pass sees."""
    best = [dict(s) for s in stages]

    def totals(plan: list[dict[str, Any]]) -> tuple[float, float]:
        estimates = stage_estimates(workload, catalog, plan, warm)[start:]
        return sum(t for t, _ in estimates), sum(c for _, c in estimates)

    def key(value: tuple[float, float]) -> tuple[float, float]:
        return value if constraint.goal is Objective.MIN_TIME else (value[1], value[0])

    current = totals(best)
    for index in range(max(start, 1), len(best)):
        before = best[index - 1]["allocation"]
        if best[index]["allocation"] == before:
            continue
        table = evaluate_allocation(workload, catalog, Allocation(**before))
        if len(table) == 0:
            continue
        moved_stage = {
            **best[index],
            "allocation": dict(before),
            "epoch_time_s": float(table.time_s[0]),
            "epoch_cost_usd": float(table.cost_usd[0]),
        }
        candidate = [*best[:index], moved_stage, *best[index + 1 :]]
        value = totals(candidate)
        if constraint.admits(*value) and key(value) <= key(current):
            best, current = candidate, value
    return best
