"""``WorkflowRun``: training whose demands change, each phase deployed by a search (SMLT §3.1–3.2,
§5.5–5.6).

A job's ``workflow:`` splits training into phases: the steps of a batch-size schedule (dynamic
batching), the models of a NAS sequence (one trial each, from scratch), or data chunks
(online learning: each phase trains on every sample landed so far, and no function is held
while the next chunk is awaited). Before the first phase a deployment search
(``faasml.search.deployment``) probes real allocations — short billed runs, the bill's
``search`` line — and picks one; at each later phase whose job changed it is re-triggered,
warm-started from the last posterior with fewer probes. On the local platform every segment is
a new invocation, so functions × memory change at the phase boundary without a restart.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np

from faasml.exceptions import ConfigError
from faasml.job import JobSpec
from faasml.job.workflow import WorkflowSpec
from faasml.runtime.coordinator import Coordinator, TrialState
from faasml.runtime.function.worker import ModelRecipe
from faasml.runtime.profile.measure import planning_inputs
from faasml.runtime.record.records import PlanRecord, RunRecord, StageRecord, WorkflowRecord
from faasml.runtime.runs.base import job_workload
from faasml.runtime.runs.train import TrainRun
from faasml.runtime.runs.workflow_driver import PhaseDriver
from faasml.runtime.runs.workflow_phases import Phase, describe, workflow_phases
from faasml.search import SearchBudget
from faasml.search.deployment import DeploymentGoal, DeploymentSearch, DeploymentSpace
from faasml.types import Objective
from faasml.workload import Workload
from faasml.workloads.data import Dataset


class WorkflowRun(TrainRun):
    """A job with a ``workflow:``: phases deployed by a search, re-triggered on change."""

    kind = "train"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        spec = self.job.search_workflow()
        if spec is None:
            raise ConfigError(
                f"job '{self.job.name}' has no workflow section and planner is not 'search'"
            )
        self.spec: WorkflowSpec = spec
        base = {"name": self.job.model.name, **dict(self.job.model.options)}
        self.phases = workflow_phases(
            self.spec, self.job.batch_size, base, len(self.train), self.job.training.max_epochs
        )
        self.current = self.phases[0]
        self._base_params = self.model.num_params
        self._models: dict[int, Any] = {}
        self._driving = False

    # ------------------------------------------------------------------ pieces

    def recipe(self, trial: TrialState) -> ModelRecipe:
        """The current phase's model and batch size (probes included)."""
        phase = self.current
        options = {k: v for k, v in phase.model.items() if k != "name"}
        return ModelRecipe(
            model=str(phase.model["name"]),
            model_options=options,
            input_shape=tuple(self.train.input_shape),
            num_classes=self.train.num_classes,
            optimizer=self.job.optimizer.name,
            hyperparameters=dict(self.job.optimizer.hyperparameters),
            batch_size=phase.batch_size,
            seed=self.job.seed,
        )

    def phase_model(self, phase: Phase) -> Any:
        """The phase's model, built once (a NAS phase's own; its size and parameters)."""
        if phase.index not in self._models:
            from faasml.workloads import create_model

            options = {k: v for k, v in phase.model.items() if k != "name"}
            self._models[phase.index] = create_model(
                str(phase.model["name"]),
                self.train.input_shape,
                self.train.num_classes,
                **options,
            )
        return self._models[phase.index]

    def phase_data(self, phase: Phase) -> Dataset:
        return (
            self.train
            if phase.samples >= len(self.train)
            else self.train.subset(slice(0, phase.samples))
        )

    def phase_workload(self, phase: Phase) -> Workload:
        """The phase as the model sees it: its data, model and batch size on the measured
        profile (a NAS model's computation scaled by its parameters against the profiled one)."""
        model = self.phase_model(phase)
        workload = job_workload(self.job, self.phase_data(phase), model, phase.batch_size)
        if self.profile is None:
            return workload
        measured, _ = planning_inputs(self.profile, workload, self.catalog)
        ratio = model.num_params / max(self._base_params, 1)
        if ratio != 1.0:
            points = tuple((m, s * ratio) for m, s in measured.compute.points)
            growth = measured.model_copies * (model.size_mb - measured.model_mb)
            measured = dataclasses.replace(
                measured,
                compute=dataclasses.replace(measured.compute, points=points),
                model_mb=max(model.size_mb, 1e-6),
                runtime_mb=max(measured.runtime_mb + max(growth, 0.0), 0.0),
            )
        return measured

    def phase_goal(self, phase: Phase, spent_usd: float, spent_s: float) -> DeploymentGoal:
        """The constraint left, shared among the phases left by their epochs."""
        c = self.planning_constraint()
        left = sum(p.epochs for p in self.phases[phase.index :])
        share = phase.epochs / max(left, 1)
        if c.goal is Objective.MIN_TIME:
            limit = None if c.budget_usd is None else max(c.budget_usd - spent_usd, 1e-9) * share
        else:
            limit = None if c.deadline_s is None else max(c.deadline_s - spent_s, 1e-9) * share
        return DeploymentGoal(c.goal, phase.epochs, limit)

    def phase_space(self, phase: Phase) -> DeploymentSpace:
        workload = self.phase_workload(phase)
        options = self.spec.search
        return DeploymentSpace.build(
            workload, self.plan_catalog, max_functions=options.max_functions
        )

    # ------------------------------------------------------------------ plan

    def plan(self) -> PlanRecord:
        """The phases with the model's own choice for each (what the search starts from)."""
        self.measured()
        stages = []
        total_s = total_usd = 0.0
        for phase in self.phases:
            try:
                space = self.phase_space(phase)
            except ConfigError as err:
                raise ConfigError(
                    f"workflow phase {phase.index + 1} ({describe(phase)}) cannot run: {err}"
                ) from None
            goal = self.phase_goal(phase, 0.0, 0.0)
            best = int(np.argmin(space.prior(goal)))
            time_s = float(space.table.startup_s[best] + phase.epochs * space.table.time_s[best])
            cost = float(space.table.startup_usd[best] + phase.epochs * space.table.cost_usd[best])
            total_s, total_usd = total_s + time_s, total_usd + cost
            stages.append(
                StageRecord(
                    index=phase.index + 1,
                    trials=1,
                    epochs=phase.epochs,
                    allocation=space.allocation(best),
                    epoch_time_s=float(space.table.time_s[best]),
                    epoch_cost_usd=float(space.table.cost_usd[best]),
                    time_s=time_s,
                    cost_usd=cost,
                    batch_size=phase.batch_size,
                    samples=phase.samples,
                    model=dict(phase.model),
                )
            )
        search = self.spec.search
        how = "cold" if self.profile is None else "warm"
        if self.profile is not None and search.searcher == "gp-ei":
            how += f", choice {search.choice}"  # the rule applies to a warm GP + EI search
        plan = PlanRecord(f"search ({search.searcher}, {how})", stages, total_s, total_usd)
        self.record.plan = plan
        self.record.workflow = WorkflowRecord(self.spec.kind)
        self.record.allocation = stages[0].allocation
        self.record.allocations = []
        self.trials = [TrialState(t, {}) for t in sorted({p.trial for p in self.phases})]
        self.save()
        return plan

    # ------------------------------------------------------------------ run

    def search_for(
        self,
        phase: Phase,
        last: DeploymentSearch | None,
        space: DeploymentSpace,
        goal: DeploymentGoal,
    ) -> DeploymentSearch:
        """The phase's search (not yet run): the first one, or ``last`` re-triggered (which
        keeps its choice rule, ``workflow.search.choice``)."""
        options = self.spec.search
        budget = SearchBudget(
            max_probes=options.max_probes if last is None else options.retrigger_probes,
            max_usd=options.max_usd,
            ei_threshold=options.ei_threshold,
        )
        warm = self.profile is not None
        costs = space.probe_cost(rounds=options.probe_rounds)
        if last is None:
            return DeploymentSearch(
                space,
                goal,
                searcher=options.searcher,
                budget=budget,
                seed=self.job.seed,
                warm=warm,
                probe_costs=costs,
                choice=options.choice,
                probe_rounds=options.probe_rounds,
            )
        return last.retrigger(
            space, goal, budget=budget, seed=self.job.seed, warm=warm, probe_costs=costs
        )

    def save(self) -> None:
        """The record, with the run's clock up to now while the phases run: a killed run
        resumes on it (online chunks land on it; events stay in order)."""
        if self._driving:
            now = time.monotonic()
            self.record.elapsed_s += now - self._started
            self._started = now
        super().save()

    def _drive(self, coordinator: Coordinator) -> None:
        """The phases in turn (``PhaseDriver``), the record saved with the run's clock."""
        self._driving = True
        try:
            if self.record.plan is None or self.record.workflow is None:
                self.plan()
            flow = self.record.workflow
            assert flow is not None  # planned
            PhaseDriver(self, coordinator, flow).drive()
        finally:
            self._driving = False


def train_workflow(
    job: str | Path | JobSpec,
    *,
    budget_usd: float | None = None,
    deadline_s: float | None = None,
    run_dir: str | Path | None = None,
) -> RunRecord:
    """Run a job with a ``workflow:`` (a file or a ``JobSpec``) within a budget or deadline;
    returns the run's record (``record.workflow.phases`` holds the searches)."""
    from faasml.job import load_job
    from faasml.types import Constraint

    spec = job if isinstance(job, JobSpec) else load_job(job)
    folder = (
        Path(run_dir)
        if run_dir is not None
        else Path("runs") / (f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    )
    flow = WorkflowRun(spec, Constraint(budget_usd, deadline_s), folder)
    flow.plan()
    return flow.execute()
