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
from collections.abc import Mapping
from types import MappingProxyType

from faasml.exceptions import InfeasibleConstraintError
from faasml.models.calibration import REPLAN_DELTA, Calibration, moved, trial_factors
from faasml.models.config_cost import factor, mean_factor
from faasml.runtime.coordinator import Coordinator, Prewarm, TrialState
from faasml.runtime.coordinator.ranking import (
    diverged_line,
    is_diverged,
    metric_names,
    metric_value,
    missing_line,
    ranked,
)
from faasml.runtime.profile.record import JobProfile
from faasml.runtime.record.records import Best, Estimate, PlanRecord, StageRecord
from faasml.runtime.runs.base import BaseRun
from faasml.runtime.runs.events import StageEnd
from faasml.runtime.runs.stage_pricing import keep_warm, stage_estimates, warm_after, warm_pool
from faasml.runtime.runs.tune_draws import (
    Bracket,
    bracket_of,
    brackets,
    draw_bracket,
    stage_batches,
    trials_at_once,
)
from faasml.runtime.runs.tune_replan import (
    Replan,
    grown,
    measured_catalog,
    run_estimate,
    stage_record,
)
from faasml.types import Constraint


class TuneRun(BaseRun):
    """Successive halving over the job's search space with one planned allocation per stage."""

    kind = "tune"
    delta = REPLAN_DELTA
    prewarm = True
    """Start the next stage's functions during each stage's last wave (off: only to measure
    what that saves, ``bench_overhead.py --compare-prewarm``)."""
    search_alg: object = None
    """An Optuna sampler object drawing the trials in place of the job's ``tuning.sampler``
    (the API's ``TuneConfig(search_alg=...)``)."""
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
        first = brackets(self.job)[0].trials
        costs = [factor(c, self.profile.config_costs) for c in self.job.sample_configs(first)]
        mean = sum(costs) / len(costs) if costs else 0.0
        if mean <= 0 or max(costs) - min(costs) < 0.005 * mean:
            return None
        return [c / mean for c in costs]

    def _estimates(
        self, stages: list[StageRecord], trials_of: list[StageRecord] | None = None
    ) -> list[tuple[float, float]]:
        """Every stage's time and cost from the functions the probe left warm, each stage's
        trials priced by their cost factors where known (``trials_of``: the stages that
        hold them, ``stages`` by default)."""
        known = trials_of if trials_of is not None else stages
        factors = {i: s.trial_factors for i, s in enumerate(known) if s.trial_factors is not None}
        return stage_estimates(
            self.workload,
            self.plan_catalog,
            stages,
            self._probe_warm(),
            factors=factors,
            write_mbps=self.record.partition_write_mbps,
        )

    def plan(self, planner: str = "exact") -> PlanRecord:
        from faasml.planners.tuning import plan_tuning

        self.measured()
        began = self.clock.monotonic()  # planning is what the run does again between its stages
        tuning = self.job.require_tuning()
        sha = tuning.plan_job  # one successive halving, or Hyperband's brackets in turn
        try:
            plan = plan_tuning(
                self.workload,
                self.planner_catalog(),
                self.planning_constraint(),
                sha,
                planner,
                warm=self._probe_warm(),
            )
        except InfeasibleConstraintError as err:
            raise self.refused(err) from None
        stages = [stage_record(s) for s in plan.stages]
        # The planner prices each stage's cold start; a stage on the memory size of the one
        # before starts on the functions it left warm, so the run's prediction leaves it out.
        stages = keep_warm(
            self.workload, self.plan_catalog, stages, plan.constraint, self._probe_warm()
        )
        first = self._first_stage_factors()
        if first is not None:
            stages[0].trial_factors = tuple(first)
        # time_s and cost_usd stay the planner's; the run's own stage model (warm functions
        # between stages, prewarming, partition writes) predicts beside them.
        estimates = self._estimates(stages)
        for stage, (time_s, cost_usd) in zip(stages, estimates, strict=True):
            stage.predicted = Estimate(time_s, cost_usd)
        self.record.plan = record = PlanRecord(
            planner=planner,
            stages=stages,
            time_s=plan.time_s,
            cost_usd=plan.cost_usd,
            workload="measured" if self.profile is not None else self.workload.name,
            predicted=Estimate(sum(e[0] for e in estimates), sum(e[1] for e in estimates)),
        )
        self.record.stage = 0
        self.trials = []
        self._draw(brackets(self.job)[0])
        self.save()
        # Between two stages the run ranks, re-calibrates, re-predicts (re-plans where the
        # prediction moved) and writes its record: priced as this plan took (in the time,
        # not billed: no function runs then).
        between = self.clock.monotonic() - began
        record.between_stages_s = between
        assert record.predicted is not None  # set above
        record.predicted = dataclasses.replace(
            record.predicted, time_s=record.predicted.time_s + between * (len(stages) - 1)
        )
        self.save()
        return record

    def _drive(self, coordinator: Coordinator) -> None:
        plan = self.record.plan if self.record.plan is not None else self.plan()
        # A trial whose loss turns NaN or infinite is trained no further and never kept.
        coordinator.options = dataclasses.replace(coordinator.options, stop_diverged=True)
        while self.record.stage < len(plan.stages):
            stages = plan.stages
            index = self.record.stage
            stage = stages[index]
            allocation = stage.allocation
            bracket = bracket_of(self.job, index)
            if len(self.trials) < bracket.first_trial + bracket.trials:
                self._draw(bracket)  # a later bracket starts: drawn from what was measured
            until = self._until(index)
            alive = [
                t
                for t in self.trials[bracket.first_trial : bracket.first_trial + bracket.trials]
                if t.status in ("pending", "running", "done")
            ]
            self.event(f"stage {index + 1}: {len(alive)} trials on {allocation}")
            began, spent, mark = self._elapsed(), self.meter.total_usd, len(self.meter.charges)
            then = None
            if self.prewarm and index + 1 < len(stages):  # started in this last wave
                following = stages[index + 1]
                ahead = following.allocation
                want = warm_after(self.plan_catalog, self.workload, ahead, following.trials)
                then = Prewarm(ahead, want)
            wave = trials_at_once(self.plan_catalog, allocation)  # batches drawn in turn:
            for batch, last in stage_batches(  # a model-based sampler learns within the stage
                self.job, bracket, index, self.trials, alive, wave, self.search_alg, self.event
            ):
                coordinator.run(batch, allocation, until, then if last else None)
                if coordinator.stop_reason:
                    break
            self._send_results()  # every epoch of the stage, before its end
            ended = self._elapsed()
            self._prewarmed = {} if then is None else {then.allocation.memory_mb: then.started}
            if then is not None and then.started:
                self.event(
                    f"stage {index + 2}: {then.started} function(s) of {then.allocation.memory_mb}"
                    f" MB started during stage {index + 1}'s last wave (prewarmed)"
                )
            # The next stage's prewarmed starts are billed during this one, and predicted
            # with the stage they start (``stage_estimates``): measured there too.
            next_usd = 0.0
            if then is not None and then.started:
                next_usd = self.meter.prewarm_usd(then.allocation.memory_mb, since=mark)
                stages[index + 1].prewarm_usd = next_usd
            stage.measured = Estimate(
                ended - began,
                self.meter.total_usd - spent - next_usd + (stage.prewarm_usd or 0.0),
            )
            self._note_diverged(alive)
            self._record_best()
            if coordinator.stop_reason:
                return
            order = self._ranked_stage(alive)
            if self._nothing_ranks(order):
                return
            last_bracket = bracket.first_stage + bracket.stages == len(stages)
            if not order and any(t.status == "diverged" for t in alive) and last_bracket:
                self._end_diverged()
                return
            if bracket.is_last_stage(index) and not last_bracket:
                self.event(f"bracket {bracket.number + 1} done")
                self._recalibrate(index, alive, coordinator)
            elif index + 1 < len(stages):
                keep = stages[index + 1].trials
                for trial in order[keep:]:
                    trial.status = "pruned"
                self.event(
                    f"stage {index + 1} done: kept trials {[t.trial_id for t in order[:keep]]}"
                )
                self._recalibrate(index, alive, coordinator)
            self.record.stage = index + 1
            self.save()
            stages[index].measured_between_s = self._elapsed() - ended
            self._stage_ended(index, alive)

    def _stage_ended(self, index: int, trials: list[TrialState]) -> None:
        """``on_stage_end`` for stage ``index`` (its record written): the trials it kept and
        pruned, and what it cost."""
        assert self.record.plan is not None  # the run follows one
        stage = self.record.plan.stages[index]
        self.events.stage_end(
            StageEnd(
                stage=index + 1,
                stages=len(self.record.plan.stages),
                kept=tuple(t.trial_id for t in trials if t.status == "done"),
                pruned=tuple(t.trial_id for t in trials if t.status == "pruned"),
                stage_usd=stage.measured.cost_usd if stage.measured is not None else 0.0,
                spent_usd=self.meter.total_usd,
                elapsed_s=self._elapsed(),
            )
        )

    def _until(self, index: int) -> int:
        """The epochs a trial of stage ``index`` has trained at its end (from its bracket's
        start: a later bracket's trials start from nothing)."""
        assert self.record.plan is not None  # the run follows one
        first = bracket_of(self.job, index).first_stage
        return sum(s.epochs for s in self.record.plan.stages[first : index + 1])

    def _draw(self, bracket: Bracket) -> None:
        """Bracket ``bracket``'s trials, drawn by the sampler from the trials run so far."""
        configs, how = draw_bracket(self.job, bracket, self.trials, self.search_alg)
        start = len(self.trials)
        self.trials.extend(TrialState(start + i, c) for i, c in enumerate(configs))
        if bracket.number > 0 or bracket.first_stage + bracket.stages < self._stage_count():
            self.event(f"bracket {bracket.number + 1}: {len(configs)} trials {how}")

    def _alive(self) -> int:
        """Trials alive in the bracket under way (the base counts every trial)."""
        if self.record.stage >= self._stage_count():
            return super()._alive()
        bracket = bracket_of(self.job, self.record.stage)
        trials = self.trials[bracket.first_trial : bracket.first_trial + bracket.trials]
        return sum(t.status in ("pending", "running", "done") for t in trials)

    def _stage_count(self) -> int:
        return len(self.record.plan.stages) if self.record.plan is not None else 0

    def _best_lost(self) -> None:
        """The best trial so far failed mid-stage: the best of the rest."""
        self.record.best = None
        self._record_best()

    def _note_diverged(self, trials: list[TrialState]) -> None:
        """One event per trial that diverged in the stage just run."""
        for trial in trials:
            if trial.status == "diverged":
                self.event(diverged_line(trial.trial_id, trial.diverged_epoch, trial.history))

    def _end_diverged(self) -> None:
        """Every trial the stage trained diverged: the run ends, its best the best finite
        trial an earlier stage pruned, or none (the run failed)."""
        assert self.record.plan is not None  # the run follows one
        self.record.stage = len(self.record.plan.stages)
        if self.record.best is not None:
            self.record.status = "finished"
            self.event("every trial left diverged; the best is a finite trial pruned earlier")
        else:
            self.record.status = "failed"
            self.event("every trial diverged (NaN or infinite loss): no best configuration")

    def _ranked_stage(self, alive: list[TrialState]) -> list[TrialState]:
        """The stage's finished trials best first by the job's metric and mode; one event per
        trial that lacks the metric (ranked last, after those that have it) where others
        have it."""
        tuning = self.job.require_tuning()
        done = [t for t in alive if t.status == "done"]
        lacking = [t for t in _finite(done) if metric_value(t.last, tuning.metric) is None]
        if len(lacking) < len(_finite(done)):
            for trial in lacking:
                self.event(missing_line(trial.trial_id, tuning.metric, trial.last))
        return ranked(done, tuning.metric, tuning.mode)

    def _nothing_ranks(self, order: list[TrialState]) -> bool:
        """No trial of the stage reported the job's metric: the run fails now, saying what
        they reported, rather than prune at random and pay for the stages left (Ray Tune
        also stops at a result without its metric)."""
        metric = self.job.require_tuning().metric
        finite = _finite(order)
        if not finite or any(metric_value(t.last, metric) is not None for t in finite):
            return False
        assert self.record.plan is not None  # the run follows one
        names = sorted({name for t in finite for name in metric_names(t.last)})
        self.record.stage = len(self.record.plan.stages)
        self.record.status = "failed"
        self.record.best = None
        self.record.stop_reason = (
            f"no trial reported the metric {metric!r} the run ranks by (they reported: "
            f"{', '.join(names) or 'nothing'}): rank by one of those, TuneConfig(metric=...) "
            "or the job's tuning.metric"
        )
        self.event(self.record.stop_reason)
        return True

    def _record_best(self) -> None:
        """The best trial so far by the job's metric and mode (also when a budget stop ends
        the run early); none where every trial that trained diverged, and never one that
        failed."""
        tuning = self.job.require_tuning()
        metric = tuning.metric
        trained = (t for t in self.trials if t.history and t.status != "failed")
        order = ranked(trained, metric, tuning.mode)
        if not order or is_diverged(order[0]):
            self.record.best = None
            return
        best = order[0]
        self.record.best = Best(
            trial=best.trial_id,
            config=dict(best.config),
            metric=metric,
            val_loss=best.last.get("val_loss"),
            val_accuracy=best.last.get("val_accuracy"),
            checkpoint=best.checkpoint,
            epochs=best.epochs_done,
            mode=tuning.mode,
            value=metric_value(best.last, metric),
        )

    # ------------------------------------------------------------ re-calibration

    def _recalibrate(self, index: int, trials: list[TrialState], coordinator: Coordinator) -> None:
        """Correct the model with the epochs of the trials that go on (every epoch they ran so
        far); re-predict the rest, and re-plan it within what is left when the prediction
        moved by more than δ. Only the kept trials: where the search space sizes the model
        (``model.width``), the ones kept are not a sample of it — wider models ranked best
        train slower — and they are what the rest of the run trains."""
        assert self.record.plan is not None  # the run follows one
        stages = self.record.plan.stages
        last = self._until(index)
        kept = [t for t in trials if t.status == "done"] or trials
        calibration = Calibration()
        histories = [t.history for t in kept]
        calibration.observe(histories, range(1, last + 1), self.workload, self.plan_catalog)
        self._check_profile([t.history for t in trials], range(1, last + 1))  # all drawn
        factors = trial_factors(histories, range(1, last + 1), self.workload, self.plan_catalog)
        self.record.calibration = calibration
        self.workload = grown(self.workload, self.trials)
        self.workload, self.plan_catalog = calibration.recalibrated(
            self.workload, self.plan_catalog
        )
        self.plan_catalog, self.record.coordinator_s = measured_catalog(
            self.plan_catalog, self.workload, coordinator, stages[index].allocation, len(trials)
        )
        # How fast this run's coordinator wrote the partitions (a later count's are priced so).
        self.record.partition_write_mbps = coordinator.partition_write_mbps()
        rest = stages[index + 1 :]
        if rest and bracket_of(self.job, index + 1).first_stage != index + 1:
            rest[0].trial_factors = tuple(factors)  # the trials kept: priced as each measured
        before = run_estimate(rest)
        estimates = self._estimates(stages)[index + 1 :]
        for stage, estimate in zip(rest, estimates, strict=True):
            stage.repredicted = Estimate(*estimate)
        after = (sum(e[0] for e in estimates), sum(e[1] for e in estimates))
        if not moved(before, after, self.delta):
            return
        self.event(
            f"after stage {index + 1}: the rest re-predicted at {after[0]:.1f} s and "
            f"${after[1]:.6f} (planned {before[0]:.1f} s, ${before[1]:.6f}); re-planning"
        )
        self._replan(index + 1, coordinator, ranked(kept, self.job.require_tuning().metric))

    def _replan(self, start: int, coordinator: Coordinator, kept: list[TrialState]) -> None:
        """Plan stages ``start``… again within the budget and deadline left, never onto
        stages the budget guard would refuse (``Replan.guarded``)."""
        from faasml.planners.tuning import Stages

        record = self.record.plan
        assert record is not None  # the run follows one
        stages = record.stages
        rest = stages[start:]
        c = self.constraint
        budget = None if c.budget_usd is None else c.budget_usd - self.meter.total_usd
        # The stages re-planned are apart by the run's own work between them (``plan``).
        between = (record.between_stages_s or 0.0) * (len(rest) - 1)
        deadline = None if c.deadline_s is None else c.deadline_s - self._elapsed() - between
        if (budget is not None and budget <= 0) or (deadline is not None and deadline <= 0):
            self.event("nothing of the constraint is left to re-plan with; the plan stands")
            return
        job = Stages(tuple(s.trials for s in rest), tuple(s.epochs for s in rest))
        # The stages run so far left their functions warm: the first stage re-planned may
        # start on them without a cold start (the planner knows it).
        warm = warm_pool(self.workload, self.plan_catalog, stages[:start], self._probe_warm())
        for memory, started in self._prewarmed.items():  # started for the stage planned before
            if started:
                warm[memory] = warm.get(memory, 0) + started
        replan = Replan(
            self.workload,
            self.plan_catalog,
            self.planner_catalog(),
            record.planner,
            self._probe_warm(),
            stages,
            start,
        )
        constraint = Constraint(budget, deadline, c.objective)
        fresh = replan.guarded(
            constraint,
            (job, warm),
            lambda priced: coordinator.guard_refusal(priced, kept),
            self.event,
        )
        if fresh is None:
            return
        # The same trials, stage by stage, as the stages they replace.
        estimates = self._estimates([*stages[:start], *fresh], stages)[start:]
        replan.adopt(fresh, estimates, self.event)
        record.replans += 1


def _finite(trials: list[TrialState]) -> list[TrialState]:
    """The trials that did not diverge."""
    return [t for t in trials if not is_diverged(t)]
