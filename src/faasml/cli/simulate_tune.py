"""`faasml simulate tune`: plan a tuning job, then run the plan on the simulator."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from faasml.catalog import Catalog
from faasml.cli import _common
from faasml.cli.plan_tune import add_tune_options, allocation_text, job_from
from faasml.planners.tuning import plan_tuning
from faasml.reports.tune_json import tune_simulation_dict
from faasml.sim.tuning import TuneSimulation, simulate_tuning
from faasml.units import format_duration, format_money
from faasml.workload import load_workload


def register(kinds: Any) -> None:
    tune = _common.add_workload_command(
        kinds,
        "tune",
        help="simulate a successive-halving tuning job under a plan",
        description="Plan WORKLOAD's tuning job like `faasml plan tune`, then run the plan on "
        "a simulated platform (concurrency waves, cold starts, noisy epoch times) and show "
        "the simulated time and cost beside the prediction.",
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
    table = Table(title="Stages: simulated (predicted)", title_justify="left")
    for column in ("stage", "trials", "θ", "peak functions", "time", "cost"):
        table.add_column(column, justify="left" if column == "θ" else "right")
    for stage, planned in zip(run.stages, plan.stages, strict=True):
        table.add_row(
            str(stage.index),
            str(stage.trials),
            allocation_text(planned.allocation),
            str(stage.peak_functions),
            f"{format_duration(stage.time_s)} ({format_duration(stage.predicted_time_s)})",
            f"{format_money(stage.cost_usd)} ({format_money(stage.predicted_cost_usd)})",
        )
    out.print(table)
    verdict = "within" if run.within_constraint else "[bold red]outside[/]"
    out.print(
        f"Simulated: [bold]{format_duration(run.time_s)}[/] and "
        f"[bold]{format_money(run.cost_usd)}[/]; predicted {format_duration(plan.time_s)} and "
        f"{format_money(plan.cost_usd)} (time {run.time_error:+.1%}, cost "
        f"{run.cost_error:+.1%}); {verdict} the constraint."
    )
