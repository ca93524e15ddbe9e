"""What a tuning stage takes and costs: the one stage model that the tuning planner optimises,
the run predicts and re-predicts with, and the simulator replays (CE-scaling eqs. 7–8).

A stage of q trials × r epochs on allocation θ (per-epoch time t'(θ), cost c'(θ); cold start
s(θ) with its cost u(θ) for the n functions of one trial; k(θ) trials fit at once) runs in
w = ⌈q / k⌉ waves; its first wave of f = min(q, k) trials pays the cold start, later waves
reuse the functions it leaves warm:

    T = s + w · r · t'          C = q · r · c' + f · u              (eqs. 7–8)

The stage's ``StageContext`` adds what a run around it knows (all "none" by default, which
gives eqs. 7–8 as they are): functions already warm (the first wave pays no start where they
are enough), functions started early during the stage before (their start billed, but hidden
behind that stage's last wave), warm functions that must read this stage's partition first,
each trial's computation relative to the workload's (the trials then run in turn on the
first slots to free, not in equal waves), and the contention of a bounded machine: a wave of
j trials demanding j · n · vCPUs(m) runs κ_j times slower and bills its functions κ_j times
as much (``FunctionPlatform.contentions``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from faasml.catalog import FunctionPlatform
from faasml.models.cost import startup_cost
from faasml.models.space import AllocationTable

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]


class EarlyStart(NamedTuple):
    """Functions of a stage started during the last wave of the stage before (a prewarm)."""

    functions: int
    hidden_s: float
    """Seconds of their start that the wave before can hide (its length)."""
    contention: float | None = None
    """How much slower the starts run beside that wave; None: as the stage's first wave."""


NO_EARLY_START = EarlyStart(0, 0.0)


@dataclass(frozen=True)
class StageContext:
    """What a stage finds around it; the defaults mean none of it (plain eqs. 7–8)."""

    warm: IntArray | None = None
    """Functions of each row's memory warm when the stage starts (None: none)."""
    early: EarlyStart = NO_EARLY_START
    factors: tuple[float, ...] = ()
    """Each trial's computation over the workload's, in the order they start (1 where absent)."""
    rereads: bool = False
    """Warm functions of the first wave hold another partition and read this one first."""
    platform: FunctionPlatform | None = None
    """The platform whose contention slows crowded waves (None: no contention)."""


EMPTY_CONTEXT = StageContext()


@dataclass(frozen=True)
class StageTotals:
    """Time, cost and waves of one stage on each candidate row."""

    time_s: Array
    cost_usd: Array
    waves: IntArray


