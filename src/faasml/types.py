"""Plain records shared by every layer: allocations, constraints, estimates and plans."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from enum import Enum

from faasml.exceptions import ConfigError


@dataclass(frozen=True, order=True)
class Allocation:
    """θ = (n, m, s) of CE-scaling eq. 1, plus the synchronisation scheme used over storage s."""

    n: int
    """Number of functions (workers)."""
    memory_mb: int
    """Memory of each function in MB."""
    storage: str
    """Name of the storage service in the catalog that carries synchronisation."""
    scheme: str = "allreduce"
    """Synchronisation scheme: 'allreduce', 'scatter-reduce' or 'param-server'."""

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError(f"the value of n is {self.n}, but must be n >= 1")
        if self.memory_mb < 1:
            raise ConfigError(f"the value of memory_mb is {self.memory_mb}, but must be >= 1")

    def __str__(self) -> str:
        return f"{self.n} × {self.memory_mb} MB, {self.storage}/{self.scheme}"


class Objective(Enum):
    """What a planner minimises; the other quantity is constrained."""

    MIN_TIME = "min-time"
    MIN_COST = "min-cost"


@dataclass(frozen=True)
class Constraint:
    """A budget, a deadline or both, and the objective.

    With a budget alone faasml minimises time; with a deadline alone it minimises cost
    (CE-scaling eqs. 7–9 and 11); with both, ``objective`` says which.
    """

    budget_usd: float | None = None
    deadline_s: float | None = None
    objective: Objective | None = None

    def __post_init__(self) -> None:
        if self.budget_usd is None and self.deadline_s is None:
            raise ConfigError("a constraint needs a budget, a deadline or both; none was given")
        for name, value in (("budget", self.budget_usd), ("deadline", self.deadline_s)):
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, numbers.Real)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ConfigError(
                    f"the value of {name} is {value!r}, but must be a positive number"
                )
        if self.objective is None:
            chosen = Objective.MIN_TIME if self.budget_usd is not None else Objective.MIN_COST
            object.__setattr__(self, "objective", chosen)

    @property
    def goal(self) -> Objective:
        assert self.objective is not None  # set in __post_init__
        return self.objective

    def admits(self, time_s: float, cost_usd: float, *, rel_tol: float = 1e-9) -> bool:
        """True when a time and a cost satisfy every bound (with a tiny float tolerance)."""
        if self.budget_usd is not None and cost_usd > self.budget_usd * (1 + rel_tol):
            return False
        return not (self.deadline_s is not None and time_s > self.deadline_s * (1 + rel_tol))


@dataclass(frozen=True)
class Breakdown:
    """Where time and money go, for one epoch or summed over a run."""

    load_s: float
    compute_s: float
    sync_s: float
    invoke_s: float
    function_usd: float
    """GB-seconds of every function."""
    invocation_usd: float
    storage_usd: float

    @property
    def time_s(self) -> float:
        return self.load_s + self.compute_s + self.sync_s + self.invoke_s

    @property
    def cost_usd(self) -> float:
        return self.function_usd + self.invocation_usd + self.storage_usd

    def scaled(self, factor: float) -> Breakdown:
        return Breakdown(
            load_s=self.load_s * factor,
            compute_s=self.compute_s * factor,
            sync_s=self.sync_s * factor,
            invoke_s=self.invoke_s * factor,
            function_usd=self.function_usd * factor,
            invocation_usd=self.invocation_usd * factor,
            storage_usd=self.storage_usd * factor,
        )

    def plus(self, other: Breakdown) -> Breakdown:
        return Breakdown(
            load_s=self.load_s + other.load_s,
            compute_s=self.compute_s + other.compute_s,
            sync_s=self.sync_s + other.sync_s,
            invoke_s=self.invoke_s + other.invoke_s,
            function_usd=self.function_usd + other.function_usd,
            invocation_usd=self.invocation_usd + other.invocation_usd,
            storage_usd=self.storage_usd + other.storage_usd,
        )


@dataclass(frozen=True)
class AllocationEstimate:
    """An allocation with its predicted time and cost per epoch (CE-scaling t'(θ), c'(θ))."""

    allocation: Allocation
    epoch: Breakdown
    startup_s: float = 0.0
    """Cold start of the allocation's functions, paid once per start."""
    startup_usd: float = 0.0

    def run_time_s(self, epochs: int) -> float:
        """Cold start plus ``epochs`` epochs."""
        return self.startup_s + epochs * self.epoch.time_s

    def run_cost_usd(self, epochs: int) -> float:
        return self.startup_usd + epochs * self.epoch.cost_usd

    @property
    def epoch_time_s(self) -> float:
        return self.epoch.time_s

    @property
    def epoch_cost_usd(self) -> float:
        return self.epoch.cost_usd


@dataclass(frozen=True)
class TrainPlan:
    """A static allocation for training a fixed number of epochs (CE-scaling eqs. 13–16)."""

    workload: str
    catalog: str
    constraint: Constraint
    epochs: int
    choice: AllocationEstimate
    total: Breakdown
    """Summed over every epoch, plus the cold start of the first invocation."""
    startup_s: float
    """Cold start before the first epoch (already inside ``time_s``)."""
    runners_up: tuple[AllocationEstimate, ...] = field(default=())
    frontier_size: int = 0
    space_size: int = 0

    @property
    def time_s(self) -> float:
        return self.total.time_s

    @property
    def cost_usd(self) -> float:
        return self.total.cost_usd


@dataclass(frozen=True)
class StagePlan:
    """One stage of a tuning plan: q_i trials of r_i epochs on θ_i (CE-scaling eqs. 7–8)."""

    index: int
    """1-based stage number."""
    trials: int
    epochs: int
    allocation: Allocation
    epoch: Breakdown
    """Predicted time and cost of one epoch of one trial on ``allocation``."""
    waves: int
    """⌈q_i / trials that fit the concurrency limit at once⌉."""
    time_s: float
    """cold start + waves · r_i · t'(θ_i) (later waves reuse warm functions)."""
    cost_usd: float
    """q_i · r_i · c'(θ_i) + the cold-start cost of the first wave's functions."""


@dataclass(frozen=True)
class TunePlan:
    """A resource-partitioning plan for a tuning job: one allocation per stage (eqs. 6–12)."""

    planner: str
    constraint: Constraint
    stages: tuple[StagePlan, ...]
    time_s: float
    """Σ stage times (eq. 7)."""
    cost_usd: float
    """Σ stage costs (eqs. 8 and 11)."""
    planning_s: float
    """Wall time of the planner itself, candidates given."""
    setup_s: float = 0.0
    """Wall time of evaluating Θ and pruning it to the candidates (shared by all planners)."""
    workload: str = ""
    catalog: str = ""
    candidates: int = 0
    """Allocations the planner chose from (after stage-aware Pareto pruning)."""


class Decision(Enum):
    """What a training scheduler decides after an epoch (CE-scaling Algorithm 2)."""

    KEEP = "keep"
    """Go on with the current allocation."""
    RESCALE = "rescale"
    """Switch to another allocation (with a delayed restart where the policy uses one)."""
    STOP = "stop"
    """Stop training: the target is reached, or the constraint cannot be met any more."""
