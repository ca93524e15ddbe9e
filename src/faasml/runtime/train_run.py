"""``TrainRun``: one configuration trained to its target loss, re-planned online.

The adaptive scheduler (CE-scaling Algorithm 2) re-plans after every epoch; a re-plan is applied
with a delayed restart: the new functions start while the current epoch runs and take over at
its end. A run with a target loss that ends without reaching it ends ``target-missed``, never
``finished``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from faasml.models.space import evaluate_allocation
from faasml.runtime.coordinator import Coordinator, TrialState
from faasml.runtime.run_base import BaseRun
from faasml.runtime.stage_pricing import stage_estimate
from faasml.types import Allocation


class TrainRun(BaseRun):
    """One configuration trained to the target loss (or max epochs), re-planned online."""

    kind = "train"

    def plan(self) -> dict[str, Any]:
        from faasml.planners.adaptive import AdaptiveScheduler
        from faasml.planners.training import plan_training

        self.measured()
        training = self.job.training
        constraint = self.planning_constraint()
        static = plan_training(
            self.workload, self.planner_catalog(), constraint, epochs=training.max_epochs
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
                self.plan_catalog,
                constraint,
                training.target_loss,
            )
            start = scheduler.start()
            table = evaluate_allocation(self.workload, self.plan_catalog, start)
            stage = self.state["plan"]["stages"][0]
            stage["allocation"] = dataclasses.asdict(start)
            stage["epoch_time_s"] = float(table.time_s[0])
            stage["epoch_cost_usd"] = float(table.cost_usd[0])
            self.state["plan"]["planner"] = "adaptive"
        # The run's prediction: a cold start unless the probe left a function of this size
        # warm, then the epochs (slower where the machine is shared: contention).
        stage = self.state["plan"]["stages"][0]
        chosen = Allocation(**stage["allocation"])
        warm = self._probe_warm().get(chosen.memory_mb, 0)
        stage["time_s"], stage["cost_usd"] = stage_estimate(
            self.workload, self.plan_catalog, chosen, 1, training.max_epochs, warm
        )
        self.state["plan"].update(time_s=stage["time_s"], cost_usd=stage["cost_usd"])
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
                self.plan_catalog,
                self.planning_constraint(),
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
            # Without a scheduler nothing is decided between epochs: short ones may share a
            # segment (the coordinator chooses); with one, each epoch ends a segment.
            until = training.max_epochs if scheduler is None else trial.epochs_done + 1
            coordinator.run([trial], allocation, until)
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
        if trial.status == "failed":
            return
        trial.status = "done"
        loss = _loss(trial.last) if trial.history else float("inf")
        if training.target_loss is not None:
            reached = loss <= training.target_loss
            self.state["target"] = {"loss": training.target_loss, "reached": reached, "last": loss}
            if not reached:
                self.state["outcome"] = "target-missed"
                self.event(
                    f"target loss {training.target_loss:g} not reached: the last validation "
                    f"loss is {loss:.4g} after {trial.epochs_done} epoch(s)"
                )
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