def stage_totals(
    table: AllocationTable,
    per_wave: IntArray,
    trials: int,
    epochs: int,
    context: StageContext = EMPTY_CONTEXT,
) -> StageTotals:
    """T and C of a stage of ``trials`` × ``epochs`` on every row of ``table`` whose k(θ) is
    ``per_wave`` (arrays of the context are aligned with the rows)."""
    q, r, k = trials, epochs, per_wave
    waves = -(-q // k)
    first = np.minimum(q, k)
    slow_first = np.ones(first.shape)  # κ_f, which is κ_k when w > 1
    demand = np.zeros(first.shape)
    if context.platform is not None:
        demand = table.n * context.platform.vcpus(table.memory_mb)
        slow_first = context.platform.contentions(first * demand)
    start_s, start_usd = _start(table, first, slow_first, context)
    factors = np.asarray(context.factors[:q], dtype=float)
    if (factors != 1.0).any():
        time, cost = _uneven(table, k, q, r, factors, demand, context.platform)
        return StageTotals(start_s + time, start_usd + cost, waves.astype(np.int64))
    if not (slow_first > 1.0).any():  # eqs. 7-8 as they are (κ_ℓ <= κ_f)
        time = start_s + waves * r * table.time_s
        cost = q * r * table.cost_usd + start_usd
        return StageTotals(time, cost, waves.astype(np.int64))
    assert context.platform is not None
    last = q - (waves - 1) * k
    slow_last = context.platform.contentions(last * demand)
    time = start_s + r * table.time_s * ((waves - 1) * slow_first + slow_last)
    rest = table.invocation_usd + table.storage_usd
    function_usd = table.function_usd * ((waves - 1) * k * slow_first + last * slow_last)
    cost = r * (function_usd + q * rest) + start_usd
    return StageTotals(time, cost, waves.astype(np.int64))


def _start(
    table: AllocationTable, first: IntArray, slow: Array, context: StageContext
) -> tuple[Array, Array]:
    """Seconds and dollars the first wave's start adds: a cold start where the warm and early
    started functions do not cover it; where early ones complete it, their start (billed at
    the contention beside the stage before) less what that stage hides, then the partition's
    read; where warm ones cover it, nothing, or the read alone with ``rereads``."""
    need = first * table.n
    warm = np.zeros(need.shape, dtype=np.int64) if context.warm is None else context.warm
    early = context.early
    cold = need > warm + early.functions
    time = table.startup_s * cold
    cost = first * slow * (table.startup_usd * cold)
    started = ~cold & (need > warm)  # early started functions complete the first wave
    reread = ~cold & ~started & context.rereads
    if not (started | reread).any():
        return slow * time, cost
    platform = context.platform
    assert platform is not None, "early starts and rereads are priced on a platform"
    launch_s = platform.cold_start_time(table.memory_mb)
    launch_usd = startup_cost(platform, table.n, table.memory_mb)
    # Only the platform's start is hidden: the partition is read by the first invocation.
    read_s, read_usd = table.startup_s - launch_s, table.startup_usd - launch_usd
    beside = slow if early.contention is None else np.full(slow.shape, early.contention)
    early_s = np.maximum(0.0, launch_s * beside - early.hidden_s) + read_s * slow
    early_usd = first * (launch_usd * beside + read_usd * slow)
    time = np.where(started, early_s, np.where(reread, read_s * slow, slow * time))
    cost = np.where(started, early_usd, np.where(reread, first * read_usd * slow, cost))
    return time, cost


def _uneven(
    table: AllocationTable,
    per_wave: IntArray,
    trials: int,
    epochs: int,
    factors: Array,
    demand: Array,
    platform: FunctionPlatform | None,
) -> tuple[Array, Array]:
    """Epoch time and cost of trials of unequal computation (``factors``): each holds its
    functions for the whole stage, the next takes the first slots to free (list scheduling,
    as the coordinator launches a stage's trials in order), and trial j is slowed as the
    wave ⌊j / k⌋ it starts in."""
    relative = np.ones(trials)
    relative[: len(factors)] = factors
    slower = np.ones((len(per_wave), trials))
    if platform is not None:
        slower = trial_contentions(platform, demand, per_wave, trials)
    epoch_s, compute_s = table.time_s[:, None], table.compute_s[:, None]
    lengths = epochs * (epoch_s + (relative[None, :] - 1.0) * compute_s) * slower
    slots = int(min(trials, int(per_wave.max()))) if len(per_wave) else 1
    free = np.where(np.arange(slots)[None, :] < per_wave[:, None], 0.0, np.inf)
    rows = np.arange(len(per_wave))
    for trial in range(trials):
        slot = np.argmin(free, axis=1)
        free[rows, slot] += lengths[:, trial]
    makespan = np.where(np.isfinite(free), free, 0.0).max(axis=1)
    per_s = np.divide(
        table.function_usd, table.time_s, out=np.zeros(len(table)), where=table.time_s > 0
    )
    rest = table.invocation_usd + table.storage_usd
    cost = lengths.sum(axis=1) * per_s + trials * epochs * rest
    return makespan, cost


def trial_contentions(
    platform: FunctionPlatform, demand: Array, per_wave: IntArray, trials: int
) -> Array:
    """κ of each trial (rows × trials): that of the wave ⌊j / k⌋ trial j starts in, whose
    trials together demand their number × ``demand`` (n · vCPUs(m) of each row) vCPUs."""
    k = per_wave[:, None]
    size = np.minimum(k, trials - (np.arange(trials)[None, :] // k) * k)
    result: Array = platform.contentions(size * demand[:, None])
    return result
