"""The training policy: an offline start, the online loss fit, re-plans over 𝒫 with a
(delayed) restart, and a guard that every epoch fits what is left (the package docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError, UnreachableTargetError
from faasml.models.convergence import (
    MIN_POINTS,
    EpochPrediction,
    predict_epochs,
    whole_epochs,
)
from faasml.models.restart import SwitchCost, switch_costs
from faasml.models.space import AllocationTable, allocation_space
from faasml.planners.adaptive.frontier import (
    admits,
    best_row,
    fits,
    training_frontier,
    what_is_left,
)
from faasml.planners.pareto import pareto_indices
from faasml.planners.training import _infeasible
from faasml.types import Allocation, Constraint, Decision, Objective
from faasml.units import format_duration, format_money
from faasml.workload import Workload

DEFAULT_DELTA = 0.1
"""δ of Algorithm 2 (CE-scaling §IV-G: the default)."""

TRUSTED_POINTS = 5
"""Epochs observed before the online fit replaces the offline estimate."""

MIN_UNDERUSE_EPOCHS = 3
"""Fewer predicted remaining epochs than this (or than 1/δ, where one epoch is more than δ of
the rest) never trigger a re-plan for unused budget or time."""

TRUSTED_SPREAD = 1.5
"""An online prediction is acted on when its 80 % interval is at most this share of it."""


@dataclass(frozen=True)
class SchedulerDecision:
    """What a training policy decided after ``epoch`` finished, and why."""

    epoch: int
    decision: Decision
    allocation: Allocation
    """The allocation of the epochs from ``effective_epoch`` on."""
    reason: str
    predicted_total_epochs: int | None
    """Whole epochs the run is predicted to need in all (None before any prediction)."""
    prediction: EpochPrediction | None = None
    """The online prediction made at this epoch (None when none could be made)."""
    effective_epoch: int = 0
    """First epoch run on ``allocation``: epoch + 1, or epoch + 2 after a delayed restart."""
    switch: SwitchCost | None = None
    """The switch overhead the model predicts for a RESCALE."""
    fit_family: str | None = None


class TrainingPolicy:
    """Base of every training policy: offline start, online fit, guarded epochs.

    Subclasses set ``delayed_restart`` and ``guarded`` and decide when to re-plan
    (``_should_replan``). Not thread-safe: one policy object drives one run.
    """

    name: ClassVar[str] = "policy"
    delayed_restart: ClassVar[bool] = True
    guarded: ClassVar[bool] = True
    """Stop before an epoch that would exceed the budget or the deadline."""

    def __init__(
        self,
        workload: Workload,
        catalog: Catalog,
        constraint: Constraint,
        target_loss: float,
        *,
        delta: float = DEFAULT_DELTA,
        offline_epochs: int | None = None,
        family: str = "auto",
        frontier: AllocationTable | None = None,
        memory_step_mb: int | None = None,
        max_functions: int | None = None,
        start_fraction: float = 0.5,
    ) -> None:
        if not (math.isfinite(target_loss) and target_loss >= 0):
            raise ConfigError(f"the value of target_loss is {target_loss}, but must be >= 0")
        if not (math.isfinite(delta) and delta >= 0):
            raise ConfigError(f"the value of delta is {delta}, but must be >= 0")
        epochs = workload.epochs if offline_epochs is None else offline_epochs
        if epochs < 1:
            raise ConfigError(f"the value of offline_epochs is {epochs}, but must be >= 1")
        self.workload, self.catalog, self.constraint = workload, catalog, constraint
        self.target_loss, self.delta, self.offline_epochs = target_loss, delta, epochs
        self.family = family
        if not 0 < start_fraction <= 1:
            raise ConfigError(
                f"the value of start_fraction is {start_fraction}, but must be in (0, 1]"
            )
        self.start_fraction = start_fraction
        self.start_reason = ""
        self._memory_step_mb, self._max_functions = memory_step_mb, max_functions
        self.frontier = frontier or training_frontier(
            workload, catalog, memory_step_mb=memory_step_mb, max_functions=max_functions
        )
        self._epochs: list[int] = []
        self._losses: list[float] = []
        self._row = -1
        self._reference = float(epochs)
        self._family: str | None = None

    # -- the contract -------------------------------------------------------------------------

    @property
    def allocation(self) -> Allocation:
        """The allocation running now."""
        self._require_start()
        return self.frontier.allocation(self._row)

    def start(self) -> Allocation:
        """The best Pareto allocation for the offline estimate within the whole constraint
        (Alg. 2 lines 3–6; eqs. 13–16). When the estimate does not fit but ``start_fraction``
        of it does, the allocation that buys the most epochs (``start_reason`` says so);
        otherwise InfeasibleConstraintError naming the least budget or deadline."""
        p, bounds = self.frontier, (self.constraint.budget_usd, self.constraint.deadline_s)
        # Provision for (1 + δ) × the estimate as re-plans do, else for the estimate itself.
        for count in dict.fromkeys((self._provision(self.offline_epochs), self.offline_epochs)):
            time = p.startup_s + count * p.time_s
            cost = p.startup_usd + count * p.cost_usd
            admitted = admits(time, cost, *bounds)
            if admitted.any():
                self._row = best_row(np.flatnonzero(admitted), time, cost, self.constraint.goal)
                self.start_reason = (
                    f"best for {count} epochs (offline estimate {self.offline_epochs})"
                )
                return self.frontier.allocation(self._row)
        # The offline estimate is a guess (errors up to 40 %, CE-scaling Fig. 4a): when a part
        # of it fits, start best-effort and let the online fit decide; refuse below that part.
        least = max(1, math.ceil(self.start_fraction * self.offline_epochs))
        part_time = p.startup_s + least * p.time_s
        part_cost = p.startup_usd + least * p.cost_usd
        if not admits(part_time, part_cost, *bounds).any():
            raise _infeasible(self.workload, self.offline_epochs, self.constraint, time, cost)
        per_epoch = p.cost_usd if self.constraint.budget_usd is not None else p.time_s
        self._row = int(np.argmin(per_epoch))
        self.start_reason = (
            f"the offline estimate of {self.offline_epochs} epochs does not fit the constraint; "
            f"best effort with the allocation that buys the most epochs"
        )
        return self.frontier.allocation(self._row)

    def observe(
        self, epoch: int, loss: float, spent_usd: float, elapsed_s: float
    ) -> SchedulerDecision:
        """Take the loss at the end of ``epoch`` (1-based) with the spend and time so far, and
        decide the allocation of the next epoch (Alg. 2 lines 8–15)."""
        self._require_start()
        self._check(epoch, loss, spent_usd, elapsed_s)
        self._epochs.append(epoch)
        self._losses.append(loss)
        if loss <= self.target_loss:
            return self._decide(epoch, Decision.STOP, f"target loss {self.target_loss:g} reached")
        prediction, note = self._predict()
        budget = (
            None if self.constraint.budget_usd is None else self.constraint.budget_usd - spent_usd
        )
        time_left = (
            None if self.constraint.deadline_s is None else self.constraint.deadline_s - elapsed_s
        )
        estimate = self._reference if prediction is None else prediction.epochs
        decision, row, reason, switch = Decision.KEEP, self._row, note, None
        replan, why = (False, note)
        if prediction is not None:
            replan, why = self._should_replan(prediction.epochs)
        if not replan and self.guarded:
            replan, why = self._outgrown(epoch, estimate, budget, time_left)
        if replan:
            self._reference = estimate
            decision, row, reason, switch = self._replan(epoch, budget, time_left, why)
        next_cost, next_time = self._next_epoch(row, switch)
        if self.guarded and not fits(next_cost, next_time, budget, time_left):
            return self._decide(
                epoch,
                Decision.STOP,
                f"the next epoch ({format_money(next_cost)}, {format_duration(next_time)}) does "
                f"not fit what is left ({what_is_left(budget, time_left)}); the constraint "
                "cannot be met any more",
                prediction,
                estimate,
            )
        effective = epoch + 1
        if decision is Decision.RESCALE:
            # From the next observation on the new allocation runs: it takes over during the
            # next epoch (or at its end when it cannot be ready in time).
            self._row = row
            if switch is not None and switch.delayed and not switch.mid_epoch:
                effective = epoch + 2
        return self._decide(
            epoch,
            decision,
            reason,
            prediction,
            estimate,
            row=row,
            effective=effective,
            switch=switch,
        )

    def reprice(self, workload: Workload, catalog: Catalog) -> None:
        """Price every allocation again with a run's measured corrections (the epochs it ran:
        ``runtime.calibration``): 𝒫 rebuilt from them, the allocation running now kept on it
        (added where it is no longer Pareto-optimal), the loss curve seen so far kept. Later
        re-plans, and the guard that the next epoch fits what is left, use these prices."""
        self._require_start()
        current = self.allocation
        space = allocation_space(
            workload,
            catalog,
            memory_step_mb=self._memory_step_mb,
            max_functions=self._max_functions,
        )
        if len(space) == 0:
            raise ConfigError(f"no allocation of {catalog.name} can run {workload.name}")
        rows = list(pareto_indices(space.time_s, space.cost_usd))
        same = [i for i in range(len(space)) if space.allocation(i) == current]
        if same and same[0] not in rows:
            rows.append(same[0])
        frontier = space.take(np.array(rows, dtype=np.int64))
        kept = [i for i in range(len(frontier)) if frontier.allocation(i) == current]
        if not kept:  # the running allocation does not fit the corrected model: keep the old
            return
        self.workload, self.catalog = workload, catalog
        self.frontier, self._row = frontier, kept[0]

    # -- hooks for the baselines --------------------------------------------------------------

    def _should_replan(self, predicted: float) -> tuple[bool, str]:
        change = abs(predicted - self._reference) / max(self._reference, 1e-9)
        if change > self.delta:
            return True, (
                f"predicted epochs moved {change:.0%} (from {self._reference:.1f} to "
                f"{predicted:.1f}), more than δ = {self.delta:g}"
            )
        return False, f"predicted epochs moved {change:.0%}, within δ = {self.delta:g}"

    # -- internals ----------------------------------------------------------------------------

    def _outgrown(
        self, epoch: int, estimate: float, budget: float | None, time_left: float | None
    ) -> tuple[bool, str]:
        """Whether the current allocation no longer matches what is left, whatever δ says: it
        cannot pay for the predicted remaining epochs (the policy never plans beyond what
        remains), or it would leave more than δ of the constrained budget or time unused
        while a faster (budget) or cheaper (deadline) Pareto allocation exists."""
        remaining = max(1, whole_epochs(estimate) - epoch)
        provision = math.ceil(remaining * (1.0 + self.delta / 2) - 1e-9)
        p, row = self.frontier, self._row
        cost, time = provision * float(p.cost_usd[row]), provision * float(p.time_s[row])
        if not fits(cost, time, budget, time_left):
            return True, (
                f"the current allocation cannot pay for the {remaining} predicted remaining "
                f"epochs with a margin of δ/2 ({format_money(cost)}, {format_duration(time)})"
            )
        cost, time = remaining * float(p.cost_usd[row]), remaining * float(p.time_s[row])
        if self.constraint.goal is Objective.MIN_TIME and budget is not None:
            used, better = cost / max(budget, 1e-12), bool(p.time_s[row] > p.time_s.min())
            what = "budget"
        elif self.constraint.goal is Objective.MIN_COST and time_left is not None:
            used, better = time / max(time_left, 1e-12), bool(p.cost_usd[row] > p.cost_usd.min())
            what = "time"
        else:
            return False, ""
        if (
            better
            and remaining >= max(MIN_UNDERUSE_EPOCHS, 1.0 / max(self.delta, 1e-9))
            and used * (1.0 + self.delta) < 1.0 - self.delta
        ):
            return True, (
                f"the current allocation would use {used:.0%} of the {what} left for the "
                f"{remaining} predicted remaining epochs"
            )
        return False, ""

    def _provision(self, epochs: int) -> int:
        """(1 + δ) × ``epochs``, rounded up: the drift tolerated without re-planning."""
        return math.ceil(epochs * (1.0 + self.delta) - 1e-9)

    def _predict(self) -> tuple[EpochPrediction | None, str]:
        if len(self._epochs) < max(MIN_POINTS, TRUSTED_POINTS):
            return None, f"offline estimate of {self.offline_epochs} epochs stands (too few points)"
        try:
            averaged = predict_epochs(self._epochs, self._losses, self.target_loss, self.family)
        except UnreachableTargetError as err:
            return None, f"{err}; keeping the last prediction"
        self._family = averaged.best.family
        prediction = averaged.prediction
        if prediction.high - prediction.low > TRUSTED_SPREAD * prediction.epochs:
            return None, (
                f"online prediction {prediction.epochs:.1f} epochs too uncertain "
                f"({prediction.low:.1f}–{prediction.high:.1f}); keeping the last prediction"
            )
        return prediction, ""

    def _replan(
        self, epoch: int, budget: float | None, time_left: float | None, why: str
    ) -> tuple[Decision, int, str, SwitchCost | None]:
        remaining = max(1, whole_epochs(self._reference) - epoch)
        p, cur = self.frontier, self._row
        t, c = p.time_s, p.cost_usd
        switch = switch_costs(
            self.workload,
            self.catalog,
            p.allocation(cur),
            float(t[cur]),
            float(c[cur]),
            p,
            delayed=self.delayed_restart,
        )
        # The switching epoch (old and new functions, overheads), then the rest on the new one.
        # Alg. 2 line 12 charges a whole epoch of the old allocation; the takeover at the
        # synchronisation point charges the share the old functions train, as priced by
        # faasml.models.restart.
        # Provision for (1 + δ) × the predicted epochs: the drift the policy tolerates without
        # re-planning; fall back to the prediction itself when that does not fit.
        for count in dict.fromkeys((self._provision(remaining), remaining)):
            time = switch.epoch_s + (count - 1) * t
            cost = switch.epoch_usd + (count - 1) * c
            time[cur], cost[cur] = count * t[cur], count * c[cur]
            admitted = admits(time, cost, budget, time_left)
            if admitted.any():
                row = best_row(np.flatnonzero(admitted), time, cost, self.constraint.goal)
                plan = f"best for {count} more epochs within {what_is_left(budget, time_left)}"
                break
        else:
            # Best effort: the allocation that buys the most epochs of what is left.
            per_epoch = c if self.constraint.budget_usd is not None else t
            row = int(np.argmin(per_epoch))
            plan = (
                f"no allocation fits {remaining} more epochs within "
                f"{what_is_left(budget, time_left)}; best effort with the one that buys most epochs"
            )
        if row == cur:
            return Decision.KEEP, cur, f"{why}; re-planned: the current allocation is {plan}", None
        chosen = SwitchCost(
            total_s=float(switch.total_s[row]),
            hidden_s=float(switch.hidden_s[row]),
            cost_usd=float(switch.cost_usd[row]),
            delayed=bool(switch.delayed[row]),
            mid_epoch=bool(switch.mid_epoch[row]),
            epoch_s=float(switch.epoch_s[row]),
            epoch_usd=float(switch.epoch_usd[row]),
        )
        return Decision.RESCALE, row, f"{why}; re-planned: {p.allocation(row)} is {plan}", chosen

    def _next_epoch(self, row: int, switch: SwitchCost | None) -> tuple[float, float]:
        if switch is None:
            return float(self.frontier.cost_usd[row]), float(self.frontier.time_s[row])
        return switch.epoch_usd, switch.epoch_s

    def _decide(
        self,
        epoch: int,
        decision: Decision,
        reason: str,
        prediction: EpochPrediction | None = None,
        estimate: float | None = None,
        *,
        row: int | None = None,
        effective: int | None = None,
        switch: SwitchCost | None = None,
    ) -> SchedulerDecision:
        total = None if estimate is None else max(epoch, whole_epochs(estimate))
        return SchedulerDecision(
            epoch=epoch,
            decision=decision,
            allocation=self.frontier.allocation(self._row if row is None else row),
            reason=reason or "no change",
            predicted_total_epochs=total,
            prediction=prediction,
            effective_epoch=epoch + 1 if effective is None else effective,
            switch=switch,
            fit_family=self._family,
        )

    def _require_start(self) -> None:
        if self._row < 0:
            raise ConfigError("call start() before asking a training policy for decisions")

    def _check(self, epoch: int, loss: float, spent_usd: float, elapsed_s: float) -> None:
        last = self._epochs[-1] if self._epochs else 0
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch <= last:
            raise ConfigError(
                f"the value of epoch is {epoch!r}, but must be a whole number > {last} "
                "(the last epoch observed)"
            )
        for name, value in (("loss", loss), ("spent_usd", spent_usd), ("elapsed_s", elapsed_s)):
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"the value of {name} is {value!r}, but must be finite and >= 0")
