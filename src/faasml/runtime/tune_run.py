"""``TuneRun``: successive halving for real, one planned allocation per stage, re-calibrated.

SMLT's task scheduler over CE-scaling's per-stage allocations: stage i trains its trials on
plan.stages[i].allocation, ranks them by the validation metric and stops the bottom 1 − 1/η.
After every stage the measured epochs re-calibrate the model (``runtime.calibration``): the
remaining stages are re-predicted on their planned allocations and, when that prediction moves
by more than δ, re-planned within what is left of the budget or deadline. The record keeps,
per stage, the prediction before the run, the re-prediction and the measurement.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from faasml.exceptions import InfeasibleConstraintError
from faasml.runtime.calibration import REPLAN_DELTA, Calibration, moved, trial_factors
from faasml.runtime.config_cost import factor, mean_factor
from faasml.runtime.coordinator import Coordinator, Prewarm, TrialState
from faasml.runtime.estimates import coordinator_seconds
from faasml.runtime.profile_record import JobProfile
from faasml.runtime.ranking import diverged_line, is_diverged, ranked
from faasml.runtime.run_base import BaseRun
from faasml.runtime.stage_pricing import keep_warm, stage_estimates, warm_after, warm_pool
from faasml.types import Allocation, Constraint


def _stage_dict(stage: Any) -> dict[str, Any]:
    return {
        "index": stage.index,
        "trials": stage.trials,
        "epochs": stage.epochs,
        "allocation": dataclasses.asdict(stage.allocation),
        "epoch_time_s": stage.epoch.time_s,
        "epoch_cost_usd": stage.epoch.cost_usd,
        "time_s": stage.time_s,
        "cost_usd": stage.cost_usd,
    }


def _run_time(stage: Mapping[str, Any]) -> float:
    """The run's prediction of a stage as last (re-)planned (its re-calibration's reference)."""
    return float(stage.get("replanned_time_s", stage["predicted_time_s"]))


def _run_cost(stage: Mapping[str, Any]) -> float:
    return float(stage.get("replanned_cost_usd", stage["predicted_cost_usd"]))


class TuneRun(BaseRun):
    """Successive halving over the job's search space with one planned allocation per stage."""

    kind = "tune"
    delta = REPLAN_DELTA
    prewarm = True
    """Start the next stage's functions during each stage's last wave (off: only to measure
    what that saves, ``bench_overhead.py --compare-prewarm``)."""
    _prewarmed: Mapping[int, int] = MappingProxyType({})
    """Functions (memory MB -> count) started during the last stage for the next: a re-plan
    counts them warm, so it does not move the next stage off them without reason."""

    def _trained_what(self) -> str:
        return f"{self.job.require_tuning().trials} trials drawn train"

    def _compute_factor(self, profile: JobProfile) -> float:
        """The sampled trials' mean cost over the search space's (``config_cost``): the first
        stage trains them all; the stages after, survivors not known yet, are priced at the
        same mean until re-calibration measures the ones kept."""
        return mean_factor(self.job.sample_configs(), profile.config_costs)

    def _first_stage_factors(self) -> list[float] | None:
        """Each drawn trial's cost over their mean (``config_cost``), in the order the first
        stage starts them; None where the probe timed one configuration or all cost alike."""
        if self.profile is None or not self.profile.config_costs:
            return None
        costs = [factor(c, self.profile.config_costs) for c in self.job.sample_configs()]
        mean = sum(costs) / len(costs) if costs else 0.0
        if mean <= 0 or max(costs) - min(costs) < 0.005 * mean:
            return None
        return [c / mean for c in costs]

    def _estimates(
        self, stages: list[dict[str, Any]], trials_of: list[dict[str, Any]] | None = None
    ) -> list[tuple[float, float]]:
        """Every stage's time and cost from the functions the probe left warm, each stage's
        trials priced by their cost factors where known (``trials_of``: the stages that
        hold them, ``stages`` by default)."""
        known = trials_of if trials_of is not None else stages
        factors = {i: s["trial_factors"] for i, s in enumerate(known) if "trial_factors" in s}
        return stage_estimates(
            self.workload,
            self.plan_catalog,
            stages,
            self._probe_warm(),
            factors=factors,
            write_mbps=self.state.get("partition_write_mbps"),
        )

    def plan(self, planner: str = "exact") -> dict[str, Any]:
        from faasml.planners.tuning import SuccessiveHalving, plan_tuning

        self.measured()
        began = time.monotonic()  # planning is what the run does again between its stages
        tuning = self.job.require_tuning()
        sha = SuccessiveHalving(
            tuning.trials, tuning.reduction_factor, tuning.stages, tuning.epochs_per_stage
        )
        plan = plan_tuning(
            self.workload,
            self.planner_catalog(),
            self.planning_constraint(),
            sha,
            planner,
            warm=self._probe_warm(),
        )
        stages = [_stage_dict(s) for s in plan.stages]
        # The planner prices each stage's cold start; a stage on the memory size of the one
        # before starts on the functions it left warm, so the run's prediction leaves it out.
        stages = keep_warm(
            self.workload, self.plan_catalog, stages, plan.constraint, self._probe_warm()
        )
        first = self._first_stage_factors()
        if first is not None:
            stages[0]["trial_factors"] = first
        # time_s and cost_usd stay the planner's; the run's own stage model (warm functions
        # between stages, prewarming, partition writes) predicts beside them.
        estimates = self._estimates(stages)
        for stage, (time_s, cost_usd) in zip(stages, estimates, strict=True):
            stage["predicted_time_s"], stage["predicted_cost_usd"] = time_s, cost_usd
        self.state["plan"] = {
            "planner": planner,
            "stages": stages,
            "time_s": plan.time_s,
            "cost_usd": plan.cost_usd,
            "predicted_time_s": sum(s["predicted_time_s"] for s in stages),
            "predicted_cost_usd": sum(s["predicted_cost_usd"] for s in stages),
            "workload": "measured" if self.profile is not None else self.workload.name,
        }
        self.state["stage"] = 0
        self.trials = [TrialState(i, c) for i, c in enumerate(self.job.sample_configs())]
        self.save()
        # Between two stages the run ranks, re-calibrates, re-predicts (re-plans where the
        # prediction moved) and writes its record: priced as this plan took (in the time,
        # not billed: no function runs then).
        between = time.monotonic() - began
        self.state["plan"]["between_stages_s"] = between
        self.state["plan"]["predicted_time_s"] += between * (len(stages) - 1)
        self.save()
        return self.state["plan"]

    def _drive(self, coordinator: Coordinator) -> None:
        if "plan" not in self.state:
            self.plan()
        metric = self.job.require_tuning().metric
        # A trial whose loss turns NaN or infinite is trained no further and never kept.
        coordinator.options = dataclasses.replace(coordinator.options, stop_diverged=True)
        while self.state["stage"] < len(self.state["plan"]["stages"]):
            stages = self.state["plan"]["stages"]
            index = self.state["stage"]
            stage = stages[index]
            allocation = Allocation(**stage["allocation"])
            until = sum(s["epochs"] for s in stages[: index + 1])
            alive = [t for t in self.trials if t.status in ("pending", "running", "done")]
            self.event(f"stage {index + 1}: {len(alive)} trials on {allocation}")
            began, spent, mark = self._elapsed(), self.meter.total_usd, len(self.meter.charges)
            then = None
            if self.prewarm and index + 1 < len(stages):  # started in this last wave
                following = stages[index + 1]
                ahead = Allocation(**following["allocation"])
                want = warm_after(self.plan_catalog, self.workload, ahead, following["trials"])
                then = Prewarm(ahead, want)
            coordinator.run(alive, allocation, until, then)
            ended = self._elapsed()
            self._prewarmed = {} if then is None else {then.allocation.memory_mb: then.started}
            if then is not None and then.started:
                self.event(
                    f"stage {index + 2}: {then.started} function(s) of {then.allocation.memory_mb}"
                    f" MB started during stage {index + 1}'s last wave (prewarmed)"
                )
            stage["measured_time_s"] = ended - began
            # The next stage's prewarmed starts are billed during this one, and predicted
            # with the stage they start (``stage_estimates``): measured there too.
            next_usd = 0.0
            if then is not None and then.started:
                next_usd = self.meter.prewarm_usd(then.allocation.memory_mb, since=mark)
                stages[index + 1]["prewarm_usd"] = next_usd
            stage["measured_cost_usd"] = (
                self.meter.total_usd - spent - next_usd + stage.get("prewarm_usd", 0.0)
            )
            self._note_diverged(alive)
            self._record_best(metric)
            if coordinator.stop_reason:
                return
            order = ranked((t for t in alive if t.status == "done"), metric)
            if not order and any(t.status == "diverged" for t in alive):
                self._end_diverged()
                return
            if index + 1 < len(stages):
                keep = stages[index + 1]["trials"]
                for trial in order[keep:]:
                    trial.status = "pruned"
                self.event(
                    f"stage {index + 1} done: kept trials {[t.trial_id for t in order[:keep]]}"
                )
                self._recalibrate(index, alive, coordinator)
            self.state["stage"] = index + 1
            self.save()
            stage["measured_between_s"] = self._elapsed() - ended

    def _note_diverged(self, trials: list[TrialState]) -> None:
        """One event per trial that diverged in the stage just run."""
        for trial in trials:
            if trial.status == "diverged":
                self.event(diverged_line(trial.trial_id, trial.diverged_epoch, trial.history))

    def _end_diverged(self) -> None:
        """Every trial the stage trained diverged: the run ends, its best the best finite
        trial an earlier stage pruned, or none (the run failed)."""
        self.state["stage"] = len(self.state["plan"]["stages"])
        if "best" in self.state:
            self.state["status"] = "finished"
            self.event("every trial left diverged; the best is a finite trial pruned earlier")
        else:
            self.state["status"] = "failed"
            self.event("every trial diverged (NaN or infinite loss): no best configuration")

    def _record_best(self, metric: str) -> None:
        """The best trial so far (also when a budget stop ends the run early); none where
        every trial that trained diverged."""
        order = ranked((t for t in self.trials if t.history), metric)
        if not order or is_diverged(order[0]):
            self.state.pop("best", None)
            return
        best = order[0]
        self.state["best"] = {
            "trial": best.trial_id,
            "config": best.config,
            "metric": metric,
            "val_loss": best.last.get("val_loss"),
            "val_accuracy": best.last.get("val_accuracy"),
            "checkpoint": best.checkpoint,
            "epochs": best.epochs_done,
        }

    # ------------------------------------------------------------ re-calibration

    def _recalibrate(self, index: int, trials: list[TrialState], coordinator: Coordinator) -> None:
        """Correct the model with the epochs of the trials that go on (every epoch they ran so
        far); re-predict the rest, and re-plan it within what is left when the prediction
        moved by more than δ. Only the kept trials: where the search space sizes the model
        (``model.width``), the ones kept are not a sample of it — wider models ranked best
        train slower — and they are what the rest of the run trains."""
        stages = self.state["plan"]["stages"]
        last = sum(s["epochs"] for s in stages[: index + 1])
        kept = [t for t in trials if t.status == "done"] or trials
        calibration = Calibration()
        histories = [t.history for t in kept]
        calibration.observe(histories, range(1, last + 1), self.workload, self.plan_catalog)
        factors = trial_factors(histories, range(1, last + 1), self.workload, self.plan_catalog)
        self.state["calibration"] = calibration.to_dict()
        self._grow_footprint(coordinator)
        self.workload, self.plan_catalog = calibration.recalibrated(
            self.workload, self.plan_catalog
        )
        cold = coordinator.estimator.cold_start_at_one_vcpu()
        if cold is not None:  # the cold starts this run measured, as the catalog states them
            # (they started side by side with the stage's first wave: taken back to one alone)
            allocation = Allocation(**stages[index]["allocation"])
            functions = warm_after(self.plan_catalog, self.workload, allocation, len(trials))
            demand = functions * float(self.plan_catalog.platform.vcpus(allocation.memory_mb))
            cold /= self.plan_catalog.platform.contention(demand)
            platform = dataclasses.replace(self.plan_catalog.platform, cold_start_s=cold)
            self.plan_catalog = dataclasses.replace(self.plan_catalog, platform=platform)
        # The coordinator's own time between a trial's invocations, as this run measured it.
        between = coordinator_seconds(
            coordinator.commits_s, coordinator.launches_s, coordinator.options.poll_s
        )
        self.state["coordinator_s"] = between
        # How fast this run's coordinator wrote the partitions (a later count's are priced so).
        self.state["partition_write_mbps"] = coordinator.partition_write_mbps()
        platform = dataclasses.replace(self.plan_catalog.platform, coordinator_s=between)
        self.plan_catalog = dataclasses.replace(self.plan_catalog, platform=platform)
        rest = stages[index + 1 :]
        if rest:  # the next stage trains the trials kept: priced each as it measured
            rest[0]["trial_factors"] = factors
        before = (sum(_run_time(s) for s in rest), sum(_run_cost(s) for s in rest))
        estimates = self._estimates(stages)[index + 1 :]
        for stage, estimate in zip(rest, estimates, strict=True):
            stage["repredicted_time_s"], stage["repredicted_cost_usd"] = estimate
        after = (
            sum(s["repredicted_time_s"] for s in rest),
            sum(s["repredicted_cost_usd"] for s in rest),
        )
        if not moved(before, after, self.delta):
            return
        self.event(
            f"after stage {index + 1}: the rest re-predicted at {after[0]:.1f} s and "
            f"${after[1]:.6f} (planned {before[0]:.1f} s, ${before[1]:.6f}); re-planning"
        )
        self._replan(index + 1)

    def _grow_footprint(self, coordinator: Coordinator) -> None:
        """A function that ran out of memory raises the footprint the planner respects (the
        trials keep the memory they were moved to in the record, so a resumed run too)."""
        needed = max((t.memory_mb for t in self.trials), default=0)
        if needed > self.workload.memory_needed_mb(1):
            extra = needed - float(self.workload.memory_needed_mb(1))
            self.workload = dataclasses.replace(
                self.workload, runtime_mb=self.workload.runtime_mb + extra
            )

    def _replan(self, start: int) -> None:
        """Plan stages ``start``… again within the budget and deadline left."""
        from faasml.planners.tuning import Stages, plan_tuning

        stages = self.state["plan"]["stages"]
        rest = stages[start:]
        c = self.constraint
        budget = None if c.budget_usd is None else c.budget_usd - self.meter.total_usd
        # The stages re-planned are apart by the run's own work between them (``plan``).
        between = self.state["plan"].get("between_stages_s", 0.0) * (len(rest) - 1)
        deadline = None if c.deadline_s is None else c.deadline_s - self._elapsed() - between
        if (budget is not None and budget <= 0) or (deadline is not None and deadline <= 0):
            self.event("nothing of the constraint is left to re-plan with; the plan stands")
            return
        job = Stages(tuple(s["trials"] for s in rest), tuple(s["epochs"] for s in rest))
        # The stages run so far left their functions warm: the first stage re-planned may
        # start on them without a cold start (the planner knows it).
        warm = warm_pool(self.workload, self.plan_catalog, stages[:start], self._probe_warm())
        for memory, started in self._prewarmed.items():  # started for the stage planned before
            if started:
                warm[memory] = warm.get(memory, 0) + started
        try:
            plan = plan_tuning(
                self.workload,
                self.planner_catalog(),
                Constraint(budget, deadline, c.objective),
                job,
                self.state["plan"]["planner"],
                warm=warm,
            )
        except InfeasibleConstraintError as err:
            self.event(f"re-plan: {err}; the plan stands (the budget guard still holds)")
            return
        fresh_stages = keep_warm(
            self.workload,
            self.plan_catalog,
            [*stages[:start], *(_stage_dict(new) for new in plan.stages)],
            plan.constraint,
            self._probe_warm(),
            start,
        )[start:]
        # The same trials, stage by stage, as the stages they replace.
        estimates = self._estimates([*stages[:start], *fresh_stages], stages)[start:]
        for old, fresh, estimate in zip(rest, fresh_stages, estimates, strict=True):
            fresh["index"] = old["index"]
            for key in ("predicted_time_s", "predicted_cost_usd"):
                fresh[key] = old[key]
            fresh["replanned_time_s"], fresh["replanned_cost_usd"] = estimate
            fresh["repredicted_time_s"], fresh["repredicted_cost_usd"] = estimate
            if fresh["allocation"] != old["allocation"]:
                self.event(
                    f"stage {old['index']} re-planned: {Allocation(**old['allocation'])} -> "
                    f"{Allocation(**fresh['allocation'])}"
                )
            # Already billed; already measured.
            carried = {k: old[k] for k in ("prewarm_usd", "trial_factors") if k in old}
            old.clear()
            old.update(fresh, **carried)
        self.state["plan"]["replans"] = self.state["plan"].get("replans", 0) + 1
