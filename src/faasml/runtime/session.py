"""A run of a job end to end: plan, run through the coordinator, record, resume.

``TuneRun`` drives successive halving (SMLT's task scheduler over CE-scaling's per-stage
allocations): stage i trains its trials on plan.stages[i].allocation, ranks them by the
validation metric and stops the bottom 1 − 1/η. ``TrainRun`` trains one configuration with the
adaptive scheduler (CE-scaling Algorithm 2), applying a re-plan with a delayed restart: the
new functions are started while the current epoch runs and take over at its end. Both write
their state to the run directory after every segment, so ``resume`` continues with nothing lost.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from faasml.catalog import Catalog, load_catalog
from faasml.config import JobSpec
from faasml.exceptions import ConfigError
from faasml.models import evaluate
from faasml.reports.run_dir import RunDir
from faasml.runtime.billing import Meter
from faasml.runtime.coordinator import Coordinator, CoordinatorOptions, TrialFault, TrialState
from faasml.runtime.platform import Platform, open_platform
from faasml.runtime.worker import ModelRecipe
from faasml.sync.stores import open_store
from faasml.types import Allocation, Constraint, Objective
from faasml.workload import Workload, load_workload
from faasml.workloads import Model
from faasml.workloads.data import Dataset

DEFAULT_PROFILE = "lr-higgs"

Progress = Callable[[dict[str, Any]], None]


def job_workload(
    job: JobSpec, train: Dataset, model: Model, batch_size: int | None = None
) -> Workload:
    """The job as the performance model sees it: its real data and model sizes on the compute
    profile named by ``profile:`` (a shipped profile or a file ``faasml profile`` wrote)."""
    base = load_workload(job.profile or DEFAULT_PROFILE)
    return dataclasses.replace(
        base,
        name=job.name,
        dataset_mb=max(train.size_mb, 1e-6),
        samples=len(train),
        model_mb=model.size_mb,
        batch_size=batch_size or job.batch_size,
    )


def constraint_dict(constraint: Constraint) -> dict[str, Any]:
    return {
        "budget_usd": constraint.budget_usd,
        "deadline_s": constraint.deadline_s,
        "objective": constraint.goal.value,
    }


def constraint_from_dict(data: dict[str, Any]) -> Constraint:
    return Constraint(data.get("budget_usd"), data.get("deadline_s"), Objective(data["objective"]))


def _recordable(options: Mapping[str, Any]) -> dict[str, Any]:
    """The platform options a resumed run needs again: plain values, none holding a password
    (a redacted one would only fail on resume)."""
    from faasml._layers import has_password

    return {
        key: value
        for key, value in options.items()
        if isinstance(value, str | int | float | bool)
        and not (isinstance(value, str) and has_password(value))
    }


def stores_catalog(catalog: Catalog, stores: Mapping[str, str | None]) -> Catalog:
    """``catalog`` synchronising only through the job's stores (each must be priced there)."""
    missing = [name for name in stores if name not in catalog.storages]
    if missing:
        raise ConfigError(
            f"the job synchronises through {', '.join(missing)}, but catalog {catalog.name} "
            f"prices no storage of that name; it offers {', '.join(sorted(catalog.storages))} "
            "(name the job's stores after them, or point catalog: at one that prices yours)"
        )
    return catalog.restricted_to(list(stores))


