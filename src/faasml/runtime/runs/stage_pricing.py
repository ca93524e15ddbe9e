"""What each planned stage of a run takes and costs on the run's platform (pure): CE-scaling
eqs. 7–8 with waves of trials, the cold starts a stage pays or finds warm (the functions the
stages before left, those the runtime prewarms during the stage before), and the contention of
functions sharing a bounded machine. The tuning and training runs predict and re-predict their
stages with it; ``keep_warm`` moves a stage onto the size the one before left warm where that
is no worse."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from faasml.catalog import Catalog
from faasml.models.space import evaluate_allocation
from faasml.models.stages import NO_EARLY_START, EarlyStart, StageContext, stage_totals
from faasml.planners.tuning import trials_per_wave
from faasml.runtime.coordinator.estimates import fits_capacity
from faasml.runtime.record.records import StageRecord
from faasml.types import Allocation, Constraint, Objective
from faasml.workload import Workload


class PlannedStage(Protocol):
    """A stage as priced here: its allocation, trials and epochs (a ``StageRecord``)."""

    @property
    def allocation(self) -> Allocation: ...

    @property
    def trials(self) -> int: ...

    @property
    def epochs(self) -> int: ...


def stage_estimate(
    workload: Workload,
    catalog: Catalog,
    allocation: Allocation,
    trials: int,
    epochs: int,
    warm: int = 0,
    prewarm: EarlyStart = NO_EARLY_START,
    factors: Sequence[float] | None = None,
    rereads: bool = False,
) -> tuple[float, float]:
    """T_i and C_i of one stage on ``allocation`` (CE-scaling eqs. 7–8 with waves); ``warm``
    functions of its memory size are left warm by the stage before, and when they cover the
    stage's first wave it pays no cold start (a platform reuses a warm function). ``prewarm``:
    functions started during the stage before (``prewarmed``); where they complete the first
    wave their start is still billed, at the contention it ran at beside that stage, but only
    the part not hidden is waited for, and the partition's read that follows the start always
    is. On a bounded platform each wave runs ``contention`` times slower where its functions
    together demand more vCPUs than the machine delivers (a public FaaS has no such bound:
    factor 1). ``factors``: each trial's computation over the workload's (in the order they
    start; all 1 where not given). A trial holds its functions for the whole stage (its
    segments span the stage's epochs wherever they are short against a segment's fixed
    costs) and the next trial takes the first functions freed (``models.stages``): a stage of a
    slow and a fast trial lasts as long as the slow one; equal trials run in waves.
    ``rereads``: warm functions of the first wave hold another function count's partition,
    so where warm functions keep their partition they read this one first, as a started
    function does."""
    table = evaluate_allocation(workload, catalog, allocation)
    if len(table) == 0:
        return float("inf"), float("inf")
    context = StageContext(
        warm=np.array([warm], dtype=np.int64),
        early=prewarm,
        factors=tuple(factors or ()),
        rereads=rereads,
        platform=catalog.platform,
    )
    totals = stage_totals(table, trials_per_wave(table, catalog), trials, epochs, context)
    return float(totals.time_s[0]), float(totals.cost_usd[0])


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
    stages: Sequence[PlannedStage],
    warm: Mapping[int, int] | None = None,
    beside: bool = True,
    factors: Mapping[int, Sequence[float]] | None = None,
    write_mbps: float | None = None,
) -> list[tuple[float, float]]:
    """T_i and C_i of each planned stage (dicts with allocation, trials, epochs) in turn, each
    starting on the functions the stages before left warm (``warm``: memory MB -> functions
    warm before the first, e.g. the probe's). A stage whose last wave the next stage's
    functions start beside is slowed by them (``overlap_delay``), and their start by it;
    ``beside`` False leaves both out (stages priced apart, as the planners price them).
    ``factors``: stage index -> its trials' ``stage_estimate`` factors, where known; a later
    stage whose trials are not known yet is priced as survivors drawn from the last stage
    before it whose factors are (``survivors_estimate``), not as trials of the mean cost.
    The first stage on each function count waits for its partitions to be written
    (``partition_write_s``, at ``write_mbps`` where a run measured it), and warm functions
    that an earlier stage left holding another count's partitions read theirs first
    (``stage_estimate``'s ``rereads``; functions warm before the first stage, the probe's,
    are priced as the planners price them, without that read: D/n, milliseconds on the
    local platform)."""
    pool = dict(warm or {})
    held: dict[int, int] = {}  # memory MB -> the function count whose partitions they hold
    out: list[tuple[float, float]] = []
    for index, stage in enumerate(stages):
        allocation = stage.allocation
        trials, epochs = stage.trials, stage.epochs
        ready = pool.get(allocation.memory_mb, 0)
        written = allocation.n in {s.allocation.n for s in stages[:index]}
        rereads = held.get(allocation.memory_mb, allocation.n) != allocation.n
        early = NO_EARLY_START
        if index > 0:
            before = stages[index - 1]
            early = prewarmed(workload, catalog, before, stage, pool)
            if not beside:
                early = early._replace(contention=None)
            delay_s, delay_usd = overlap_delay(workload, catalog, before, stage, early)
            out[-1] = (out[-1][0] + delay_s, out[-1][1] + delay_usd)
            early = early._replace(hidden_s=early.hidden_s + delay_s)  # a longer wave hides more
        relative = (factors or {}).get(index)
        kept_from = survivor_pool(factors or {}, index) if relative is None else ()
        if len(kept_from) > trials:  # its trials are survivors not known yet
            time_s, cost_usd = survivors_estimate(
                workload, catalog, stage, (ready, early, rereads), kept_from
            )
        else:
            time_s, cost_usd = stage_estimate(
                workload, catalog, allocation, trials, epochs, ready, early, relative, rereads
            )
        if not written:  # the coordinator writes this count's partitions before it starts
            time_s += partition_write_s(workload, catalog, allocation.n, write_mbps)
        out.append((time_s, cost_usd))
        pool = warm_pool(workload, catalog, [stage], pool)
        held[allocation.memory_mb] = allocation.n
    return out


SURVIVOR_DRAWS = 24
"""Sets of survivors a stage is priced over at most (all of them where there are fewer)."""


def survivor_pool(factors: Mapping[int, Sequence[float]], index: int) -> tuple[float, ...]:
    """The factors of the last stage before ``index`` whose trials' factors are known (its
    survivors are some of those trials); none where no stage before has them."""
    known = [i for i in factors if i < index]
    return tuple(factors[max(known)]) if known else ()


def survivors_estimate(
    workload: Workload,
    catalog: Catalog,
    stage: PlannedStage,
    found: tuple[int, EarlyStart, bool],
    pool: Sequence[float],
) -> tuple[float, float]:
    """T_i and C_i of a stage whose trials are survivors of ``pool`` (the factors of the
    trials they are kept from), not known yet: the mean over sets of them drawn evenly
    (``stage_estimate`` with each set's factors; ``found``: its warm functions, early
    starts and rereads). Its cost is about the mean trial's, but its time is not: a wave
    lasts as long as its slowest trial, so pricing survivors at the mean is short."""
    trials, chosen = stage.trials, range(len(pool))
    count = math.comb(len(pool), trials)
    if count <= SURVIVOR_DRAWS:
        draws = [list(c) for c in itertools.combinations(chosen, trials)]
    else:  # seeded: the same plan prices the same
        rng = np.random.default_rng(0)
        draws = [list(rng.choice(len(pool), trials, replace=False)) for _ in range(SURVIVOR_DRAWS)]
    warm, early, rereads = found
    results = []
    for draw in draws:
        relative = [pool[i] for i in draw]
        results.append(
            stage_estimate(
                workload,
                catalog,
                stage.allocation,
                trials,
                stage.epochs,
                warm,
                early,
                relative,
                rereads,
            )
        )
    return (
        float(np.mean([t for t, _ in results])),
        float(np.mean([c for _, c in results])),
    )


def partition_write_s(
    workload: Workload, catalog: Catalog, n: int, write_mbps: float | None = None
) -> float:
    """Seconds the coordinator takes to write the training set's ``n`` partitions to the data
    store, before the first segment on ``n`` functions (``Partitions``): D / b + n·ℓ,
    with b the rate a run measured (``write_mbps``), else the store's connection bandwidth.
    No function runs then: time, not bill."""
    store = catalog.storage(catalog.platform.data_store)
    rate = write_mbps if write_mbps and write_mbps > 0 else store.connection_mbps
    return workload.dataset_mb / rate + n * store.latency_s


def _last_wave(workload: Workload, catalog: Catalog, stage: PlannedStage) -> int:
    """Trials in ``stage``'s last wave (0 where its allocation cannot run)."""
    table = evaluate_allocation(workload, catalog, stage.allocation)
    if len(table) == 0:
        return 0
    k = int(trials_per_wave(table, catalog)[0])
    trials = stage.trials
    return trials - (math.ceil(trials / k) - 1) * k


