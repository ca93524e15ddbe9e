"""The candidates of a deployment search and its goal: what the analytical model says.

``DeploymentSpace`` is the candidate set (functions × memory × storage and scheme) with the
model's per-epoch estimates (CE-scaling eqs. 1–5, ``models.space.evaluate``): the prior mean
where a profile exists, the feasibility rules always, and the price of probing each candidate.
``DeploymentGoal`` turns a time and cost per epoch into the scalar a searcher minimises (SMLT
eq. 1 and its dual). ``faasml.search.deployment`` drives a searcher over them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.space import AllocationTable, Exclusions, evaluate
from faasml.search._base import Array
from faasml.search._gp import LatentObjective
from faasml.types import Allocation, Constraint, Objective
from faasml.workload import Workload

PENALTY = 10.0
"""Slope of the score past the constraint, per unit of log overshoot: steep enough that a
candidate over the limit never beats one within it by more than a sliver."""
COUNT_LEVELS = 64
"""Function counts searched: about this many, spaced geometrically from 1 to the most."""
MEMORY_STEP_MB = 128
"""Memory grid of the search (SMLT §3.2 searches 128 MB steps)."""


@dataclass(frozen=True)
class DeploymentGoal:
    """Minimise time per epoch within a budget, or cost per epoch within a deadline (SMLT
    eq. 1 and its dual), over ``epochs`` epochs. The score is log(primary) plus ``PENALTY`` ×
    the log overshoot of the other quantity past its limit: smooth for the GP, and equal to
    log(primary) for every candidate that keeps the constraint."""

    objective: Objective
    epochs: float
    limit: float | None = None
    """The budget (USD, MIN_TIME) or deadline (s, MIN_COST) for ``epochs`` epochs."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epochs) and self.epochs > 0):
            raise ConfigError(f"the value of epochs is {self.epochs}, but must be positive")

    @staticmethod
    def from_constraint(constraint: Constraint, epochs: float) -> DeploymentGoal:
        goal = constraint.goal
        limit = constraint.budget_usd if goal is Objective.MIN_TIME else constraint.deadline_s
        return DeploymentGoal(goal, epochs, limit)

    def score(self, time_s: Array | float, cost_usd: Array | float) -> Array:
        time = np.maximum(np.asarray(time_s, dtype=float), 1e-12)
        cost = np.maximum(np.asarray(cost_usd, dtype=float), 1e-15)
        primary, secondary = (time, cost) if self.objective is Objective.MIN_TIME else (cost, time)
        value: Array = np.log(primary)
        if self.limit is not None:
            over = np.log(self.epochs * secondary / self.limit)
            value = value + PENALTY * np.maximum(over, 0.0)
        return value

    def latent(self, cost_per_s: Array) -> LatentObjective:
        """The goal on log time per epoch g, with each candidate's dollars per second of
        epoch: least time → objective g, kept iff g <= log(budget / (epochs · $/s)); least
        cost → objective g + log($/s), kept iff g <= log(deadline / epochs)."""
        rate = np.maximum(np.asarray(cost_per_s, dtype=float), 1e-300)
        inf = np.full(rate.shape, np.inf)
        if self.objective is Objective.MIN_TIME:
            offset = np.zeros(rate.shape)
            limit = inf if self.limit is None else np.log(self.limit / (self.epochs * rate))
        else:
            offset = np.log(rate)
            limit = (
                inf
                if self.limit is None
                else np.full(rate.shape, math.log(self.limit / self.epochs))
            )
        return LatentObjective(offset, limit)

    def keeps(self, time_s: float, cost_usd: float) -> bool:
        """True when ``epochs`` epochs at this time and cost keep the constraint."""
        if self.limit is None:
            return True
        other = cost_usd if self.objective is Objective.MIN_TIME else time_s
        return self.epochs * other <= self.limit * (1 + 1e-9)


