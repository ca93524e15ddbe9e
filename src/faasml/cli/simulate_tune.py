"""`faasml simulate tune`: plan a tuning job, then run the plan on the simulator.

Given a job file, the job's real tuning run (``TuneRun``: planning, budget guard,
re-calibration, record) runs on the simulated platform (``faasml.sim.run``); given a workload
profile (no data to run), its plan is replayed on the simulator's stage model
(``faasml.sim.tuning``)."""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from faasml.catalog import Catalog
from faasml.cli import _common
from faasml.cli.plan_tune import (
    JOB_OPTIONS,
    add_tune_options,
    allocation_text,
    job_file,
    job_from,
)
from faasml.planners.tuning import plan_tuning
from faasml.reports.tune_json import simulation_fields, tune_simulation_dict
from faasml.sim.tuning import TuneSimulation, simulate_tuning
from faasml.units import format_duration, format_money
from faasml.workload import load_workload

if TYPE_CHECKING:
    from collections.abc import Sequence

    from faasml.sim.run import TuneRunSimulation
    from faasml.sim.tuning import SimulatedStage
    from faasml.types import Allocation


def register(kinds: Any) -> None:
    tune = _common.add_workload_command(
        kinds,
        "tune",
        help="simulate a successive-halving tuning job under a plan",
        description="Plan WORKLOAD's tuning job like `faasml plan tune`, then run the plan on "
        "a simulated platform (concurrency waves, cold starts, noisy epoch times) and show "
        "the simulated time and cost beside the prediction. Given a job file, its real tuning "
        "run (planning, budget guard, re-calibration) runs on the simulated platform.",
        workload_help="a shipped workload name, the path of a profile, or a tuning job file",
    )
    add_tune_options(tune)
    tune.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    tune.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="coefficient of variation of each epoch's time (default: 0.1)",
    )
    tune.add_argument(
        "--cold-start-noise",
        type=float,
        default=0.3,
        help="coefficient of variation of each cold start (default: 0.3)",
    )
    _common.add_json_option(tune, "the result")
    _common.add_plan_options(tune)
    tune.set_defaults(func=run_simulate_tune)


def run_simulate_tune(args: argparse.Namespace) -> int:
    if job_file(args.workload) is not None:
        return run_simulate_job(args)
    catalog: Catalog = _common.catalog_from(args)
    _common.check_seed(args.seed)  # before planning
    plan = plan_tuning(
        load_workload(args.workload),
        catalog,
        _common.constraint_from(args),
        job_from(args),
        args.planner,
        **_common.space_options(args),
    )
    run = simulate_tuning(
        plan, catalog, noise=args.noise, cold_start_noise=args.cold_start_noise, seed=args.seed
    )
    return _common.emit(args, lambda: tune_simulation_dict(run), lambda: print_simulation(run))


def print_simulation(run: TuneSimulation) -> None:
    out = _common.console()
    plan = run.plan
    out.print(
        f"[bold]faasml simulate tune[/] {plan.workload} on {plan.catalog} with the "
        f"[bold]{plan.planner}[/] plan, {_common.bounds_text(plan.constraint)} "
        f"(seed {run.seed}, epoch noise {run.noise:g}, cold-start noise {run.cold_start_noise:g})"
    )
    out.print(_stages_table(run.stages, [s.allocation for s in plan.stages]))
    verdict = "within" if run.within_constraint else "[bold red]outside[/]"
    out.print(
        f"Simulated: [bold]{format_duration(run.time_s)}[/] and "
        f"[bold]{format_money(run.cost_usd)}[/]; predicted {format_duration(plan.time_s)} and "
        f"{format_money(plan.cost_usd)} (time {run.time_error:+.1%}, cost "
        f"{run.cost_error:+.1%}); {verdict} the constraint."
    )


SPACE_OPTIONS = {
    "arch": "--arch",
    "storages": "--storages",
    "memory_step": "--memory-step",
    "max_functions": "--max-functions",
}
"""Options that narrow a workload's allocation space: a job's run plans on the job's catalog
(``--catalog`` may name another)."""


