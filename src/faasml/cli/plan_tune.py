"""`faasml plan tune`: a resource-partitioning plan for a successive-halving tuning job."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from faasml._validate import load_yaml
from faasml.cli import _common
from faasml.exceptions import ConfigError, InfeasibleConstraintError
from faasml.job.parse import MAX_TRIALS
from faasml.models.shape import DEFAULT_EPOCHS_PER_STAGE
from faasml.planners.tuning import (
    TUNING_PLANNERS,
    SuccessiveHalving,
    TuningJob,
    TuningPlan,
    TuningSetup,
    concatenate,
    hyperband,
    plan_from,
    retarget,
    tuning_problem,
)
from faasml.reports.tune_json import comparison_dict, objective_value, saving
from faasml.types import Allocation, Constraint, Objective, TunePlan
from faasml.units import format_duration, format_money
from faasml.workload import load_workload

BASELINES = ("static", "static-cheapest", "fixed", "fixed-pool")
"""The plans every savings figure is measured against."""
SWEEP = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
"""Multiples of the user's limit plotted in the time-against-budget figure."""


def register_tune(kinds: Any) -> None:
    """Add `plan tune` to the `plan` command's kinds."""
    tune = _common.add_workload_command(
        kinds,
        "tune",
        help="partition resources among the stages of a successive-halving tuning job",
        description="Give every stage of a successive-halving job its own allocation "
        "(functions, memory, storage) so the job finishes fastest within a budget, or "
        "cheapest within a deadline (CE-scaling §III-C). Given a job file, plan its tuning "
        "section as `faasml tune` would: from the job's measured profile where one is cached.",
        workload_help="a shipped workload name, the path of a profile, or a job file (its "
        "tuning section is the job; --trials and the other job options are not given then)",
    )
    add_tune_options(tune)
    _common.add_json_option(tune, "the plan")
    tune.add_argument(
        "--plot", metavar="DIR", help="write budget_share.png and tradeoff.png into DIR"
    )
    _common.add_plan_options(tune)
    tune.set_defaults(func=run_plan_tune)


def add_tune_options(parser: argparse.ArgumentParser) -> None:
    """The successive-halving job (``add_job_options``) and ``--planner``."""
    add_job_options(parser)
    parser.add_argument(
        "--planner",
        default="exact",
        help=f"one of: {', '.join(TUNING_PLANNERS.names())} (default: exact)",
    )


def add_job_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("successive-halving job")
    group.add_argument("--trials", type=int, help="trials in the first stage")
    group.add_argument(
        "--hyperband",
        type=int,
        metavar="MAX_EPOCHS",
        help="instead of --trials: every Hyperband bracket for this largest epoch budget, "
        "run one after another (uses --reduction-factor)",
    )
    group.add_argument(
        "--reduction-factor", type=int, default=None, metavar="η", help="keep 1/η per stage"
    )
    group.add_argument(
        "--stages", type=int, default=None, help="number of stages (default: ⌊log_η trials⌋)"
    )
    group.add_argument(
        "--epochs-per-stage",
        default=None,
        metavar="R",
        help="epochs each trial trains per stage: one number, or one per stage (2,2,4; "
        f"default: {DEFAULT_EPOCHS_PER_STAGE})",
    )


def job_from(args: argparse.Namespace) -> TuningJob:
    if args.trials is None and args.hyperband is None:
        raise ConfigError(
            "a tuning job needs --trials N (successive halving) or --hyperband MAX_EPOCHS; "
            "neither was given"
        )
    if args.trials is not None and args.hyperband is not None:
        raise ConfigError("give either --trials (successive halving) or --hyperband, not both")
    _check_reduction_factor(args)
    eta = 2 if args.reduction_factor is None else args.reduction_factor
    if args.hyperband is not None:
        job = concatenate(hyperband(args.hyperband, eta))
        if max(job.trial_counts) > MAX_TRIALS:
            raise ConfigError(
                f"the value of --hyperband is {args.hyperband:,}, but its largest bracket "
                f"would start {max(job.trial_counts):,} trials, more than the {MAX_TRIALS:,} a "
                "tuning job may have"
            )
        return job
    if args.trials > MAX_TRIALS:
        raise ConfigError(
            f"the value of --trials is {args.trials:,}, but must be at most {MAX_TRIALS:,}"
        )
    epochs: int | tuple[int, ...] | None = None
    if args.epochs_per_stage is not None:
        text = str(args.epochs_per_stage)
        try:
            counts = tuple(int(part) for part in text.split(","))
        except ValueError:
            raise ConfigError(
                f"the value of --epochs-per-stage is {text!r}, but must be a whole number or "
                "comma-separated whole numbers"
            ) from None
        epochs = counts[0] if len(counts) == 1 else counts
    return SuccessiveHalving(args.trials, eta, args.stages, epochs)


