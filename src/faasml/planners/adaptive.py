"""Adaptive training: re-plan the allocation as the online loss fit moves (CE-scaling §III-D,
Algorithm 2, eqs. 13–16), and the baselines it is compared with.

Every policy is a pure object driven by ``start()`` and one ``observe(...)`` per finished epoch;
it never runs anything. ``AdaptiveScheduler`` starts from the offline estimate of the epochs
and the best Pareto allocation for the whole budget or deadline (Alg. 2 lines 3–6); after each
epoch it refits the loss curve (line 8) and, when the predicted total epochs moved by more than
δ from the prediction its allocation was planned for (line 11), it chooses the best Pareto
allocation for the predicted remaining epochs within what is left of the budget or the time
(lines 12–13), switching with a delayed restart: the next epoch still runs on the old
allocation while the new functions start, which is why one epoch of the old allocation is paid
before the new one is planned for e* − e' − 1 epochs (line 12).

Choices the paper leaves open (docs/adaptive.md): the change is measured against the prediction
the current allocation was planned for (so slow drift still triggers), in both directions;
before three points the offline estimate stands; a fit whose floor is above the target keeps
the last prediction; when no allocation fits the predicted remaining epochs the policy goes on
best-effort with the allocation that buys the most epochs; and before every epoch it checks
that the epoch fits what is left, stopping otherwise, so it never spends beyond the budget or
runs past the deadline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError, UnreachableTargetError
from faasml.models.convergence import MIN_POINTS, EpochPrediction, fit_loss_curve
from faasml.models.restart import SwitchCost, switch_costs
from faasml.models.space import AllocationTable, allocation_space
from faasml.planners.pareto import pareto_front
from faasml.planners.training import _infeasible
from faasml.registry import Registry
from faasml.types import Allocation, Constraint, Decision, Objective
from faasml.units import format_duration, format_money
from faasml.workload import Workload

Array = NDArray[np.float64]

DEFAULT_DELTA = 0.1
"""δ of Algorithm 2 (CE-scaling §IV-G: the default)."""

TRUSTED_POINTS = 5
"""Epochs observed before the online fit replaces the offline estimate."""

TRUSTED_SPREAD = 0.5
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


def training_frontier(
    workload: Workload,
    catalog: Catalog,
    *,
    memory_step_mb: int | None = None,
    max_functions: int | None = None,
) -> AllocationTable:
    """𝒫: the Pareto-optimal allocations in (epoch time, epoch cost) (CE-scaling §III-B3); a
    scheduler searches only these. Compute once and pass to many schedulers."""
    space = allocation_space(
        workload, catalog, memory_step_mb=memory_step_mb, max_functions=max_functions
    )
    if len(space) == 0:
        raise ConfigError(f"no allocation of {catalog.name} can run {workload.name}")
    return pareto_front(space)


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
        self.frontier = frontier or training_frontier(
            workload, catalog, memory_step_mb=memory_step_mb, max_functions=max_functions
        )
        self._storages = [self.frontier.options[int(o)][0] for o in self.frontier.option]
        self._epochs: list[int] = []
        self._losses: list[float] = []
        self._row = -1
        self._pending: tuple[int, int] | None = None
        """(frontier row, first epoch it runs) of a delayed switch not yet taken over."""
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
        (Alg. 2 lines 3–6; eqs. 13–16). Raises InfeasibleConstraintError naming the least
        budget or deadline that would do."""
        p = self.frontier
        time = self.catalog.platform.cold_start_s + self.offline_epochs * p.time_s
        cost = p.startup_usd + self.offline_epochs * p.cost_usd
        admitted = self._admits(time, cost, self.constraint.budget_usd, self.constraint.deadline_s)
        if not admitted.any():
            raise _infeasible(self.workload, self.offline_epochs, self.constraint, time, cost)
        self._row = self._best(np.flatnonzero(admitted), time, cost)
        return self.frontier.allocation(self._row)

    def observe(
        self, epoch: int, loss: float, spent_usd: float, elapsed_s: float
    ) -> SchedulerDecision:
        """Take the loss at the end of ``epoch`` (1-based) with the spend and time so far, and
        decide the allocation of the next epoch (Alg. 2 lines 8–15)."""
        self._require_start()
        self._check(epoch, loss, spent_usd, elapsed_s)
        if self._pending is not None and self._pending[1] <= epoch + 1:
            self._row, self._pending = self._pending[0], None
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
        if prediction is not None and self._pending is None:
            replan, why = self._should_replan(prediction.epochs)
            if replan:
                self._reference = prediction.epochs
                decision, row, reason, switch = self._replan(epoch, budget, time_left, why)
        next_cost, next_time = self._next_epoch(row, switch)
        if self.guarded and not self._fits(next_cost, next_time, budget, time_left):
            return self._decide(
                epoch,
                Decision.STOP,
                f"the next epoch ({format_money(next_cost)}, {format_duration(next_time)}) does "
                f"not fit what is left ({self._left(budget, time_left)}); the constraint "
                "cannot be met any more",
                prediction,
                estimate,
            )
        effective = epoch + 1
        if decision is Decision.RESCALE:
            if switch is not None and switch.delayed:
                effective = epoch + 2
                self._pending = (row, effective)
            else:
                self._row = row
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

    def _predict(self) -> tuple[EpochPrediction | None, str]:
        if len(self._epochs) < max(MIN_POINTS, TRUSTED_POINTS):
            return None, f"offline estimate of {self.offline_epochs} epochs stands (too few points)"
        fit = fit_loss_curve(self._epochs, self._losses, self.family)
        self._family = fit.family
        try:
            prediction = fit.epochs_to_reach(self.target_loss)
        except UnreachableTargetError as err:
            return None, f"{err}; keeping the last prediction"
        if prediction.high - prediction.low > TRUSTED_SPREAD * prediction.epochs:
            return None, (
                f"online prediction {prediction.epochs:.1f} epochs too uncertain "
                f"({prediction.low:.1f}–{prediction.high:.1f}); keeping the last prediction"
            )
        return prediction, ""

    def _replan(
        self, epoch: int, budget: float | None, time_left: float | None, why: str
    ) -> tuple[Decision, int, str, SwitchCost | None]:
        remaining = max(1, math.ceil(self._reference - 1e-9) - epoch)
        p, cur = self.frontier, self._row
        t, c = p.time_s, p.cost_usd
        switch = switch_costs(
            self.workload,
            self.catalog,
            p.allocation(cur),
            float(t[cur]),
            p.n,
            p.memory_mb,
            self._storages,
            delayed=self.delayed_restart,
        )
        # Epochs on the new allocation: one fewer after a delayed restart (Alg. 2 line 12).
        on_new = remaining - switch.delayed.astype(float)
        time = np.where(switch.delayed, t[cur], 0.0) + switch.visible_s + on_new * t
        cost = np.where(switch.delayed, c[cur], 0.0) + switch.cost_usd + on_new * c
        time[cur], cost[cur] = remaining * t[cur], remaining * c[cur]
        usable = on_new >= 1
        usable[cur] = True
        admitted = usable & self._admits(time, cost, budget, time_left)
        if admitted.any():
            row = self._best(np.flatnonzero(admitted), time, cost)
            plan = f"best for {remaining} more epochs within {self._left(budget, time_left)}"
        else:
            # Best effort: the allocation that buys the most epochs of what is left.
            per_epoch = c if self.constraint.budget_usd is not None else t
            row = int(np.flatnonzero(usable)[np.argmin(per_epoch[usable])])
            plan = (
                f"no allocation fits {remaining} more epochs within "
                f"{self._left(budget, time_left)}; best effort with the one that buys most epochs"
            )
        if row == cur:
            return Decision.KEEP, cur, f"{why}; re-planned: the current allocation is {plan}", None
        chosen = SwitchCost(
            total_s=float(switch.total_s[row]),
            hidden_s=float(switch.hidden_s[row]),
            cost_usd=float(switch.cost_usd[row]),
            delayed=bool(switch.delayed[row]),
            launch_after_s=float(switch.launch_after_s[row]),
        )
        return Decision.RESCALE, row, f"{why}; re-planned: {p.allocation(row)} is {plan}", chosen

    def _next_epoch(self, row: int, switch: SwitchCost | None) -> tuple[float, float]:
        p, cur = self.frontier, self._row
        if switch is None:
            return float(p.cost_usd[row]), float(p.time_s[row])
        runs = cur if switch.delayed else row
        return (
            float(p.cost_usd[runs]) + switch.cost_usd,
            float(p.time_s[runs]) + switch.visible_s,
        )

    def _best(self, rows: NDArray[np.int64], time: Array, cost: Array) -> int:
        primary, secondary = (
            (time, cost) if self.constraint.goal is Objective.MIN_TIME else (cost, time)
        )
        return int(rows[np.lexsort((secondary[rows], primary[rows]))[0]])

    @staticmethod
    def _admits(
        time: Array, cost: Array, budget: float | None, time_left: float | None
    ) -> NDArray[np.bool_]:
        ok = np.ones(time.shape, dtype=bool)
        if budget is not None:
            ok &= cost <= budget
        if time_left is not None:
            ok &= time <= time_left
        return ok

    @staticmethod
    def _fits(cost: float, time: float, budget: float | None, time_left: float | None) -> bool:
        return (budget is None or cost <= budget) and (time_left is None or time <= time_left)

    @staticmethod
    def _left(budget: float | None, time_left: float | None) -> str:
        parts = []
        if budget is not None:
            parts.append(f"{format_money(max(budget, 0.0))} left")
        if time_left is not None:
            parts.append(f"{format_duration(max(time_left, 0.0))} left")
        return " and ".join(parts)

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
        total = None if estimate is None else max(epoch, math.ceil(estimate - 1e-9))
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


