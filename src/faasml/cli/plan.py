"""`faasml plan ...`: plans and predictions without running anything."""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape
from rich.table import Table

from faasml.cli import _common
from faasml.cli._offline import add_target_loss_options, offline_epochs_from
from faasml.cli.plan_tune import register_tune
from faasml.planners import plan_training
from faasml.reports import train_plan_dict
from faasml.types import Breakdown, TrainPlan
from faasml.units import format_duration, format_money
from faasml.workload import load_workload


def register(commands: Any) -> None:
    plan = commands.add_parser("plan", help="plan allocations and predict time and cost")
    kinds = plan.add_subparsers(dest="plan_kind", metavar="KIND", parser_class=type(plan))
    kinds.required = True

    train = _common.add_workload_command(
        kinds,
        "train",
        help="the best static allocation for training a fixed number of epochs",
        description="Choose the Pareto-optimal allocation (functions, memory, storage) that "
        "trains WORKLOAD fastest within a budget, or cheapest within a deadline.",
    )
    train.add_argument("--epochs", type=int, help="epochs to train (default: the profile's)")
    _common.add_json_option(train, "the plan")
    add_target_loss_options(train)
    _common.add_plan_options(train)
    train.set_defaults(func=run_plan_train)
    register_tune(kinds)


def run_plan_train(args: argparse.Namespace) -> int:
    workload = load_workload(args.workload)
    catalog = _common.catalog_from(args)
    constraint = _common.constraint_from(args)
    epochs = args.epochs
    if args.target_loss is not None:
        epochs = offline_epochs_from(args)
    plan = plan_training(
        workload, catalog, constraint, epochs=epochs, **_common.space_options(args)
    )
    return _common.emit(args, lambda: train_plan_dict(plan), lambda: print_train_plan(plan))


def print_train_plan(plan: TrainPlan) -> None:
    out = _common.console()
    choice = plan.choice
    out.print(
        f"[bold]faasml plan train[/] {escape(str(plan.workload))} on {escape(str(plan.catalog))}: "
        f"{plan.epochs} epochs, {_common.bounds_text(plan.constraint)}"
    )
    out.print(f"Searched {plan.space_size:,} allocations; {plan.frontier_size} are Pareto-optimal.")
    a = choice.allocation
    sync = (
        f"synchronising through {a.storage} ({a.scheme})"
        if a.n > 1
        else "no synchronisation (one function)"
    )
    functions = "function" if a.n == 1 else "functions"
    out.print(f"\n[bold]Plan:[/] {a.n} {functions} × {a.memory_mb} MB, {sync}")
    out.print(
        f"Predicted: [bold]{format_duration(plan.time_s)}[/] and "
        f"[bold]{format_money(plan.cost_usd)}[/] "
        f"({format_duration(choice.epoch_time_s)} and {format_money(choice.epoch_cost_usd)} "
        f"per epoch, cold start {format_duration(plan.startup_s)})\n"
    )
    out.print(_breakdown_table(plan.total))
    if plan.runners_up:
        table = Table(title="Runners-up (best with each other storage)", title_justify="left")
        for column in ("functions", "memory", "storage", "time", "cost"):
            table.add_column(column, justify="right" if column != "storage" else "left")
        for runner in plan.runners_up:
            a = runner.allocation
            table.add_row(
                str(a.n),
                f"{a.memory_mb} MB",
                f"{a.storage}/{a.scheme}" if a.n > 1 else "none (one function)",
                format_duration(runner.run_time_s(plan.epochs)),
                format_money(runner.run_cost_usd(plan.epochs)),
            )
        out.print(table)


def _breakdown_table(total: Breakdown) -> Table:
    table = Table(title="Where time and money go (whole run)", title_justify="left")
    for column in ("time", "seconds", "share", "money", "dollars", "share "):
        table.add_column(column, justify="left" if column in ("time", "money") else "right")
    times = (
        ("data loading", total.load_s),
        ("computation", total.compute_s),
        ("synchronisation", total.sync_s),
        ("invoke + cold start", total.invoke_s),
    )
    costs = (
        ("functions (GB-s)", total.function_usd),
        ("invocations", total.invocation_usd),
        ("storage", total.storage_usd),
        ("", None),
    )
    for (part, seconds), (item, usd) in zip(times, costs, strict=True):
        table.add_row(
            part,
            format_duration(seconds),
            f"{seconds / total.time_s:.0%}" if total.time_s else "-",
            item,
            "" if usd is None else format_money(usd),
            "" if usd is None else (f"{usd / total.cost_usd:.0%}" if total.cost_usd else "-"),
        )
    return table
