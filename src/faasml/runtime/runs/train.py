"""``TrainRun``: one configuration trained to its target loss, re-planned online.

The adaptive scheduler (CE-scaling Algorithm 2) re-plans after every epoch; a re-plan is applied
with a delayed restart: the new functions start while the current epoch runs and take over at
its end. A run with a target loss that ends without reaching it ends ``target-missed``, never
``finished``.

Live re-calibration: after epochs 2, 4, 8, … (doubling, so that its cost stays a vanishing
share of a run of short epochs) the epochs run so far correct the model (``Calibration``), the
rest of the run is re-predicted from them, and where the running allocation's epoch moved by
more than δ the scheduler prices its choices and its guard with the corrected model.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import TYPE_CHECKING

from faasml.exceptions import InfeasibleConstraintError
from faasml.models.calibration import REPLAN_DELTA, Calibration, moved
from faasml.models.space import evaluate_allocation
from faasml.runtime.coordinator import Coordinator, TrialState
from faasml.runtime.coordinator.estimates import coordinator_seconds
from faasml.runtime.coordinator.ranking import diverged_at, loss_of, metric_names, metric_value
from faasml.runtime.profile.measure import roomy_memory_mb
from faasml.runtime.record.records import (
    AllocationChange,
    Best,
    Estimate,
    PlanRecord,
    Reprediction,
    StageRecord,
    Target,
)
from faasml.runtime.runs.base import BaseRun
from faasml.runtime.runs.stage_pricing import stage_estimate
from faasml.types import Allocation, Constraint

if TYPE_CHECKING:
    from faasml.planners.adaptive import AdaptiveScheduler

FIRST_RECALIBRATION_EPOCH = 2
"""The first epoch after which the run re-calibrates (the first on an allocation may hold its
cold start); then after every doubling of the epochs run."""


class TrainRun(BaseRun):
    """One configuration trained to the target loss (or max epochs), re-planned online."""

    kind = "train"
    delta = REPLAN_DELTA
    _sample_s = 0.0
    """Seconds the sample run of the offline estimate took (of a deadline, as profiling)."""
    _expected = 0
    """The epochs expected to the target loss: the offline estimate, then the online fit's."""

    def plan(self) -> PlanRecord:
        from faasml.planners.adaptive import AdaptiveScheduler
        from faasml.planners.training import plan_training

        self.measured()
        training = self.job.training
        expected = self._expected_epochs()
        constraint = self.planning_constraint()
        try:
            static = plan_training(
                self.workload, self.planner_catalog(), constraint, epochs=expected
            )
        except InfeasibleConstraintError as err:
            raise self.refused(err) from None
        stage = StageRecord(
            index=1,
            trials=1,
            epochs=expected,
            allocation=static.choice.allocation,
            epoch_time_s=static.choice.epoch_time_s,
            epoch_cost_usd=static.choice.epoch_cost_usd,
            time_s=static.time_s,
            cost_usd=static.cost_usd,
        )
        plan = PlanRecord("static", [stage], static.time_s, static.cost_usd)
        if training.target_loss is not None:
            scheduler = AdaptiveScheduler(
                dataclasses.replace(self.workload, epochs=training.max_epochs),
                self.plan_catalog,
                constraint,
                training.target_loss,
                offline_epochs=expected,
            )
            start = scheduler.start()
            table = evaluate_allocation(self.workload, self.plan_catalog, start)
            stage.allocation = start
            stage.epoch_time_s = float(table.time_s[0])
            stage.epoch_cost_usd = float(table.cost_usd[0])
            plan.planner = "adaptive"
        # The run's prediction: a cold start unless the probe left a function of this size
        # warm, then the epochs it expects to run (slower where the machine is shared:
        # contention); max_epochs is their cap.
        chosen = stage.allocation
        warm = self._probe_warm().get(chosen.memory_mb, 0)
        stage.time_s, stage.cost_usd = stage_estimate(
            self.workload, self.plan_catalog, chosen, 1, expected, warm
        )
        stage.predicted = Estimate(stage.time_s, stage.cost_usd)
        plan.time_s, plan.cost_usd = stage.time_s, stage.cost_usd
        self.record.plan = plan
        self.record.allocation = chosen
        self.record.allocations = [AllocationChange(1, chosen)]
        self.trials = [TrialState(0, {})]
        self.save()
        return plan

    def _expected_epochs(self) -> int:
        """The epochs the run plans and prices (``expected_epochs``: the offline estimate to
        the target loss from a sample run, at most ``max_epochs``); the line says how found."""
        from faasml.runtime.runs.expected_epochs import expected_epochs

        # The probe's largest size, where its function is still warm.
        memory = max((m for m, _ in self.profile.compute_points), default=0) if self.profile else 0
        memory = memory or roomy_memory_mb(self.catalog)
        found = expected_epochs(
            self.job, self.catalog, self.platform(), memory, (self.train, self.test), self.meter
        )
        self._sample_s = found.seconds
        if found.line:
            self.event(found.line)
        return found.epochs

    def planning_constraint(self) -> Constraint:
        """The constraint less what measuring the job took, the sample run included."""
        constraint = super().planning_constraint()
        if constraint.deadline_s is None or not self._sample_s:
            return constraint
        left = max(constraint.deadline_s - self._sample_s, 1e-3)  # the planner refuses, if so
        return dataclasses.replace(constraint, deadline_s=left)

    def _drive(self, coordinator: Coordinator) -> None:
        plan = self.record.plan if self.record.plan is not None else self.plan()
        # A loss that turns NaN or infinite ends the run: no epoch after it is trained or billed.
        coordinator.options = dataclasses.replace(coordinator.options, stop_diverged=True)
        try:
            self._train(coordinator)
        finally:  # the run's one stage, as measured (the report sets it beside the plan)
            plan.stages[0].measured = Estimate(self._elapsed(), self._run_usd())

    def _allocation(self) -> Allocation:
        """The allocation the run trains on now (the plan's first, until it switches)."""
        if self.record.allocation is not None:
            return self.record.allocation
        assert self.record.plan is not None  # the run follows one
        return self.record.plan.stages[0].allocation

    def _run_usd(self) -> float:
        """What the run has billed so far, less measuring the job (the plan's bill)."""
        return self.meter.total_usd - self.meter.by_kind().get("profiling", 0.0)

    def _train(self, coordinator: Coordinator) -> None:
        training = self.job.training
        trial = self.trials[0]
        if trial.status == "diverged":  # resumed: a NaN model is trained no further
            self._diverged(trial)
            return
        scheduler = self._scheduler(trial)
        pending: tuple[int, Allocation] | None = None
        # What the run was planned with: each re-calibration corrects these afresh.
        self._planned = (self.workload, self.plan_catalog)
        self._gaps: list[float] = []  # the run's own time between two epochs' segments
        ended: float | None = None
        while trial.epochs_done < training.max_epochs and trial.status != "failed":
            allocation = self._allocation()
            if pending is not None and pending[0] <= trial.epochs_done + 1:
                allocation = pending[1]
                pending = None
                self.record.allocation = allocation
                self.record.allocations.append(AllocationChange(trial.epochs_done + 1, allocation))
                self.event(f"epoch {trial.epochs_done + 1}: switched to {allocation}")
            # Without a scheduler nothing is decided between epochs: short ones may share a
            # segment (the coordinator chooses); with one, each epoch ends a segment.
            until = training.max_epochs if scheduler is None else trial.epochs_done + 1
            if ended is not None:
                self._gaps.append(time.monotonic() - ended)
            coordinator.run([trial], allocation, until)
            ended = time.monotonic()
            if trial.status == "diverged":
                self._diverged(trial)
                return
            if coordinator.stop_reason or trial.status == "failed":
                return
            if scheduler is None:
                continue
            record = trial.last
            epoch = trial.epochs_done
            if metric_value(record, "loss") is None:  # nothing to compare with the target
                self._no_loss(trial)
                return
            if epoch >= FIRST_RECALIBRATION_EPOCH and epoch & (epoch - 1) == 0:
                following = pending[1] if pending is not None else allocation
                self._recalibrate(trial, coordinator, scheduler, following)
            decision = scheduler.observe(
                trial.epochs_done, loss_of(record), self.meter.total_usd, coordinator.now()
            )
            if decision.prediction is not None:  # the online fit's epochs to the target
                self._expected = decision.prediction.whole
            if decision.decision.value == "stop":
                self.event(f"epoch {trial.epochs_done}: stop: {decision.reason}")
                break
            if decision.decision.value == "rescale" and decision.allocation != allocation:
                self.event(
                    f"epoch {trial.epochs_done}: re-plan to {decision.allocation} from epoch "
                    f"{decision.effective_epoch} ({decision.reason}); new functions start now"
                )
                coordinator.prewarm(decision.allocation)
                pending = (decision.effective_epoch, decision.allocation)
        if trial.status != "failed":
            self._finish(trial)

    def _scheduler(self, trial: TrialState) -> AdaptiveScheduler | None:
        """The adaptive scheduler of a run with a target loss (None without one), told what a
        resumed run already saw."""
        training = self.job.training
        if training.target_loss is None:
            return None
        from faasml.planners.adaptive import AdaptiveScheduler

        planned = self.record.plan
        self._expected = planned.stages[0].epochs if planned else training.max_epochs
        scheduler = AdaptiveScheduler(
            dataclasses.replace(self.workload, epochs=training.max_epochs),
            self.plan_catalog,
            self.planning_constraint(),
            training.target_loss,
            offline_epochs=self._expected,
        )
        scheduler.start()
        for record in trial.history:  # replay what a resumed run already saw
            scheduler.observe(record["epoch"], loss_of(record), record["spent_usd"], record["t_s"])
        return scheduler

    def _finish(self, trial: TrialState) -> None:
        """The trial trained to its end: done, the target reached or missed, the best."""
        training = self.job.training
        trial.status = "done"
        loss = loss_of(trial.last) if trial.history else float("inf")
        if training.target_loss is not None:
            reached = loss <= training.target_loss
            self.record.target = Target(training.target_loss, reached, loss)
            if not reached:
                self.record.outcome = "target-missed"
                self.event(
                    f"target loss {training.target_loss:g} not reached: the last validation "
                    f"loss is {loss:.4g} after {trial.epochs_done} epoch(s)"
                )
        self.record.best = Best(
            trial=0,
            config={},
            metric="loss",
            val_loss=trial.last.get("val_loss"),
            val_accuracy=trial.last.get("val_accuracy"),
            checkpoint=trial.checkpoint,
        )

    def _no_loss(self, trial: TrialState) -> None:
        """A training loop reported no loss while the run has a target loss to reach: the
        run fails at once, saying so, rather than pay for epochs it cannot judge."""
        self.record.status = "failed"
        self.record.best = None
        names = ", ".join(metric_names(trial.last)) or "nothing"
        self.record.stop_reason = (
            f"epoch {trial.epochs_done} reported no 'loss' (it reported: {names}), but "
            "target_loss is compared with it: report it, ctx.report({'loss': ...})"
        )
        self.event(self.record.stop_reason)

    def _diverged(self, trial: TrialState) -> None:
        """The trial's loss or metric went NaN or infinite: the run failed, with the epoch and
        the value as its reason (the record's last event), and has no best."""
        found = diverged_at(trial.history)
        epoch, why = found if found is not None else (trial.diverged_epoch, "NaN or infinite")
        self.record.status = "failed"
        self.record.best = None
        self.event(f"diverged at epoch {epoch} ({why})")

    def _recalibrate(
        self,
        trial: TrialState,
        coordinator: Coordinator,
        scheduler: AdaptiveScheduler,
        allocation: Allocation,
    ) -> None:
        """Correct the model with every epoch run so far, re-predict the rest of the run on
        ``allocation`` (the next epoch's), and where its epoch moved by more than δ give the
        scheduler the corrected prices. The rest: the epochs left to those expected to reach
        the target (the online fit's, else the offline estimate; at most ``max_epochs``, at
        least one) on warm functions (``stage_estimate``), and between two of them the run's
        own time (its decision, the record) as measured so far."""
        training = self.job.training
        epoch = trial.epochs_done
        if epoch >= training.max_epochs:
            return
        # The epochs expected to the target (the last estimate), at least one more.
        left = max(1, min(training.max_epochs, self._expected) - epoch)
        base_workload, base_catalog = self._planned
        calibration = Calibration()
        calibration.observe([trial.history], range(1, epoch + 1), base_workload, base_catalog)
        self._check_profile([trial.history], range(1, epoch + 1))
        self.record.calibration = calibration
        workload, catalog = calibration.recalibrated(base_workload, base_catalog)
        between = coordinator_seconds(
            coordinator.commits_s, coordinator.launches_s, coordinator.options.poll_s
        )
        self.record.coordinator_s = between
        platform = dataclasses.replace(catalog.platform, coordinator_s=between)
        catalog = dataclasses.replace(catalog, platform=platform)
        gap = statistics.mean(self._gaps) if self._gaps else 0.0
        rest_s, rest_usd = stage_estimate(workload, catalog, allocation, 1, left, allocation.n)
        rest_s += gap * left
        now = self._elapsed()
        spent = self._run_usd()
        plan = self.record.plan
        assert plan is not None  # the run follows one
        plan.stages[0].repredicted = Estimate(now + rest_s, spent + rest_usd)
        plan.repredictions.append(Reprediction(epoch, now, spent, left, rest_s, rest_usd, gap))
        old = evaluate_allocation(self.workload, self.plan_catalog, allocation)
        new = evaluate_allocation(workload, catalog, allocation)
        self.workload, self.plan_catalog = workload, catalog
        if len(old) == 0 or len(new) == 0:
            return
        before = (float(old.time_s[0]), float(old.cost_usd[0]))
        after = (float(new.time_s[0]), float(new.cost_usd[0]))
        if not moved(before, after, self.delta):
            return
        scheduler.reprice(dataclasses.replace(workload, epochs=training.max_epochs), catalog)
        self.event(
            f"after epoch {epoch}: an epoch on {allocation} measured at {after[0]:.3g} s and "
            f"${after[1]:.3g} (priced {before[0]:.3g} s, ${before[1]:.3g}); the rest "
            f"({left} epochs) re-predicted at {rest_s:.1f} s and ${rest_usd:.6f}, and the "
            "scheduler re-priced"
        )