def job_file(name: str) -> Path | None:
    """``name`` as a job file: an existing YAML mapping that is not a workload profile (a
    profile starts with ``format:``); None for a workload name or profile."""
    path = Path(name)
    if path.suffix not in {".yaml", ".yml"} or not path.is_file():
        return None
    data = load_yaml(path, ConfigError)
    return path if isinstance(data, dict) and "format" not in data else None


JOB_OPTIONS = ("trials", "hyperband", "reduction_factor", "stages", "epochs_per_stage")


def _check_reduction_factor(args: argparse.Namespace) -> None:
    """η no larger than the trials (or Hyperband's largest epoch budget): a larger one keeps no
    trial after the first stage, so nothing would be halved (2 is allowed whatever the job)."""
    size, flag = (
        (args.trials, "--trials") if args.trials is not None else (args.hyperband, "--hyperband")
    )
    eta = 2 if args.reduction_factor is None else args.reduction_factor
    if eta > max(2, size):
        raise ConfigError(
            f"the value of --reduction-factor is {eta:,}, but must be at most {flag} "
            f"({size:,}): a larger one keeps no trial after the first stage"
        )


def setup_from(args: argparse.Namespace) -> TuningSetup:
    TUNING_PLANNERS.get(args.planner)  # fail on an unknown name before any work
    path = job_file(args.workload)
    if path is None:
        workload, catalog, job = load_workload(args.workload), _common.catalog_from(args), None
    else:
        given = [f"--{o.replace('_', '-')}" for o in JOB_OPTIONS if getattr(args, o) is not None]
        if given:
            raise ConfigError(
                f"{', '.join(given)} set the tuning job, but {path} is a job file, whose "
                "tuning section is the job: set tuning.* there (or FAASML_TUNING__* in the "
                "environment)"
            )
        from faasml.catalog import load_catalog
        from faasml.job import load_job
        from faasml.runtime.runs.plan_inputs import job_inputs

        spec = load_job(path)
        job = spec.require_tuning().plan_job  # Hyperband: every bracket in turn
        inputs = job_inputs(spec, _common.catalog_from(args, load_catalog(spec.catalog)))
        workload, catalog = inputs.workload, inputs.catalog
    return tuning_problem(
        workload,
        catalog,
        _common.constraint_from(args),
        job_from(args) if job is None else job,
        **_common.space_options(args),
    )


def compare(setup: TuningSetup, chosen: str) -> dict[str, TunePlan | str]:
    """Every other planner's plan on the same problem, or why it found none."""
    others: dict[str, TunePlan | str] = {}
    for name in TUNING_PLANNERS.names():
        if name == chosen:
            continue
        try:
            others[name] = plan_from(setup, name)
        except InfeasibleConstraintError as err:
            others[name] = str(err)
    return others


def run_plan_tune(args: argparse.Namespace) -> int:
    folder = _common.output_folder(args.plot) if args.plot else None
    setup = setup_from(args)
    plan = plan_from(setup, args.planner)
    others = compare(setup, args.planner)
    if folder is not None:
        write_plots(setup, plan, others, folder)

    def show() -> None:
        print_tune_plan(plan, others)
        if args.plot:
            _common.console().print(
                escape(f"Plots written to {args.plot}/budget_share.png and tradeoff.png")
            )

    return _common.emit(args, lambda: comparison_dict(plan, others), show)


def print_tune_plan(plan: TunePlan, others: dict[str, TunePlan | str]) -> None:
    out = _common.console()
    trials = plan.stages[0].trials
    out.print(
        f"[bold]faasml plan tune[/] {escape(str(plan.workload))} on {escape(str(plan.catalog))}: "
        f"{trials} trials first, "
        f"{len(plan.stages)} stages, {_common.bounds_text(plan.constraint)}"
    )
    out.print(
        f"Planner [bold]{plan.planner}[/] chose among {plan.candidates:,} candidate allocations "
        f"in {plan.planning_s * 1000:.0f} ms (model and pruning: {plan.setup_s:.2f} s)"
        f"{optimality_text(plan)}."
    )
    out.print(stage_table(plan))
    out.print(
        f"Predicted: [bold]{format_duration(plan.time_s)}[/] and "
        f"[bold]{format_money(plan.cost_usd)}[/]\n"
    )
    out.print(comparison_table(plan, others))


def optimality_text(plan: TunePlan) -> str:
    """'; proven optimal', or the proven gap when the exact planner had to give some up."""
    found = plan.optimality if isinstance(plan, TuningPlan) else None
    if found is None:
        return ""
    if found.proven_optimal:
        return "; proven optimal"
    what = "time" if plan.constraint.goal is Objective.MIN_TIME else "cost"
    bound = (
        format_duration(found.lower_bound) if what == "time" else format_money(found.lower_bound)
    )
    return (
        f"; NOT proven optimal: within {found.gap:.4%} of the optimum (no plan's {what} is "
        f"below {bound}; {found.method})"
    )