class BaseRun:
    """What tuning and training share: data, platform, stores, meter, coordinator, record."""

    kind = ""

    def __init__(
        self,
        job: JobSpec,
        constraint: Constraint,
        run_dir: str | Path,
        *,
        state: dict[str, Any] | None = None,
        faults: list[TrialFault] | None = None,
        options: CoordinatorOptions | None = None,
        progress: Progress | None = None,
        platform_options: dict[str, Any] | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        self.job = job
        self.constraint = constraint
        self.dir = RunDir(run_dir)
        self.progress = progress
        self.stores = job.sync_stores()
        self.catalog = stores_catalog(catalog or load_catalog(job.catalog), self.stores)
        self.train, self.test = job.dataset.load()
        self.model = job.model.build(self.train.input_shape, self.train.num_classes)
        self.workload = job_workload(job, self.train, self.model)
        self.state: dict[str, Any] = state or {
            "kind": self.kind,
            "job": job.to_dict(redact=True),
            "job_source": job.source,
            "constraint": constraint_dict(constraint),
            "catalog": self.catalog.name,
            "platform": job.platform,
            "platform_options": _recordable(platform_options or {}),
            "status": "planned",
            "trials": [],
            "charges": [],
            "elapsed_s": 0.0,
            "events": [],
        }
        self.meter = Meter.from_list(self.catalog, self.state["charges"])
        self.faults = faults or []
        self.options = options or CoordinatorOptions()
        self.platform_options = platform_options or {}
        self._recipes: dict[int, ModelRecipe] = {}
        self.trials: list[TrialState] = [TrialState.from_dict(t) for t in self.state["trials"]]

    # ------------------------------------------------------------------ pieces

    def recipe(self, trial: TrialState) -> ModelRecipe:
        if trial.trial_id not in self._recipes:
            job = self.job.with_config(trial.config) if trial.config else self.job
            self._recipes[trial.trial_id] = ModelRecipe(
                model=job.model.name,
                model_options=dict(job.model.options),
                input_shape=tuple(self.train.input_shape),
                num_classes=self.train.num_classes,
                optimizer=job.optimizer.name,
                hyperparameters=dict(job.optimizer.hyperparameters),
                batch_size=job.batch_size,
                seed=job.seed,
            )
        return self._recipes[trial.trial_id]

    def predicted_round_s(self, allocation: Allocation) -> float:
        """t'(θ) / k of the performance model (CE-scaling eq. 2) for ``allocation``."""
        table = evaluate(
            self.workload,
            self.catalog,
            [allocation.n],
            [allocation.memory_mb],
            allocation.storage,
            allocation.scheme,
        )
        if len(table) == 0:
            return 0.0
        k = int(self.workload.iterations_per_epoch(allocation.n))
        return float(table.time_s[0]) / max(k, 1)

    def save(self) -> None:
        self.state["trials"] = [t.to_dict() for t in self.trials]
        self.state["charges"] = self.meter.to_list()
        self.dir.write_record(self.state)

    def event(self, text: str) -> None:
        self.state["events"].append({"t_s": round(self._elapsed(), 3), "text": text})

    def _elapsed(self) -> float:
        return float(self.state["elapsed_s"]) + (time.monotonic() - self._started)

    def _open(self) -> tuple[Platform, Coordinator]:
        self._started = time.monotonic()
        objects = open_store(f"embedded://{self.dir.path.resolve() / 'objects'}")
        sync_url = "embedded://" + str(self.dir.sync_dir())
        stores = {name: url for name, url in self.stores.items() if url is not None}
        platform = open_platform(self.job.platform, self.catalog, **self.platform_options)
        coordinator = Coordinator(
            platform,
            self.catalog,
            self.meter,
            objects,
            sync_url,
            self.recipe,
            namespace="run",
            budget_usd=self.constraint.budget_usd,
            options=self.options,
            faults=self.faults,
            on_segment=self._on_segment,
            clock_origin=self._started - float(self.state["elapsed_s"]),
            stores=stores,
        )
        coordinator.predicted_round_s = self.predicted_round_s
        coordinator.set_data(self.train, self.test)
        self.state["enforcement"] = dataclasses.asdict(platform.enforcement)
        return platform, coordinator

    def _on_segment(self, trial: TrialState, segment: object) -> None:
        self.save()
        if self.progress is not None:
            self.progress(self.snapshot())

    def snapshot(self) -> dict[str, Any]:
        alive = [t for t in self.trials if t.status in ("pending", "running", "done")]
        return {
            "stage": self.state.get("stage", 0) + 1,
            "stages": len(self.state.get("plan", {}).get("stages", [])) or 1,
            "alive": len(alive),
            "epochs_done": sum(t.epochs_done for t in self.trials),
            "spent_usd": self.meter.total_usd,
            "budget_usd": self.constraint.budget_usd,
            "elapsed_s": self._elapsed(),
        }

    def execute(self) -> dict[str, Any]:
        """Run (or continue) to the end; returns the final record."""
        platform, coordinator = self._open()
        self.state["status"] = "running"
        try:
            self._drive(coordinator)
            if coordinator.stop_reason:
                self.state["status"] = "stopped"
                self.state["stop_reason"] = coordinator.stop_reason
                self.event(coordinator.stop_reason)
            elif self.state["status"] == "running":
                done = any(t.status == "done" for t in self.trials)
                self.state["status"] = "finished" if done else "failed"
        finally:
            self.state["elapsed_s"] = self._elapsed()
            self.state["cold_starts"] = self.state.get("cold_starts", 0) + platform.cold_starts
            self.state["restarts"] = self.state.get("restarts", 0) + coordinator.restarts
            self.state["segments"] = self.state.get("segments", 0) + coordinator.segments
            coordinator.close()
            platform.close()
            coordinator.objects.close()
            # The parameter store holds only rounds in flight (each segment has its own
            # namespace, a resumed segment starts a new one): nothing in it is needed later.
            shutil.rmtree(self.dir.sync_dir(), ignore_errors=True)
            self.save()
        self.dir.write_outputs(self.state)
        return self.state

    def _drive(self, coordinator: Coordinator) -> None:
        raise NotImplementedError


def _metric_key(metric: str) -> Callable[[TrialState], float]:
    def key(trial: TrialState) -> float:
        last = trial.last
        if metric == "accuracy":
            value = last.get("val_accuracy")
            return -(value if value is not None else -1.0)
        value = last.get("val_loss")
        return float(value if value is not None else last.get("loss", float("inf")))

    return key


class TuneRun(BaseRun):
    """Successive halving over the job's search space with one planned allocation per stage."""

    kind = "tune"

    def plan(self, planner: str = "exact") -> dict[str, Any]:
        from faasml.planners.tuning import SuccessiveHalving, plan_tuning

        tuning = self.job.require_tuning()
        sha = SuccessiveHalving(
            tuning.trials, tuning.reduction_factor, tuning.stages, tuning.epochs_per_stage
        )
        plan = plan_tuning(self.workload, self.catalog, self.constraint, sha, planner)
        stages = [
            {
                "index": s.index,
                "trials": s.trials,
                "epochs": s.epochs,
                "allocation": dataclasses.asdict(s.allocation),
                "epoch_time_s": s.epoch.time_s,
                "epoch_cost_usd": s.epoch.cost_usd,
                "time_s": s.time_s,
                "cost_usd": s.cost_usd,
            }
            for s in plan.stages
        ]
        self.state["plan"] = {
            "planner": planner,
            "stages": stages,
            "time_s": plan.time_s,
            "cost_usd": plan.cost_usd,
            "workload": dataclasses.asdict(self.workload)["name"],
        }
        self.state["stage"] = 0
        self.trials = [TrialState(i, c) for i, c in enumerate(self.job.sample_configs())]
        self.save()
        return self.state["plan"]

    def _drive(self, coordinator: Coordinator) -> None:
        if "plan" not in self.state:
            self.plan()
        stages = self.state["plan"]["stages"]
        metric = self.job.require_tuning().metric
        while self.state["stage"] < len(stages):
            index = self.state["stage"]
            stage = stages[index]
            allocation = Allocation(**stage["allocation"])
            until = sum(s["epochs"] for s in stages[: index + 1])
            alive = [t for t in self.trials if t.status in ("pending", "running", "done")]
            self.event(f"stage {index + 1}: {len(alive)} trials on {allocation}")
            coordinator.run(alive, allocation, until)
            if coordinator.stop_reason:
                return
            ranked = sorted((t for t in alive if t.status == "done"), key=_metric_key(metric))
            if index + 1 < len(stages):
                keep = stages[index + 1]["trials"]
                for trial in ranked[keep:]:
                    trial.status = "pruned"
                self.event(
                    f"stage {index + 1} done: kept trials {[t.trial_id for t in ranked[:keep]]}"
                )
            self.state["stage"] = index + 1
            self.save()
        ranked = sorted((t for t in self.trials if t.status == "done"), key=_metric_key(metric))
        if ranked:
            best = ranked[0]
            self.state["best"] = {
                "trial": best.trial_id,
                "config": best.config,
                "metric": metric,
                "val_loss": best.last.get("val_loss"),
                "val_accuracy": best.last.get("val_accuracy"),
                "checkpoint": best.checkpoint,
            }


class TrainRun(BaseRun):
    """One configuration trained to the target loss (or max epochs), re-planned online."""

    kind = "train"

    def plan(self) -> dict[str, Any]:
        from faasml.planners.adaptive import AdaptiveScheduler
        from faasml.planners.training import plan_training

        training = self.job.training
        static = plan_training(
            self.workload, self.catalog, self.constraint, epochs=training.max_epochs
        )
        allocation = static.choice.allocation
        self.state["plan"] = {
            "planner": "static",
            "stages": [
                {
                    "index": 1,
                    "trials": 1,
                    "epochs": training.max_epochs,
                    "allocation": dataclasses.asdict(allocation),
                    "epoch_time_s": static.choice.epoch_time_s,
                    "epoch_cost_usd": static.choice.epoch_cost_usd,
                    "time_s": static.time_s,
                    "cost_usd": static.cost_usd,
                }
            ],
            "time_s": static.time_s,
            "cost_usd": static.cost_usd,
        }
        if training.target_loss is not None:
            scheduler = AdaptiveScheduler(
                dataclasses.replace(self.workload, epochs=training.max_epochs),
                self.catalog,
                self.constraint,
                training.target_loss,
            )
            start = scheduler.start()
            table = evaluate(
                self.workload,
                self.catalog,
                [start.n],
                [start.memory_mb],
                start.storage,
                start.scheme,
            )
            epochs = training.max_epochs
            stage = self.state["plan"]["stages"][0]
            stage["allocation"] = dataclasses.asdict(start)
            stage["epoch_time_s"] = float(table.time_s[0])
            stage["epoch_cost_usd"] = float(table.cost_usd[0])
            stage["time_s"] = float(table.startup_s[0]) + epochs * float(table.time_s[0])
            stage["cost_usd"] = float(table.startup_usd[0]) + epochs * float(table.cost_usd[0])
            self.state["plan"].update(
                planner="adaptive", time_s=stage["time_s"], cost_usd=stage["cost_usd"]
            )
        self.state["allocation"] = self.state["plan"]["stages"][0]["allocation"]
        self.state["allocations"] = [{"epoch": 1, **self.state["allocation"]}]
        self.trials = [TrialState(0, {})]
        self.save()
        return self.state["plan"]

    def _drive(self, coordinator: Coordinator) -> None:
        if "plan" not in self.state:
            self.plan()
        training = self.job.training
        trial = self.trials[0]
        scheduler = None
        if training.target_loss is not None:
            from faasml.planners.adaptive import AdaptiveScheduler

            scheduler = AdaptiveScheduler(
                dataclasses.replace(self.workload, epochs=training.max_epochs),
                self.catalog,
                self.constraint,
                training.target_loss,
            )
            scheduler.start()
            for record in trial.history:  # replay what a resumed run already saw
                scheduler.observe(
                    record["epoch"], _loss(record), record["spent_usd"], record["t_s"]
                )
        pending: tuple[int, Allocation] | None = None
        while trial.epochs_done < training.max_epochs and trial.status != "failed":
            allocation = Allocation(**self.state["allocation"])
            if pending is not None and pending[0] <= trial.epochs_done + 1:
                allocation = pending[1]
                pending = None
                self.state["allocation"] = dataclasses.asdict(allocation)
                self.state["allocations"].append(
                    {"epoch": trial.epochs_done + 1, **self.state["allocation"]}
                )
                self.event(f"epoch {trial.epochs_done + 1}: switched to {allocation}")
            coordinator.run([trial], allocation, trial.epochs_done + 1)
            if coordinator.stop_reason or trial.status == "failed":
                return
            if scheduler is None:
                continue
            record = trial.last
            decision = scheduler.observe(
                trial.epochs_done, _loss(record), self.meter.total_usd, coordinator.now()
            )
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
        trial.status = "done"
        self.state["best"] = {
            "trial": 0,
            "config": {},
            "metric": "loss",
            "val_loss": trial.last.get("val_loss"),
            "val_accuracy": trial.last.get("val_accuracy"),
            "checkpoint": trial.checkpoint,
        }


def _loss(record: dict[str, Any]) -> float:
    value = record.get("val_loss")
    return float(value if value is not None else record["loss"])


def resume_run(
    run_dir: str | Path, *, constraint: Constraint | None = None, **kwargs: Any
) -> BaseRun:
    """Reopen an interrupted run from its record; ``execute()`` continues it. A new
    ``constraint`` replaces the recorded one (e.g. a larger budget after a budget stop)."""
    from faasml.config import load_job

    folder = RunDir(run_dir)
    state = folder.read_record()
    if state.get("status") in ("finished",):
        raise ConfigError(f"the run in {run_dir} has finished; nothing to resume")
    source = state.get("job_source")
    job = (
        load_job(source) if source and Path(source).exists() else JobSpec.from_mapping(state["job"])
    )
    if constraint is None:
        constraint = constraint_from_dict(state["constraint"])
    else:
        state["constraint"] = constraint_dict(constraint)
    # The platform it ran on, which the command line may have chosen (--platform, --address).
    job = dataclasses.replace(job, platform=state.get("platform", job.platform))
    kwargs.setdefault("platform_options", state.get("platform_options") or {})
    cls = TuneRun if state["kind"] == "tune" else TrainRun
    state.pop("stop_reason", None)  # the run goes on: a reason it stopped is history now
    for trial in state["trials"]:
        if trial["status"] in ("running", "stopped"):  # stopped by the run, not finished
            trial["status"] = "pending"
    return cls(job, constraint, run_dir, state=state, **kwargs)