class AdaptiveScheduler(TrainingPolicy):
    """CE-scaling's adaptive resource scheduler (Algorithm 2) with a delayed restart."""

    name = "adaptive"
    delayed_restart = True


class NoDelayPolicy(TrainingPolicy):
    """Cirrus-like: the same online prediction and δ, but restarts without delay."""

    name = "no-delay"
    delayed_restart = False


class EveryEpochPolicy(TrainingPolicy):
    """Siren-like: re-plans after every epoch (no δ), restarting without delay."""

    name = "every-epoch"
    delayed_restart = False

    def _should_replan(self, predicted: float) -> tuple[bool, str]:
        return True, f"re-planning every epoch (predicted {predicted:.1f} epochs)"


class StaticPolicy(TrainingPolicy):
    """LambdaML-like: the offline estimate's best allocation, kept until the target is reached;
    it does not watch the budget or the deadline while it runs."""

    name = "static"
    guarded = False

    def _should_replan(self, predicted: float) -> tuple[bool, str]:
        return False, "static allocation from the offline estimate"


TRAINING_POLICIES: Registry[type[TrainingPolicy]] = Registry("training policy")
TRAINING_POLICIES.register("adaptive", AdaptiveScheduler)
TRAINING_POLICIES.register("no-delay", NoDelayPolicy)
TRAINING_POLICIES.register("every-epoch", EveryEpochPolicy)
TRAINING_POLICIES.register("static", StaticPolicy)