def prewarmed(
    workload: Workload,
    catalog: Catalog,
    stage: PlannedStage,
    following: PlannedStage,
    pool: Mapping[int, int],
) -> EarlyStart:
    """What the runtime's prewarm (``Coordinator.run(..., then=Prewarm(...))``, the rule of
    ``Launcher.prewarm_next``) gives ``following``: the functions started during
    ``stage``'s last wave, the seconds of their start hidden behind it, and the contention
    they start at beside it. They are the functions its first wave needs beyond those warm
    after ``stage`` (``pool``), and only where all of them fit beside the last wave's
    functions within the platform's capacity (else none is counted: the runtime may still
    start some as that wave's trials finish, which no prediction promises). Their start
    overlaps the last wave's epochs: hidden up to the wave's length (the runtime starts them
    at most PREWARM_LEAD × a start before the stage's predicted end, so a longer wave hides
    all of it)."""
    before, after = stage.allocation, following.allocation
    need = warm_after(catalog, workload, after, following.trials)
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
    return EarlyStart(extra, stage.epochs * epoch_s * slower, beside)


def overlap_delay(
    workload: Workload,
    catalog: Catalog,
    stage: PlannedStage,
    following: PlannedStage,
    early: EarlyStart,
) -> tuple[float, float]:
    """Seconds and dollars ``stage`` gains from ``following``'s functions starting beside its
    last wave (``early``). While both run the wave runs at r = c_wave / c_both of its speed
    (each the platform's contention at their vCPU demand), so an overlap of o seconds delays
    it by o·(1 − r), billed to the wave's functions; the overlap lasts the start (at c_both)
    or the wave, which the delay itself lengthens: o = min(start·c_both, L / r) for a wave of
    L seconds. 0 where the machine delivers what both demand."""
    if early.functions == 0 or early.contention is None:
        return 0.0, 0.0
    before = stage.allocation
    last = _last_wave(workload, catalog, stage)
    alone = catalog.platform.contention(wave_demand(catalog, before, last))
    if early.contention <= alone:
        return 0.0, 0.0
    after = following.allocation
    started = float(catalog.platform.cold_start_time(after.memory_mb)) * early.contention
    ratio = alone / early.contention
    overlap = min(started, early.hidden_s / ratio)
    delay = overlap * (1.0 - ratio)
    table = evaluate_allocation(workload, catalog, before)
    per_second = float(table.function_usd[0]) / float(table.time_s[0])  # one trial's functions
    return delay, last * per_second * delay