def cpu_bound_sizes(
    memories: NDArray[np.int64], workload: Workload, catalog: Catalog
) -> NDArray[np.int64]:
    """``memories`` without the sizes above the first that buys the platform's largest CPU
    share (``max_vcpus``: on the local platform, the machine's cores): such a function runs
    no faster and bills more — dominated, a probe of it is money spent on noise. Kept all where
    the job needs more memory than that size (one function's footprint)."""
    platform = catalog.platform
    full = memories[platform.vcpus(memories) >= platform.max_vcpus - 1e-9]
    if full.size == 0 or float(workload.memory_needed_mb(1)) > float(full[0]):
        return memories
    return memories[memories <= full[0]]


@dataclass(frozen=True)
class DeploymentSpace:
    """The candidates (n on a geometric grid, memory in ``MEMORY_STEP_MB`` steps, every
    storage and scheme of the catalog) with the model's estimates and the searcher's features:
    log n and log m scaled by the catalog's bounds (the same for every phase of a job, so a
    posterior carries over), plus one indicator per storage option where there are several."""

    table: AllocationTable
    features: Array
    workload_rounds: NDArray[np.int64]
    """Rounds per epoch of each candidate (k of the model)."""
    exclusions: Exclusions = field(default_factory=Exclusions)
    footprint: Array | None = None
    """Per candidate, the memory the profile says a function needs (MB): apart from the
    model (runtime and data partition, row 0) and the model's copies (row 1)."""

    def __len__(self) -> int:
        return len(self.table)

    @staticmethod
    def build(
        workload: Workload,
        catalog: Catalog,
        *,
        memory_step_mb: int | None = None,
        max_functions: int | None = None,
        counts: list[int] | None = None,
    ) -> DeploymentSpace:
        platform = catalog.platform
        step = memory_step_mb or max(platform.memory_step_mb, MEMORY_STEP_MB)
        memories = cpu_bound_sizes(platform.memory_sizes(step), workload, catalog)
        top = int(platform.max_concurrent(memories).max())
        if max_functions is not None:
            top = min(top, max_functions)
        top = max(1, min(top, workload.max_functions))
        if counts is None:
            grid = np.unique(np.round(np.geomspace(1, top, COUNT_LEVELS)).astype(np.int64))
        else:
            grid = np.array(sorted({c for c in counts if 1 <= c <= top}), dtype=np.int64)
            if grid.size == 0:
                raise ConfigError(f"no function count in {counts} is between 1 and {top}")
        options = catalog.sync_options()
        out = Exclusions()
        parts = [
            evaluate(
                workload,
                catalog,
                (grid if index == 0 else grid[grid > 1])[:, None],
                memories[None, :],
                *option,
                exclusions=out,
            )
            for index, option in enumerate(options)
        ]
        table = AllocationTable.concatenate(parts, options)
        if len(table) == 0:
            reasons = "; ".join(f"{k} ({v})" for k, v in out.counts.most_common())
            raise ConfigError(f"no deployment of {catalog.name} can run {workload.name}: {reasons}")
        rounds = workload.iterations_per_epoch(table.n)
        footprint = np.stack(
            [
                workload.memory_needed_mb(table.n) - workload.model_copies * workload.model_mb,
                np.full(len(table), workload.model_copies * workload.model_mb),
            ]
        )
        return DeploymentSpace(table, features_of(table, catalog), rounds, out, footprint)

    def model_room(self) -> Array | None:
        """How many times the profile's model footprint each candidate's memory holds beside
        the runtime and its data partition (>= 1 where the profile says it fits; inf with
        no model footprint); None when the space does not know its footprint."""
        if self.footprint is None:
            return None
        rest, model = self.footprint
        free = self.table.memory_mb - rest
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(model > 0, free / np.where(model > 0, model, 1.0), np.inf)
        result: Array = np.where(free < 0, 0.0, room)
        return result

    def prior(self, goal: DeploymentGoal) -> Array:
        """The model's score of every candidate."""
        return goal.score(self.table.time_s, self.table.cost_usd)

    def predicted_bill(self, goal: DeploymentGoal) -> float:
        """The model's cost of ``goal.epochs`` epochs on its own best candidate."""
        best = int(np.argmin(self.prior(goal)))
        return float(goal.epochs * self.table.cost_usd[best] + self.table.startup_usd[best])

    def log_time(self) -> Array:
        """log of the model's time per epoch: the GP's prior mean when warm-started."""
        result: Array = np.log(np.maximum(self.table.time_s, 1e-12))
        return result

    def terms(self) -> Array:
        """The model's time per epoch as terms (computation, synchronisation, the rest: load
        and invocation), whose sum is the time: the scales a search learns from its probes."""
        t = self.table
        result: Array = np.stack([t.compute_s, t.sync_s, t.load_s + t.invoke_s])
        return result

    def probe_rounds(self, rounds: int = 5, cap_s: float = 10.0) -> Array:
        """The rounds a probe of each candidate runs: ``rounds``, at most an epoch's and at
        most ``cap_s`` seconds of them (as the model times them), at least one."""
        k = self.workload_rounds.astype(float)
        per_round = self.table.time_s / np.maximum(k, 1.0)
        result: Array = np.minimum(
            np.minimum(rounds, k), np.maximum(1.0, np.floor(cap_s / per_round))
        )
        return result

    def probe_cost(self, rounds: int = 5, cap_s: float = 10.0) -> Array:
        """The model's price of probing each candidate: its cold start plus ``rounds`` rounds
        (at most ``cap_s`` seconds of them, at least one)."""
        return self.probe_price(self.probe_rounds(rounds, cap_s))

    def probe_price(self, ran: Array | float) -> Array:
        """The model's price of a probe of each candidate that runs ``ran`` rounds."""
        table = self.table
        k = np.maximum(self.workload_rounds.astype(float), 1.0)
        result: Array = table.startup_usd + np.asarray(ran, dtype=float) / k * table.cost_usd
        return result

    def part_price(self, fraction: Array | float) -> Array:
        """The model's price of a probe of each candidate that runs ``fraction`` (at most 1)
        of one round: each function trains that share of its rows, then the round's
        synchronisation. The computation's share of the functions' bill scales with it; the
        rest of the round (synchronisation, load, invocation) and the start do not."""
        table = self.table
        k = np.maximum(self.workload_rounds.astype(float), 1.0)
        compute = table.compute_s / np.maximum(table.time_s, 1e-12)
        scale = 1.0 - (1.0 - np.asarray(fraction, dtype=float)) * compute
        per_round = table.function_usd * scale + table.invocation_usd + table.storage_usd
        result: Array = table.startup_usd + per_round / k
        return result

    def cost_per_s(self) -> Array:
        """Dollars per second of epoch of each candidate (its functions' prices and requests,
        as the model prices them): what turns a measured time into a cost."""
        result: Array = self.table.cost_usd / np.maximum(self.table.time_s, 1e-12)
        return result

    def allocation(self, index: int) -> Allocation:
        return self.table.allocation(index)

    def index_of(self, allocation: Allocation) -> int | None:
        """The candidate of ``allocation``, or None when it is not in the space."""
        option = self.table.options.index((allocation.storage, allocation.scheme))
        rows = np.flatnonzero(
            (self.table.n == allocation.n)
            & (self.table.memory_mb == allocation.memory_mb)
            & (self.table.option == option)
        )
        return int(rows[0]) if rows.size else None


