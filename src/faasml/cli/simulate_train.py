"""`faasml simulate train`: a training job under an adaptive policy, on a loss curve."""

from __future__ import annotations

import argparse
import math
from typing import Any

from rich.table import Table

from faasml.cli import _common
from faasml.exceptions import ConfigError
from faasml.planners.adaptive import DEFAULT_DELTA, TRAINING_POLICIES, training_frontier
from faasml.reports.training_run import training_run_dict
from faasml.sim.curves import read_curve
from faasml.sim.synthetic import (
    MAX_EPOCHS_TO_TARGET,
    SYNTHETIC_FAMILIES,
    RecordedCurve,
    TrainingCurve,
    synthetic_curve,
)
from faasml.sim.training import TrainingRun, simulate_training
from faasml.units import format_duration, format_money
from faasml.workload import Workload, load_workload


def register(kinds: Any) -> None:
    train = _common.add_workload_command(
        kinds,
        "train",
        help="simulate adaptive training on a loss curve",
        description="Simulate training WORKLOAD to a target loss under a budget or a deadline: "
        "the policy re-plans the allocation as its online loss fit moves (CE-scaling "
        "Algorithm 2) and the timeline shows each epoch's prediction and decision.",
    )
    source = train.add_mutually_exclusive_group(required=True)
    source.add_argument("--curve", metavar="FILE", help="a recorded loss-curve file (CSV)")
    source.add_argument(
        "--family", choices=SYNTHETIC_FAMILIES, help="a synthetic loss-curve family"
    )
    train.add_argument(
        "--target-loss", type=float, help="loss to reach (default: the profile's target_loss)"
    )
    train.add_argument(
        "--true-epochs",
        type=float,
        help="synthetic curves: epochs the curve needs to reach the target "
        "(default: 1.5 × the profile's epochs)",
    )
    train.add_argument("--noise", type=float, default=0.01, help="synthetic curves: noise")
    train.add_argument("--seed", type=int, default=0, help="seed of noise and offline sample")
    train.add_argument(
        "--policy",
        default="adaptive",
        help=f"training policy: {', '.join(TRAINING_POLICIES.names())} (default: adaptive)",
    )
    train.add_argument(
        "--compare",
        metavar="P1,P2",
        help="also run these policies and print a comparison (e.g. static,every-epoch,no-delay)",
    )
    train.add_argument(
        "--delta", type=float, default=DEFAULT_DELTA, help="re-planning threshold δ (0.1)"
    )
    train.add_argument(
        "--offline-epochs",
        type=int,
        help="the offline estimate (default: a simulated LambdaML-style sample run)",
    )
    _common.add_json_option(train, "the runs")
    train.add_argument("--plot", metavar="DIR", help="write loss-fit and allocation plots here")
    _common.add_plan_options(train)
    train.set_defaults(func=run_simulate_train)


def _curve(args: argparse.Namespace, workload: Workload) -> TrainingCurve:
    target = args.target_loss if args.target_loss is not None else workload.target_loss
    if target is None:
        raise ConfigError(f"workload {workload.name} has no target_loss; give --target-loss")
    if not target > 0:
        raise ConfigError(f"the value of --target-loss is {target:g}, but must be > 0")
    if args.curve:
        return RecordedCurve(read_curve(args.curve), target)
    if args.true_epochs is not None and not 1 <= args.true_epochs <= MAX_EPOCHS_TO_TARGET:
        raise ConfigError(
            f"the value of --true-epochs is {args.true_epochs:g}, but must be between 1 and "
            f"{MAX_EPOCHS_TO_TARGET:,} (a simulated run steps through every epoch)"
        )
    true_epochs = args.true_epochs if args.true_epochs is not None else 1.5 * workload.epochs
    if not 0 <= args.noise < math.inf:
        raise ConfigError(f"the value of --noise is {args.noise}, but must be a finite number >= 0")
    return synthetic_curve(args.family, target, true_epochs, noise=args.noise, seed=args.seed)