def warm_pool(
    workload: Workload,
    catalog: Catalog,
    stages: Sequence[PlannedStage],
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
        allocation = stage.allocation
        left = warm_after(catalog, workload, allocation, stage.trials)
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


def keep_warm(
    workload: Workload,
    catalog: Catalog,
    stages: Sequence[StageRecord],
    constraint: Constraint,
    warm: Mapping[int, int] | None = None,
    start: int = 0,
) -> list[StageRecord]:
    """Stages ``start``… moved onto the allocation of the stage before where
    ``stage_estimates`` (which knows the functions each stage leaves warm) says the rest is
    then no worse for the constraint's goal and still within it. The planner prices every
    stage's start on its own (stages are independent in its knapsack); a stage on the size the
    one before left warm pays no cold start, which only this pass sees. Each stage in order is
    tried with every run of the stages after it moved along (moving one stage alone would make
    the next pay the cold start it saved). The stages given are not changed (a moved one is a
    new record)."""
    best = list(stages)

    def totals(plan: list[StageRecord]) -> tuple[float, float]:
        estimates = stage_estimates(workload, catalog, plan, warm)[start:]
        return sum(t for t, _ in estimates), sum(c for _, c in estimates)

    def key(value: tuple[float, float]) -> tuple[float, float]:
        return value if constraint.goal is Objective.MIN_TIME else (value[1], value[0])

    current = totals(best)
    for index in range(max(start, 1), len(best)):
        before = best[index - 1].allocation
        if best[index].allocation == before:
            continue
        table = evaluate_allocation(workload, catalog, before)
        if len(table) == 0:
            continue
        figures = (float(table.time_s[0]), float(table.cost_usd[0]))
        for end in range(index + 1, len(best) + 1):
            moved = [_onto(stage, before, figures) for stage in best[index:end]]
            candidate = [*best[:index], *moved, *best[end:]]
            value = totals(candidate)
            if constraint.admits(*value) and key(value) <= key(current):
                best, current = candidate, value
    return best


def _onto(stage: StageRecord, allocation: Allocation, figures: tuple[float, float]) -> StageRecord:
    """``stage`` on ``allocation`` (whose epoch takes and costs ``figures``)."""
    if stage.allocation == allocation:
        return stage
    return dataclasses.replace(
        stage,
        # The planner's allocation, whose figures time_s and cost_usd still are.
        planned_allocation=stage.planned_allocation or stage.allocation,
        allocation=allocation,
        epoch_time_s=figures[0],
        epoch_cost_usd=figures[1],
    )