def run_simulate_job(args: argparse.Namespace) -> int:
    """The job file's real tuning run on the simulated platform, beside its plan."""
    from faasml.exceptions import ConfigError
    from faasml.job import load_job
    from faasml.sim.run import simulate_tune_job

    given = [f"--{o.replace('_', '-')}" for o in JOB_OPTIONS if getattr(args, o) is not None]
    if given:
        raise ConfigError(
            f"{', '.join(given)} set the tuning job, but {args.workload} is a job file, whose "
            "tuning section is the job: set tuning.* there (or FAASML_TUNING__* in the "
            "environment)"
        )
    for attribute, flag in SPACE_OPTIONS.items():
        if getattr(args, attribute) is not None:
            raise ConfigError(
                f"the value of {flag} is {getattr(args, attribute)}, but a job file's run "
                "plans on its catalog's whole allocation space (--catalog may name another)"
            )
    _common.check_seed(args.seed)
    constraint = _common.constraint_from(args)
    job = load_job(args.workload)
    job.require_tuning()
    if args.catalog is not None:
        job = dataclasses.replace(job, catalog=args.catalog)
    with tempfile.TemporaryDirectory(prefix="faasml-simulate-") as folder:
        run = simulate_tune_job(
            job,
            constraint,
            Path(folder) / "run",
            planner=args.planner,
            noise=args.noise,
            cold_start_noise=args.cold_start_noise,
            seed=args.seed,
        )
    return _common.emit(args, lambda: tune_run_dict(run), lambda: print_run(run))


def tune_run_dict(run: TuneRunSimulation) -> dict[str, Any]:
    """A simulated tuning run as JSON: the keys of a replayed plan's, and how the run ended."""
    from faasml.reports.plan_json import JSON_FORMAT, allocation_dict, constraint_dict

    plan, record = run.plan, run.record
    best = record.best
    return {
        "format": JSON_FORMAT,
        "kind": "tune-simulation",
        "plan": {
            "kind": "tune-plan",
            "planner": plan.planner,
            "workload": str(record.job.get("name", "")),
            "catalog": record.catalog,
            "constraint": constraint_dict(record.constraint),
            "time_s": plan.time_s,
            "cost_usd": plan.cost_usd,
            "predicted": {"time_s": run.predicted.time_s, "cost_usd": run.predicted.cost_usd},
            "stages": [
                {
                    "index": s.index,
                    "trials": s.trials,
                    "epochs": s.epochs,
                    "allocation": allocation_dict(s.allocation),
                    "time_s": s.time_s,
                    "cost_usd": s.cost_usd,
                }
                for s in plan.stages
            ],
        },
        **simulation_fields(run),
        "status": record.status,
        "stop_reason": record.stop_reason,
        "best": None
        if best is None
        else {
            "trial": best.trial,
            "config": best.config,
            "metric": best.metric,
            "value": best.value,
        },
        "stages": [dataclasses.asdict(s) for s in run.stages],
    }


def print_run(run: TuneRunSimulation) -> None:
    """The simulated run's stages beside the plan's, as ``print_simulation`` shows a replay."""
    out = _common.console()
    plan, record = run.plan, run.record
    out.print(
        f"[bold]faasml simulate tune[/] {record.job.get('name', '')} on {record.catalog} with "
        f"the [bold]{plan.planner}[/] plan, {_common.bounds_text(record.constraint)} "
        f"(seed {run.seed}, epoch noise {run.noise:g}, cold-start noise "
        f"{run.cold_start_noise:g}): its tuning run on the simulated platform"
    )
    out.print(_stages_table(run.stages, [s.allocation for s in plan.stages]))
    if record.stop_reason:
        out.print(f"Stopped: {record.stop_reason}")
    verdict = "within" if run.within_constraint else "[bold red]outside[/]"
    out.print(
        f"Simulated: [bold]{format_duration(run.time_s)}[/] and "
        f"[bold]{format_money(run.cost_usd)}[/]; predicted "
        f"{format_duration(run.predicted.time_s)} and {format_money(run.predicted.cost_usd)} "
        f"(time {run.time_error:+.1%}, cost {run.cost_error:+.1%}); {verdict} the constraint."
    )


def _stages_table(stages: Sequence[SimulatedStage], allocations: Sequence[Allocation]) -> Table:
    """The simulated stages beside their predictions, each on its planned allocation."""
    table = Table(title="Stages: simulated (predicted)", title_justify="left")
    for column in ("stage", "trials", "θ", "peak functions", "time", "cost"):
        table.add_column(column, justify="left" if column == "θ" else "right")
    for stage, allocation in zip(stages, allocations, strict=False):
        table.add_row(
            str(stage.index),
            str(stage.trials),
            allocation_text(allocation),
            str(stage.peak_functions),
            f"{format_duration(stage.time_s)} ({format_duration(stage.predicted_time_s)})",
            f"{format_money(stage.cost_usd)} ({format_money(stage.predicted_cost_usd)})",
        )
    return table
