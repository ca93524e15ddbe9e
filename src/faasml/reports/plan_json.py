"""The documented JSON form of plans (docs/cli.md, "JSON output")."""

from __future__ import annotations

from typing import Any

from faasml.types import Allocation, AllocationEstimate, Breakdown, Constraint, TrainPlan

JSON_FORMAT = 1


def fields_dict(record: object, *names: str) -> dict[str, Any]:
    """``{name: record.name}`` for each of ``names``, in that order (the JSON's key order)."""
    return {name: getattr(record, name) for name in names}


NO_SYNC = "none"
"""``storage`` and ``scheme`` of a one-function allocation: nothing is synchronised."""


def allocation_dict(allocation: Allocation) -> dict[str, Any]:
    """``n``, ``memory_mb``, ``storage`` and ``scheme``; one function (n = 1) synchronises
    nothing, so its storage and scheme are ``"none"`` (still strings), as the text says."""
    record = fields_dict(allocation, "n", "memory_mb", "storage", "scheme")
    if allocation.n == 1:
        record.update(storage=NO_SYNC, scheme=NO_SYNC)
    return record


def breakdown_dict(breakdown: Breakdown) -> dict[str, Any]:
    return fields_dict(
        breakdown,
        *("time_s", "cost_usd", "load_s", "compute_s", "sync_s", "invoke_s"),
        *("function_usd", "invocation_usd", "storage_usd"),
    )


def constraint_dict(constraint: Constraint) -> dict[str, Any]:
    return {
        "budget_usd": constraint.budget_usd,
        "deadline_s": constraint.deadline_s,
        "objective": constraint.goal.value,
    }


def estimate_dict(estimate: AllocationEstimate, epochs: int) -> dict[str, Any]:
    return {
        "allocation": allocation_dict(estimate.allocation),
        "epoch": breakdown_dict(estimate.epoch),
        "run_time_s": estimate.run_time_s(epochs),
        "run_cost_usd": estimate.run_cost_usd(epochs),
    }


def train_plan_dict(plan: TrainPlan) -> dict[str, Any]:
    """A TrainPlan as plain JSON-ready data; see docs/cli.md for every field."""
    return {
        "format": JSON_FORMAT,
        "kind": "train-plan",
        "workload": plan.workload,
        "catalog": plan.catalog,
        "constraint": constraint_dict(plan.constraint),
        "epochs": plan.epochs,
        "allocation": allocation_dict(plan.choice.allocation),
        "epoch": breakdown_dict(plan.choice.epoch),
        "startup_s": plan.startup_s,
        "total": breakdown_dict(plan.total),
        "runners_up": [estimate_dict(e, plan.epochs) for e in plan.runners_up],
        "space": {"evaluated": plan.space_size, "frontier": plan.frontier_size},
    }
