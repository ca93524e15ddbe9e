"""The tuning problem as a multiple-choice knapsack: one option per stage (CE-scaling eqs. 6–12).

Stage i with q_i trials of r_i epochs on allocation θ (time t'(θ), cost c'(θ) per epoch, cold
start s, cold-start cost u(θ) of its n functions; k(θ) = ⌊max_concurrent(m) / n⌋ trials fit
the platform at once):

    waves  w_i(θ) = ⌈q_i / k(θ)⌉
    time   T_i(θ) = s(θ) + w_i(θ) · r_i · t'(θ)                 (eq. 7, with concurrency waves)
    cost   C_i(θ) = q_i · r_i · c'(θ) + min(q_i, k(θ)) · u(θ)   (eq. 8 / eq. 11)

s(θ) is the platform's cold start at θ's memory (platform.cold_start_time). The first wave
starts min(q_i, k) · n functions cold; later waves reuse those warm instances (a FaaS platform
keeps a finished function warm for the next invocation of the same size), so a stage pays the
cold start once. A plan's time is
Σ T_i and its cost Σ C_i.

On a bounded, shared platform (the local machine) a wave of j trials, whose functions demand
j · n · vCPUs(m) together, runs κ_j = max(1, demand / vCPUs delivered) times slower
(``FunctionPlatform.contention``, the delivered vCPUs an input the job probe measured): its
epochs and its cold start take κ_j times as long and its functions bill κ_j times as much
(requests and storage do not), so with the last wave's ℓ = q_i − (w_i − 1)·k trials

    T_i(θ) = κ_f · s(θ) + r_i · t'(θ) · ((w_i − 1) · κ_k + κ_ℓ)
    C_i(θ) = r_i · (c'_f(θ) · ((w_i − 1) · k · κ_k + ℓ · κ_ℓ) + q_i · c'_r(θ)) + f · κ_f · u(θ)

with f = min(q_i, k) trials in the first wave, c'_f the functions' part of c' and c'_r the
rest. On a public FaaS every κ is 1 and these are eqs. 7–8.

Functions left warm before the first stage (``warm``: memory MB -> instances, e.g. those the
job's probe or the stages already run left idle) serve the first stage's first wave without a
cold start where they are enough for it (f · n of θ's memory): its s(θ) and u(θ) are then 0.

These equations are ``faasml.models.stages`` (the one stage model the run and the simulator
price with too); ``TuningProblem.stage_totals`` calls it with the planner's context.

Each stage's options are the Pareto front of (T_i, C_i); the candidates come from the
allocation space Θ pruned in a way that keeps every stage's and every static plan's optimum
(``tuning_candidates``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faasml.catalog import Catalog, FunctionPlatform
from faasml.models.space import AllocationTable
from faasml.models.stages import StageContext
from faasml.models.stages import stage_totals as stage_model
from faasml.planners.pareto import pareto_indices
from faasml.planners.tuning._job import TuningJob
from faasml.types import Constraint

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]


def trials_per_wave(table: AllocationTable, catalog: Catalog) -> IntArray:
    """k(θ) = ⌊max_concurrent(m) / n⌋: trials of n functions the platform runs at once."""
    limit = catalog.platform.max_concurrent(table.memory_mb)
    return np.maximum(1, limit // np.maximum(table.n, 1)).astype(np.int64)


def trial_vcpus(table: AllocationTable, catalog: Catalog) -> Array:
    """n · vCPUs(m): what one trial of each row demands of the machine while it runs."""
    result: Array = table.n * catalog.platform.vcpus(table.memory_mb)
    return result


def warm_functions(table: AllocationTable, warm: Mapping[int, int] | None) -> IntArray:
    """Functions of each row's memory size warm before the first stage (0 without ``warm``)."""
    counts = np.zeros(len(table), dtype=np.int64)
    for memory, functions in (warm or {}).items():
        counts[table.memory_mb == int(memory)] = int(functions)
    return counts


def tuning_candidates(
    table: AllocationTable,
    catalog: Catalog,
    job: TuningJob,
    warm: Mapping[int, int] | None = None,
) -> AllocationTable:
    """The rows of Θ that can be optimal for some stage of ``job`` or for a static plan.

    Rows with the same k(θ) have the same waves w_i in every stage, so within such a group
    stage i's T_i grows with s + w_i·r_i·t' and its C_i with (q_i·r_i / min(q_i, k))·c' + u; a
    static plan's time grows with s + (Σ w_i·r_i / d)·t' and its cost with
    (Σ q_i·r_i / Σ min(q_i, k))·c' + u. A row dominated inside its group in every one of those
    (time, cost) pairs is dominated in every stage and every static plan, so dropping it is exact.
    """
    if len(table) == 0:
        return table
    k = trials_per_wave(table, catalog)
    q = np.asarray(job.trial_counts, dtype=float)
    r = np.asarray(job.epochs, dtype=float)
    # A row whose first wave of some stage is slowed by contention does not follow the forms
    # above (its slowdown is its own): such rows are all kept, the others pruned as before.
    keep = np.zeros(len(table), dtype=bool)
    demand = trial_vcpus(table, catalog)
    for trials in job.trial_counts:
        keep |= catalog.platform.contentions(np.minimum(trials, k) * demand) > 1.0
    keep |= warm_functions(table, warm) > 0  # the first stage's start differs: kept too
    free = np.flatnonzero(~keep)
    order = free[np.argsort(k[free], kind="stable")]
    bounds = np.flatnonzero(np.diff(k[order])) + 1
    epoch_time, epoch_cost = table.time_s, table.cost_usd
    for group in np.split(order, bounds):
        if len(group) == 0:
            continue
        waves = np.ceil(q / k[group[0]])
        cold = np.minimum(q, k[group[0]])
        pairs = {
            (float(w * ri), float(qi * ri / c))
            for w, ri, qi, c in zip(waves, r, q, cold, strict=True)
        }
        pairs.add((float((waves * r).sum() / len(r)), float((q * r).sum() / cold.sum())))
        for rho_time, rho_cost in pairs:
            time = table.startup_s[group] + rho_time * epoch_time[group]
            cost = rho_cost * epoch_cost[group] + table.startup_usd[group]
            keep[group[pareto_indices(time, cost)]] = True
    return table.take(np.flatnonzero(keep))