def run_simulate_train(args: argparse.Namespace) -> int:
    workload = load_workload(args.workload)
    catalog = _common.catalog_from(args)
    constraint = _common.constraint_from(args)
    _common.check_seed(args.seed)
    if args.offline_epochs is not None and args.offline_epochs < 1:
        raise ConfigError(
            f"the value of --offline-epochs is {args.offline_epochs}, but must be >= 1"
        )
    policies = [args.policy]
    if args.compare:
        policies += [
            p.strip() for p in args.compare.split(",") if p.strip() not in ("", args.policy)
        ]
    for name in policies:
        TRAINING_POLICIES.get(name)  # unknown names fail before any work, listing the choices
    if args.plot:
        _common.output_folder(args.plot)
    curve = _curve(args, workload)
    frontier = training_frontier(workload, catalog, **_common.space_options(args))
    runs = [
        simulate_training(
            workload,
            catalog,
            constraint,
            curve,
            policy=name,
            delta=args.delta,
            offline_epochs=args.offline_epochs,
            frontier=frontier,
            seed=args.seed,
        )
        for name in policies
    ]
    if args.json:
        _common.print_json({"runs": [training_run_dict(run) for run in runs]})
    else:
        print_timeline(runs[0])
        if len(runs) > 1:
            print_comparison(runs)
    if args.plot:
        from faasml.reports.training_plots import plot_training_run

        written = [path for run in runs for path in plot_training_run(run, args.plot)]
        if not args.json:
            _common.console().print("Plots: " + ", ".join(str(p) for p in written))
    return 0


def print_timeline(run: TrainingRun) -> None:
    out = _common.console()
    out.print(
        f"[bold]faasml simulate train[/] {run.workload} on {run.catalog}, policy {run.policy}: "
        f"target loss {run.target_loss:g}, offline estimate {run.offline_epochs} epochs"
        + (f", true {run.true_epochs}" if run.true_epochs is not None else "")
    )
    out.print(f"Start: {run.start}")
    table = Table(title="Re-planning timeline", title_justify="left")
    for column in ("epoch", "loss", "predicted", "decision", "allocation", "spent", "elapsed"):
        table.add_column(
            column, justify="left" if column in ("decision", "allocation") else "right"
        )
    notes: list[str] = []
    for record in run.records:
        d = record.decision
        predicted = "-" if d.predicted_total_epochs is None else str(d.predicted_total_epochs)
        if d.prediction is not None:
            high = d.prediction.high
            predicted += (
                f" ({d.prediction.low:.0f}–{'∞' if high == float('inf') else f'{high:.0f}'})"
            )
        decision = d.decision.value
        if d.decision.value != "keep" or "re-planned" in d.reason:
            decision += f" [{len(notes) + 1}]"
            notes.append(f"[{len(notes) + 1}] epoch {record.epoch}: {d.reason}")
        table.add_row(
            str(record.epoch),
            f"{record.loss:.4g}",
            predicted,
            decision,
            str(d.allocation) if d.decision.value == "rescale" else str(record.allocation),
            format_money(record.spent_usd),
            format_duration(record.elapsed_s),
        )
    out.print(table)
    for note in notes:
        out.print(note)
    status = "reached the target" if run.reached else "did not reach the target"
    broken = " [bold red]— constraint violated[/]" if run.violated else ""
    out.print(
        f"Result: {status} after {len(run.records)} epochs in {format_duration(run.time_s)} for "
        f"{format_money(run.cost_usd)}; {run.restarts} restarts "
        f"(switch time hidden {format_duration(run.hidden_switch_s)}, "
        f"visible {format_duration(run.visible_switch_s)}); {run.stop_reason}{broken}"
    )


def print_comparison(runs: list[TrainingRun]) -> None:
    table = Table(title="Policies compared", title_justify="left")
    for column in ("policy", "reached", "epochs", "time", "cost", "restarts", "constraint"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for run in runs:
        table.add_row(
            run.policy,
            "yes" if run.reached else "no",
            str(len(run.records)),
            format_duration(run.time_s),
            format_money(run.cost_usd),
            str(run.restarts),
            "violated" if run.violated else "met",
        )
    _common.console().print(table)