def features_of(table: AllocationTable, catalog: Catalog) -> Array:
    """[log n / log N, log(m / m_min) / log(m_max / m_min), one-hot option (if several)]."""
    platform = catalog.platform
    most = max(platform.concurrency_limit, 2)
    n = np.log(table.n.astype(float)) / math.log(most)
    low, high = float(platform.memory_min_mb), float(max(platform.memory_max_mb, 2 * 128))
    m = np.log(table.memory_mb / low) / math.log(high / low)
    columns = [n, m]
    if len(table.options) > 1:
        columns += [(table.option == k).astype(float) for k in range(len(table.options))]
    return np.clip(np.stack(columns, axis=1), 0.0, 1.0)


@dataclass(frozen=True)
class ProbeFit:
    """Probes fitted to the dollars a search has left: the most rounds, up to the full
    probe's (``full_rounds``, at most ``cap_s`` seconds of them), whose price (the model's)
    fits, at least one; with ``parts``, where not even one round fits, the most of one round
    in steps of 1 / ``parts`` (at least one step; ``DeploymentSpace.part_price``): a search
    turns to these where no candidate's one-round probe fits (``parts_price``). A probe of
    r rounds (r < 1 for part of one) where the full one runs R measures with √(R / r) times
    the full probe's noise: its rounds average out less of it."""

    space: DeploymentSpace
    full_rounds: int
    cap_s: float = 10.0
    parts: int | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.full_rounds, int) and self.full_rounds >= 1):
            raise ConfigError(
                f"the value of probe_rounds is {self.full_rounds!r}, but must be an integer >= 1"
            )
        if self.parts is not None and not (isinstance(self.parts, int) and self.parts >= 2):
            raise ConfigError(
                f"the value of round_parts is {self.parts!r}, but must be an integer >= 2"
            )

    @cached_property
    def full(self) -> Array:
        """The rounds of each candidate's full probe."""
        return self.space.probe_rounds(self.full_rounds, self.cap_s)

    @cached_property
    def shortest(self) -> Array:
        """The price of each candidate's shortest probe of whole rounds: its start and one
        round."""
        return self.space.probe_price(np.minimum(self.full, 1.0))

    @cached_property
    def parts_price(self) -> Array:
        """The price of each candidate's shortest probe with ``parts``: one part of one
        round (``shortest`` without)."""
        if self.parts is None:
            return self.shortest
        return self.space.part_price(1.0 / self.parts)

    def rounds(self, index: int, left_usd: float | None) -> float:
        """The rounds of a probe of candidate ``index`` with ``left_usd`` dollars left (None:
        no dollar cap): the full probe's where it fits, else as many as fit, at least one;
        with ``parts``, where one round does not fit, the parts of one that fit, at least
        one part."""
        full = int(self.full[index])
        table = self.space.table
        per_round = float(table.cost_usd[index]) / max(int(self.space.workload_rounds[index]), 1)
        if left_usd is None or per_round <= 0:
            return full
        fit = math.floor((left_usd - float(table.startup_usd[index])) / per_round)
        if fit >= 1 or self.parts is None:
            return max(1, min(full, fit))
        return self.part(index, left_usd)

    def part(self, index: int, left_usd: float) -> float:
        """The largest multiple of 1 / ``parts`` of one round (below one, at least one part)
        whose price (``DeploymentSpace.part_price``) fits ``left_usd``."""
        parts = self.parts or 1
        start = float(self.space.part_price(0.0)[index])
        whole = float(self.space.part_price(1.0)[index])
        share = (left_usd - start) / (whole - start) if whole > start else 1.0
        steps = math.floor(share * parts + 1e-9)
        return max(1, min(parts - 1, steps)) / parts

    def shortened(self, index: int, rounds: float | None) -> float | None:
        """``rounds`` where fewer than candidate ``index``'s full probe runs, else None."""
        return rounds if rounds is not None and rounds < float(self.full[index]) else None

    def noise_factor(self, index: int, rounds: float) -> float:
        """How many times the full probe's noise a probe of ``rounds`` rounds measures with."""
        floor = 1.0 / self.parts if self.parts is not None else 1.0
        return math.sqrt(float(self.full[index]) / max(rounds, floor))
