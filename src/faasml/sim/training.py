"""Training-job simulator: a training policy against a loss curve on the shared event loop.

Each epoch lasts t'(θ) and costs c'(θ) of the allocation running it (CE-scaling eqs. 2–5,
``faasml.models.evaluate``); the first start pays the cold start, and every switch the overhead
of ``faasml.models.restart`` (hidden in part by a delayed restart). The loss at the end of an
epoch comes from the curve (synthetic or recorded). The policy decides after each epoch, exactly
as it would in a real run; the simulator applies the decision, including a delayed restart's
one-epoch lag, and records the timeline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError, UnreachableTargetError
from faasml.models.cost import startup_cost
from faasml.models.offline import offline_estimate
from faasml.models.restart import switch_cost
from faasml.models.space import AllocationTable, evaluate
from faasml.planners.adaptive import (
    DEFAULT_DELTA,
    TRAINING_POLICIES,
    SchedulerDecision,
    TrainingPolicy,
)
from faasml.sim.engine import EventLoop
from faasml.sim.synthetic import TrainingCurve, sample_run
from faasml.types import Allocation, Constraint, Decision
from faasml.workload import Workload


@dataclass(frozen=True)
class EpochRecord:
    """One simulated epoch: what ran, what it cost, what the policy saw and decided."""

    epoch: int
    allocation: Allocation
    """The allocation running at the end of this epoch."""
    loss: float
    elapsed_s: float
    """Time since the job started, at the end of this epoch."""
    spent_usd: float
    """Money spent so far, at the end of this epoch."""
    switched: bool
    """True when this epoch was the switching epoch of a RESCALE (old and new functions)."""
    decision: SchedulerDecision


@dataclass(frozen=True)
class TrainingRun:
    """The outcome of one simulated training job."""

    policy: str
    workload: str
    catalog: str
    constraint: Constraint
    target_loss: float
    offline_epochs: int
    true_epochs: int | None
    """Epochs the curve really needs (None for a recording that never reaches the target)."""
    start: Allocation
    records: tuple[EpochRecord, ...]
    reached: bool
    stop_reason: str
    time_s: float
    cost_usd: float
    restarts: int
    hidden_switch_s: float = 0.0
    """Switch time hidden by delayed restarts, summed."""
    visible_switch_s: float = 0.0
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def violated(self) -> bool:
        """True when the run spent more than the budget or ran past the deadline."""
        return not self.constraint.admits(self.time_s, self.cost_usd)

    @property
    def met(self) -> bool:
        """Target reached within the constraint."""
        return self.reached and not self.violated


def offline_epochs_for(
    curve: TrainingCurve,
    *,
    fallback: int,
    sample_epochs: int = 10,
    mismatch: float = 0.35,
    sample_fraction: float = 0.05,
    seed: int = 0,
) -> int:
    """The LambdaML-style offline estimate for ``curve``: a simulated run on a sample of the
    data (``sample_run``) extrapolated by ``offline_estimate``; ``fallback`` when that run's
    fit never reaches the target."""
    epochs, losses = sample_run(curve, epochs=sample_epochs, mismatch=mismatch, seed=seed)
    try:
        estimate = offline_estimate(
            epochs, losses, curve.target_loss, sample_fraction=sample_fraction
        )
    except UnreachableTargetError:
        return fallback
    return min(estimate.epochs, 100 * fallback)


def simulate_training(
    workload: Workload,
    catalog: Catalog,
    constraint: Constraint,
    curve: TrainingCurve,
    *,
    policy: str = "adaptive",
    delta: float = DEFAULT_DELTA,
    offline_epochs: int | None = None,
    frontier: AllocationTable | None = None,
    family: str = "auto",
    max_epochs: int | None = None,
    seed: int = 0,
) -> TrainingRun:
    """Run ``policy`` (a name in TRAINING_POLICIES) on ``curve`` until it stops, the curve's
    recording ends, or ``max_epochs`` epochs (default: 5 × the true epochs, at least 50)."""
    try:
        truth: int | None = curve.true_epochs
    except ConfigError:
        truth = None
    estimate = offline_epochs or offline_epochs_for(curve, fallback=workload.epochs, seed=seed)
    limit = max_epochs or max(50, 5 * (truth or estimate))
    if limit < 1:
        raise ConfigError(f"the value of max_epochs is {limit}, but must be >= 1")
    scheduler = TRAINING_POLICIES.get(policy)(
        workload,
        catalog,
        constraint,
        curve.target_loss,
        delta=delta,
        offline_epochs=estimate,
        family=family,
        frontier=frontier,
    )
    sim = _TrainingSim(workload, catalog, curve, scheduler, limit)
    sim.loop.run()
    records = sim.records
    return TrainingRun(
        policy=policy,
        workload=workload.name,
        catalog=catalog.name,
        constraint=constraint,
        target_loss=curve.target_loss,
        offline_epochs=estimate,
        true_epochs=truth,
        start=sim.first,
        records=tuple(records),
        reached=sim.reached,
        stop_reason=sim.reason,
        time_s=records[-1].elapsed_s if records else sim.loop.now,
        cost_usd=sim.spent,
        restarts=sum(1 for r in records if r.decision.decision is Decision.RESCALE),
        hidden_switch_s=sim.hidden_s,
        visible_switch_s=sim.visible_s,
    )


class _TrainingSim:
    """One simulated training job on the event loop: the policy started at once, its first
    epoch after the cold start, each epoch's end feeding the policy and scheduling the next."""

    def __init__(
        self,
        workload: Workload,
        catalog: Catalog,
        curve: TrainingCurve,
        scheduler: TrainingPolicy,
        limit: int,
    ) -> None:
        self.workload, self.catalog, self.curve = workload, catalog, curve
        self.scheduler, self.limit = scheduler, limit
        self.loop = EventLoop()
        self._cache: dict[Allocation, tuple[float, float]] = {}
        self.first = scheduler.start()
        self.spent = float(startup_cost(catalog.platform, self.first.n, self.first.memory_mb))
        self.hidden_s = 0.0
        self.visible_s = 0.0
        self.records: list[EpochRecord] = []
        self.reason = f"stopped after {limit} epochs (max_epochs)"
        self.reached = False
        self.running = self.first
        cold = float(catalog.platform.cold_start_time(self.first.memory_mb))
        self.loop.after(cold, self._first_epoch)

    def _epoch_of(self, allocation: Allocation) -> tuple[float, float]:
        """Seconds and dollars of one epoch on ``allocation`` (eqs. 2–5), once each."""
        if allocation not in self._cache:
            row = evaluate(
                self.workload,
                self.catalog,
                [allocation.n],
                [allocation.memory_mb],
                allocation.storage,
                allocation.scheme,
            )
            self._cache[allocation] = (float(row.time_s[0]), float(row.cost_usd[0]))
        return self._cache[allocation]

    def _first_epoch(self) -> None:
        seconds, dollars = self._epoch_of(self.first)
        self._run_epoch(1, seconds, dollars, False)

    def _run_epoch(self, epoch: int, seconds: float, dollars: float, switched: bool) -> None:
        """Pay for ``epoch`` now and end it ``seconds`` later."""
        self.spent += dollars
        self.loop.after(seconds, lambda: self._end_epoch(epoch, switched))

    def _end_epoch(self, epoch: int, switched: bool) -> None:
        """The policy sees the epoch's loss; apply its decision and start the next epoch."""
        try:
            loss = self.curve.observed(epoch)
        except KeyError:
            self.reason = f"the recorded curve ends before epoch {epoch}"
            return
        decision = self.scheduler.observe(epoch, loss, self.spent, self.loop.now)
        self.records.append(
            EpochRecord(epoch, self.running, loss, self.loop.now, self.spent, switched, decision)
        )
        if decision.decision is Decision.STOP:
            self.reason = decision.reason
            self.reached = bool(loss <= self.curve.target_loss)
            return
        seconds, dollars = self._epoch_of(self.running)
        if decision.decision is Decision.RESCALE:
            switch = switch_cost(
                self.workload,
                self.catalog,
                self.running,
                decision.allocation,
                delayed=self.scheduler.delayed_restart,
            )
            seconds, dollars = switch.epoch_s, switch.epoch_usd
            self.hidden_s += switch.hidden_s
            self.visible_s += switch.visible_s
            self.running = decision.allocation
        if epoch < self.limit:
            self._run_epoch(epoch + 1, seconds, dollars, decision.decision is Decision.RESCALE)


def relative_error(predicted: float, actual: float) -> float:
    """|predicted − actual| / actual, with an unreachable prediction counted as 100 %."""
    if not math.isfinite(predicted):
        return 1.0
    return float(np.abs(predicted - actual) / actual)
