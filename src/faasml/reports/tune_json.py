"""The documented JSON form of tuning plans and simulations (docs/tuning.md, "JSON output")."""

from __future__ import annotations

from typing import Any

from faasml.planners.tuning import TuningPlan
from faasml.reports.plan_json import JSON_FORMAT, allocation_dict, breakdown_dict, constraint_dict
from faasml.sim.tuning import TuneSimulation
from faasml.types import Objective, StagePlan, TunePlan


def stage_dict(stage: StagePlan, plan: TunePlan) -> dict[str, Any]:
    budget = plan.constraint.budget_usd
    return {
        "index": stage.index,
        "trials": stage.trials,
        "epochs": stage.epochs,
        "allocation": allocation_dict(stage.allocation),
        "epoch": breakdown_dict(stage.epoch),
        "waves": stage.waves,
        "time_s": stage.time_s,
        "cost_usd": stage.cost_usd,
        "share_of_cost": stage.cost_usd / plan.cost_usd if plan.cost_usd else 0.0,
        "share_of_budget": None if budget is None else stage.cost_usd / budget,
    }


def tune_plan_dict(plan: TunePlan) -> dict[str, Any]:
    """A TunePlan as plain JSON-ready data."""
    return {
        "format": JSON_FORMAT,
        "kind": "tune-plan",
        "planner": plan.planner,
        "workload": plan.workload,
        "catalog": plan.catalog,
        "constraint": constraint_dict(plan.constraint),
        "time_s": plan.time_s,
        "cost_usd": plan.cost_usd,
        "planning_s": plan.planning_s,
        "setup_s": plan.setup_s,
        "candidates": plan.candidates,
        "optimality": optimality_dict(plan),
        "stages": [stage_dict(stage, plan) for stage in plan.stages],
    }


def optimality_dict(plan: TunePlan) -> dict[str, Any] | None:
    """The planner's certificate, or None for a heuristic that proves nothing."""
    found = plan.optimality if isinstance(plan, TuningPlan) else None
    if found is None:
        return None
    return {
        "proven_optimal": found.proven_optimal,
        "gap": found.gap,
        "lower_bound": found.lower_bound,
        "method": found.method,
    }


def objective_value(plan: TunePlan) -> float:
    """What the plan's constraint minimises: time or cost."""
    return plan.time_s if plan.constraint.goal is Objective.MIN_TIME else plan.cost_usd


def saving(plan: TunePlan, baseline: TunePlan | None) -> float | None:
    """Fraction of the baseline's objective the plan saves (0.3 = 30 % less), or None."""
    if baseline is None:
        return None
    reference = objective_value(baseline)
    return (reference - objective_value(plan)) / reference if reference else None


def comparison_dict(plan: TunePlan, others: dict[str, TunePlan | str]) -> dict[str, Any]:
    """The chosen plan, every other planner's totals (or why it found none) and the savings."""
    result = tune_plan_dict(plan)
    rows: dict[str, Any] = {}
    for name, other in others.items():
        if isinstance(other, str):
            rows[name] = {"infeasible": other}
        else:
            rows[name] = {
                "time_s": other.time_s,
                "cost_usd": other.cost_usd,
                "planning_s": other.planning_s,
                "saving": saving(plan, other),
            }
    result["compared"] = rows
    return result


def simulation_fields(run: TuneSimulation | Any) -> dict[str, Any]:
    """What every simulated tuning run's JSON says of it (a replayed plan's or a real run's on
    the simulated platform): its seed and noise, time and cost, their errors, the verdict."""
    return {
        "seed": run.seed,
        "noise": run.noise,
        "cold_start_noise": run.cold_start_noise,
        "time_s": run.time_s,
        "cost_usd": run.cost_usd,
        "time_error": run.time_error,
        "cost_error": run.cost_error,
        "within_constraint": run.within_constraint,
    }


def tune_simulation_dict(run: TuneSimulation) -> dict[str, Any]:
    """A simulated run beside its prediction."""
    return {
        "format": JSON_FORMAT,
        "kind": "tune-simulation",
        "plan": tune_plan_dict(run.plan),
        **simulation_fields(run),
        "stages": [
            {
                "index": s.index,
                "trials": s.trials,
                "time_s": s.time_s,
                "cost_usd": s.cost_usd,
                "predicted_time_s": s.predicted_time_s,
                "predicted_cost_usd": s.predicted_cost_usd,
                "peak_functions": s.peak_functions,
            }
            for s in run.stages
        ],
    }
