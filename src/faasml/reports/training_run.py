"""The documented JSON form of simulated training runs (docs/adaptive.md, "JSON output")."""

from __future__ import annotations

from typing import Any

from faasml.reports.plan_json import JSON_FORMAT, allocation_dict, constraint_dict, fields_dict
from faasml.sim.training import EpochRecord, TrainingRun


def epoch_record_dict(record: EpochRecord) -> dict[str, Any]:
    decision = record.decision
    prediction = decision.prediction
    switch = decision.switch
    return {
        "epoch": record.epoch,
        "loss": record.loss,
        "allocation": allocation_dict(record.allocation),
        "elapsed_s": record.elapsed_s,
        "spent_usd": record.spent_usd,
        "switched": record.switched,
        "decision": decision.decision.value,
        "reason": decision.reason,
        "predicted_total_epochs": decision.predicted_total_epochs,
        "prediction": None
        if prediction is None
        else {"epochs": prediction.epochs, "low": prediction.low, "high": _finite(prediction.high)},
        "fit_family": decision.fit_family,
        "next_allocation": allocation_dict(decision.allocation),
        "effective_epoch": decision.effective_epoch,
        "switch": None
        if switch is None
        else fields_dict(
            switch,
            *("total_s", "hidden_s", "visible_s", "cost_usd"),
            *("delayed", "mid_epoch", "epoch_s", "epoch_usd"),
        ),
    }


def training_run_dict(run: TrainingRun) -> dict[str, Any]:
    """A TrainingRun as plain JSON-ready data."""
    return {
        "format": JSON_FORMAT,
        "kind": "train-simulation",
        "policy": run.policy,
        "workload": run.workload,
        "catalog": run.catalog,
        "constraint": constraint_dict(run.constraint),
        "target_loss": run.target_loss,
        "offline_epochs": run.offline_epochs,
        "true_epochs": run.true_epochs,
        "start": allocation_dict(run.start),
        "reached": run.reached,
        "violated": run.violated,
        "stop_reason": run.stop_reason,
        "time_s": run.time_s,
        "cost_usd": run.cost_usd,
        "restarts": run.restarts,
        "hidden_switch_s": run.hidden_switch_s,
        "visible_switch_s": run.visible_switch_s,
        "timeline": [epoch_record_dict(r) for r in run.records],
    }


def _finite(value: float) -> float | None:
    return value if value != float("inf") else None