@dataclass(frozen=True)
class StageOptions:
    """The Pareto-optimal options of one stage, cheapest first (so slowest first)."""

    trials: int
    epochs: int
    rows: IntArray
    """Rows of the problem's candidate table."""
    time_s: Array
    """T_i(θ) of each option."""
    cost_usd: Array
    """C_i(θ) of each option."""
    waves: IntArray

    def __len__(self) -> int:
        return int(self.rows.shape[0])


@dataclass(frozen=True)
class TuningProblem:
    """Everything a tuning planner needs; planners are pure functions of it."""

    constraint: Constraint
    table: AllocationTable
    """Candidate allocations with their per-epoch estimates."""
    trials_per_wave: IntArray
    """k(θ) of each candidate row."""
    stages: tuple[StageOptions, ...]
    pool_plans: tuple[tuple[int, ...], ...] = ()
    """Plans of the cluster-style baseline (one candidate row per stage), when evaluated."""
    platform: FunctionPlatform | None = None
    """The platform whose ``contention`` slows crowded waves (None: no contention)."""
    trial_vcpus: Array | None = None
    """n · vCPUs(m) of each candidate row (with ``platform``)."""
    warm: IntArray | None = None
    """Functions of each candidate row's memory warm before the first stage."""

    @property
    def trial_counts(self) -> tuple[int, ...]:
        return tuple(stage.trials for stage in self.stages)

    @property
    def epochs(self) -> tuple[int, ...]:
        return tuple(stage.epochs for stage in self.stages)

    def stage_totals(self, stage: int, rows: IntArray) -> tuple[Array, Array, IntArray]:
        """T_i, C_i and waves of stage ``stage`` on candidate ``rows`` (any rows, not only its
        Pareto options)."""
        warm = self.warm[rows] if stage == 0 and self.warm is not None else None
        context = StageContext(warm=warm, platform=self.platform)
        totals = stage_model(
            self.table.take(rows),
            self.trials_per_wave[rows],
            self.stages[stage].trials,
            self.stages[stage].epochs,
            context,
        )
        return totals.time_s, totals.cost_usd, totals.waves

    def static_totals(self) -> tuple[Array, Array]:
        """Time and cost of the static plan on every candidate row (one θ for all stages)."""
        rows = np.arange(len(self.table))
        time = np.zeros(len(self.table))
        cost = np.zeros(len(self.table))
        for stage in range(len(self.stages)):
            t, c, _ = self.stage_totals(stage, rows)
            time += t
            cost += c
        return time, cost

    def totals(self, choice: tuple[int, ...]) -> tuple[float, float]:
        """Σ T_i and Σ C_i of a choice of one option index per stage."""
        time = sum(float(s.time_s[j]) for s, j in zip(self.stages, choice, strict=True))
        cost = sum(float(s.cost_usd[j]) for s, j in zip(self.stages, choice, strict=True))
        return time, cost


def build_problem(
    table: AllocationTable,
    catalog: Catalog,
    job: TuningJob,
    constraint: Constraint,
    *,
    pools: tuple[AllocationTable, tuple[tuple[int, ...], ...]] | None = None,
    warm: Mapping[int, int] | None = None,
) -> TuningProblem:
    """The stage options of ``job`` over the candidate table (see ``tuning_candidates``);
    ``pools`` adds the allocations and plans of the ``fixed-pool`` baseline; ``warm`` the
    functions warm before the first stage (memory MB -> instances)."""
    candidates = tuning_candidates(table, catalog, job, warm)
    plans: tuple[tuple[int, ...], ...] = ()
    if pools is not None and len(pools[0]):
        offset = len(candidates)
        candidates = AllocationTable.concatenate([candidates, pools[0]], candidates.options)
        plans = tuple(tuple(offset + row for row in plan) for plan in pools[1])
    k = trials_per_wave(candidates, catalog)
    demand = trial_vcpus(candidates, catalog)
    ready = warm_functions(candidates, warm) if warm else None
    shell = TuningProblem(
        constraint=constraint,
        table=candidates,
        trials_per_wave=k,
        platform=catalog.platform,
        trial_vcpus=demand,
        warm=ready,
        stages=tuple(
            StageOptions(
                q, r, np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0, np.int64)
            )
            for q, r in zip(job.trial_counts, job.epochs, strict=True)
        ),
    )
    rows = np.arange(len(candidates), dtype=np.int64)
    stages = []
    for index, (q, r) in enumerate(zip(job.trial_counts, job.epochs, strict=True)):
        time, cost, waves = shell.stage_totals(index, rows)
        front = pareto_indices(cost, time)  # cheapest first
        stages.append(StageOptions(q, r, rows[front], time[front], cost[front], waves[front]))
    return TuningProblem(
        constraint=constraint,
        table=candidates,
        trials_per_wave=k,
        stages=tuple(stages),
        pool_plans=plans,
        platform=catalog.platform,
        trial_vcpus=demand,
        warm=ready,
    )