def stage_table(plan: TunePlan) -> Table:
    budget = plan.constraint.budget_usd
    share_name = "share of budget" if budget is not None else "share of cost"
    table = Table(title="Stages", title_justify="left")
    for column in ("stage", "trials", "epochs", "θ = (n × memory, storage)", "waves"):
        table.add_column(column, justify="left" if column.startswith("θ") else "right")
    for column in ("time", "cost", share_name):
        table.add_column(column, justify="right")
    for s in plan.stages:
        base = budget if budget is not None else plan.cost_usd
        table.add_row(
            str(s.index),
            str(s.trials),
            str(s.epochs),
            allocation_text(s.allocation),
            str(s.waves),
            format_duration(s.time_s),
            format_money(s.cost_usd),
            f"{s.cost_usd / base:.1%}" if base else "-",
        )
    return table


_SCHEME = {"allreduce": "AR", "scatter-reduce": "SR", "param-server": "PS"}


def allocation_text(allocation: Allocation) -> str:
    """'4 × 1792 MB, vm-ps PS': functions, memory, storage and scheme (AR, SR or PS); one
    function synchronises nothing: '1 × 2624 MB, no sync'."""
    if allocation.n == 1:
        return f"1 × {allocation.memory_mb} MB, no sync"
    scheme = _SCHEME.get(allocation.scheme, allocation.scheme)
    return f"{allocation.n} × {allocation.memory_mb} MB, {allocation.storage} {scheme}"


def comparison_table(plan: TunePlan, others: dict[str, TunePlan | str]) -> Table:
    what = "time" if plan.constraint.goal is Objective.MIN_TIME else "cost"
    table = Table(title=f"Against the other planners ({what} saved by {plan.planner})")
    for column in ("planner", "time", "cost", "planning", "saving"):
        table.add_column(column, justify="left" if column == "planner" else "right")
    table.add_row(
        f"[bold]{plan.planner}[/]",
        format_duration(plan.time_s),
        format_money(plan.cost_usd),
        f"{plan.planning_s * 1000:.0f} ms",
        "",
    )
    ordered = [n for n in BASELINES if n in others] + [n for n in others if n not in BASELINES]
    for name in ordered:
        other = others[name]
        if isinstance(other, str):
            table.add_row(name, "no plan", "", "", "")
            continue
        cut = saving(plan, other)
        table.add_row(
            name,
            format_duration(other.time_s),
            format_money(other.cost_usd),
            f"{other.planning_s * 1000:.0f} ms",
            "-" if cut is None else f"{cut:.1%}",
        )
    return table


def write_plots(
    setup: TuningSetup, plan: TunePlan, others: dict[str, TunePlan | str], folder: Path
) -> None:
    from faasml.reports.tune_plots import budget_share_png, tradeoff_png

    shown = {plan.planner: plan}
    shown.update({n: p for n, p in others.items() if isinstance(p, TunePlan)})
    budget_share_png(shown, folder / "budget_share.png")
    constraint = plan.constraint
    minimise_time = constraint.goal is Objective.MIN_TIME
    # Sweep the bound on what is not minimised (budget for time, deadline for cost); when
    # only the other bound is given (--budget B --minimise cost), sweep that one.
    own = constraint.budget_usd if minimise_time else constraint.deadline_s
    by_budget = minimise_time if own is not None else constraint.budget_usd is not None
    limit = constraint.budget_usd if by_budget else constraint.deadline_s
    if limit is None:  # unreachable: Constraint holds a budget or a deadline
        raise ConfigError("--plot needs a budget or a deadline to sweep")
    limits = [limit * factor for factor in SWEEP]
    results: dict[str, list[float | None]] = {n: [] for n in shown}
    for value in limits:
        budget = value if by_budget else constraint.budget_usd
        deadline = constraint.deadline_s if by_budget else value
        swept = Constraint(budget_usd=budget, deadline_s=deadline, objective=constraint.goal)
        try:
            target = retarget(setup, swept)
        except InfeasibleConstraintError:
            target = None
        for name in shown:
            try:
                results[name].append(
                    None if target is None else objective_value(plan_from(target, name))
                )
            except InfeasibleConstraintError:
                results[name].append(None)
    objective = "time" if minimise_time else "cost"
    sweep = "budget" if by_budget else "deadline"
    title = f"{plan.workload}: {objective} against {sweep}"
    tradeoff_png(
        limits, results, folder / "tradeoff.png", sweep=sweep, objective=objective, title=title
    )
