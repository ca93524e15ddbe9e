"""`faasml tune`, `faasml train` and `faasml resume`: plan, run for real, report."""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from rich.markup import escape

from faasml.cli._common import (
    add_constraint_options,
    add_json_option,
    add_set_option,
    console,
    constraint_from,
    say,
)
from faasml.cli.run_console import PrepareDisplay, RunDisplay
from faasml.cli.run_options import (
    add_hyperband_option,
    json_output,
    print_trial_lines,
    read_run_job,
)
from faasml.exceptions import ConfigError
from faasml.job import JobSpec
from faasml.reports.run_format import best_value, drawn, number, run_metric
from faasml.reports.run_outputs import write_outputs
from faasml.reports.run_summary import exit_code, summary_lines
from faasml.runtime.platforms.contract import PLATFORMS
from faasml.runtime.record.records import PlanRecord, RunRecord
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.record.run_lock import lock_run
from faasml.runtime.runs.loop_job import loop_job
from faasml.runtime.runs.session import BaseRun, TrainRun, TuneRun, resume_run
from faasml.units import format_duration, format_money


def register(commands: Any) -> None:
    for kind, text in (
        ("tune", "tune hyperparameters with successive halving, for real, within the constraint"),
        ("train", "train one configuration to its target loss, for real, within the constraint"),
    ):
        parser = commands.add_parser(kind, help=text, description=text)
        parser.add_argument("job", help="a job file (YAML), e.g. examples/tune-logreg.yaml")
        parser.add_argument(
            "--run-dir",
            help="where the record, report and plots go (default: runs/<job>-<time>); a "
            "folder holding a run is refused (resume it with 'faasml resume DIR')",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="write into --run-dir even if it holds a run or other files (overwrites them)",
        )
        parser.add_argument(
            "--reprofile",
            action="store_true",
            help="measure the job again before planning instead of using its cached profile",
        )
        add_set_option(parser)
        if kind == "tune":
            add_hyperband_option(parser)
        add_json_option(parser, "the run's record (record.json)")
        add_constraint_options(parser)
        add_platform_options(parser)
        parser.set_defaults(func=run_tune if kind == "tune" else run_train)
    resume = commands.add_parser(
        "resume", help="continue an interrupted tune or train run from its run directory"
    )
    resume.add_argument("run_dir", help="the run directory of the interrupted run")
    resume.add_argument("--budget", metavar="$", help="a new budget (e.g. after a budget stop)")
    resume.add_argument("--deadline", metavar="T", help="a new deadline")
    resume.add_argument(
        "--ignore-job-file",
        action="store_true",
        help="continue with the job the record holds even though its job file has changed "
        "since the run began (the file is not read)",
    )
    add_json_option(resume, "the run's record (record.json)")
    resume.set_defaults(func=run_resume, minimise=None)


def add_platform_options(parser: argparse.ArgumentParser) -> None:
    """``--platform``, ``--address`` and ``--gpus-per-function``: run the job on another
    platform than its file names, or with GPUs."""
    parser.add_argument(
        "--platform",
        help="the platform to run on, overriding the job's (local, ray, lithops)",
    )
    parser.add_argument(
        "--address",
        help="where the platform runs (ray: 'auto', 'host:6379' or 'ray://host:10001')",
    )
    parser.add_argument(
        "--gpus-per-function",
        type=float,
        metavar="G",
        help="ray: GPUs reserved for each function, so a training loop's ctx.device is a GPU "
        "(the bill is the catalog's, GPUs unpriced)",
    )


def _platform_of(args: argparse.Namespace, job: JobSpec) -> tuple[JobSpec, dict[str, Any]]:
    """The job with the platform the command line asks for, and that platform's options."""
    platform = getattr(args, "platform", None)
    if platform:
        PLATFORMS.get(platform)  # unknown names list the choices
        job = dataclasses.replace(job, platform=platform)
    options: dict[str, Any] = {}
    address = getattr(args, "address", None)
    if address:
        if job.platform == "local":
            raise ConfigError("--address names a cluster, but the platform is 'local'")
        options["address"] = address
    gpus = getattr(args, "gpus_per_function", None)
    if gpus is not None:
        if job.platform != "ray":
            raise ConfigError(
                f"--gpus-per-function asks Ray for GPUs, but the platform is {job.platform!r}"
            )
        options["gpus_per_function"] = gpus
    return job, options


def _run_dir(args: argparse.Namespace, name: str) -> Path:
    if args.run_dir:
        return Path(args.run_dir)
    path = Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    RunDir(path).check_new(force=args.force)
    return path


def _check_run_dir(args: argparse.Namespace) -> None:
    """Refuse a --run-dir a new run would write over, before the job is even read."""
    if args.run_dir:
        RunDir(args.run_dir).check_new(force=args.force)


def run_tune(args: argparse.Namespace) -> int:
    return json_output(args, lambda: _run(TuneRun, args))


def run_train(args: argparse.Namespace) -> int:
    return json_output(args, lambda: _run(TrainRun, args))


def _run(kind: type[TuneRun] | type[TrainRun], args: argparse.Namespace) -> int:
    """Check the run directory, read the job, measure and plan it, run it, report."""
    _check_run_dir(args)
    job, options = _platform_of(args, read_run_job(args))
    if kind is TuneRun:
        job.require_tuning()
    elif job.search_workflow() is not None:  # deployed by a search (docs/search.md)
        from faasml.runtime.runs.workflow import WorkflowRun

        kind = WorkflowRun
    path = _run_dir(args, job.name)
    with lock_run(path):
        RunDir(path).check_new(force=args.force)  # again, locked: a run may have begun since
        job = loop_job(job, path / "function")  # a training loop's (docs/your-own-loop.md)
        run = kind(
            job,
            constraint_from(args),
            path,
            platform_options=options,
            reprofile=args.reprofile,
            outputs=write_outputs,
        )
        _plan(run)
        return _execute(run)


def run_resume(args: argparse.Namespace) -> int:
    return json_output(args, lambda: _resume(args))


def _resume(args: argparse.Namespace) -> int:
    constraint = None
    if args.budget is not None or args.deadline is not None:
        constraint = constraint_from(args)
    RunDir(args.run_dir).read_record()  # a folder holding no run is refused before it is locked
    with lock_run(args.run_dir):
        run = resume_run(
            args.run_dir,
            constraint=constraint,
            ignore_job_file=args.ignore_job_file,
            outputs=write_outputs,
        )
        status = run.record.status
        say(console(), f"Resuming the {run.kind} run in {args.run_dir} (status {status})")
        return _execute(run)


def _plan(run: TuneRun | TrainRun) -> None:
    """Measure the job (or take its cached profile), then plan from it."""
    out = console()
    say(out, f"Measuring {run.job.name} on {run.job.platform} (cached per job and platform)")
    with PrepareDisplay(out) as display:
        run.on_prepare = display
        try:
            run.plan()
        finally:
            run.on_prepare = None
    profile = run.profile
    if profile is not None:
        lines = profile.summary_lines()
        if not profile.cached:  # what measuring it took, billed as 'profiling'
            cost = run.meter.by_kind().get("profiling", 0.0)
            lines.insert(1, f"  probed in {profile.profiling_s:.1f} s for {format_money(cost)}")
        for line in lines:
            say(out, line)
        if profile.check is not None:
            say(out, profile.check.line())
        if run.compute_note is not None:
            say(out, run.compute_note[0].upper() + run.compute_note[1:])


def print_plan(plan: PlanRecord, job_name: str) -> None:
    out = console()
    # A tuning run predicts beside the planner (``predicted``): both are shown.
    beside = plan.predicted is not None
    what = "planned" if beside else "predicted"
    say(out, f"[bold]Plan[/] ({escape(plan.planner)}) for {escape(job_name)}", markup=True)
    line = (
        f"  {what} [bold]{format_duration(plan.time_s)}[/] and "
        f"[bold]{format_money(plan.cost_usd)}[/]"
    )
    if plan.predicted is not None:
        line += (
            f"; the run predicts [bold]{format_duration(plan.predicted.time_s)}[/] and "
            f"[bold]{format_money(plan.predicted.cost_usd)}[/]"
        )
    say(out, line, markup=True)
    for stage in plan.stages:
        a = stage.allocation
        run_s = ""
        if beside and stage.predicted is not None:
            run_s = (
                f" (the run: {format_duration(stage.predicted.time_s)}, "
                f"{format_money(stage.predicted.cost_usd)})"
            )
        # Two lines a stage: what runs, then its time and bill (80 columns hold each).
        head = f"  stage {stage.index}: "
        out.print(
            f"{head}{_count(stage.trials, 'trial')} × {_count(stage.epochs, 'epoch')} on "
            f"{a.n} × {a.memory_mb} MB, {a.storage}/{a.scheme}"
        )
        out.print(
            f"{' ' * len(head)}{format_duration(stage.time_s)}, "
            f"{format_money(stage.cost_usd)}{run_s}"
        )


def _count(n: int, what: str) -> str:
    """``n what`` with the plural where n is not 1."""
    return f"{n} {what}{'' if n == 1 else 's'}"


def _unsearched(record: RunRecord) -> list[str]:
    """One line per workflow phase whose search probed nothing (no probe fitted its dollar
    budget): it ran on the model's choice, and the line says why."""
    flow = record.workflow
    if flow is None:
        return []
    return [
        f"Deployment search, phase {p.index}: {p.stop_reason}"
        for p in flow.all_phases()
        if p.searched and not p.probes
    ]


def _execute(run: BaseRun) -> int:
    out = console()
    plan = run.record.plan
    if plan is None:  # a run object made without planning (the commands plan first)
        plan = run.plan()
    print_plan(plan, run.job.name)
    if not out.is_terminal:  # a line per trial result (the live table shows them otherwise)
        print_trial_lines(run, out)
    with RunDisplay(run, out) as display:
        run.progress = display.tick
        record = run.execute()
    for line in _unsearched(record):
        say(out, line)
    for line in summary_lines(record):
        style = "bold red" if line.startswith(("LOST", "TARGET MISSED", "NO BEST")) else ""
        say(out, f"[{style}]{escape(line)}[/]" if style else escape(line), markup=True)
    best = record.best
    if best is not None:  # by the run's metric and mode
        metric = run_metric(record)
        value = best_value(record, metric)
        named = f" ({drawn(record, best.config)})" if best.config else ""  # a training run: none
        say(
            out,
            f"Best: trial {best.trial}{named} — {metric.label} {number(value)}, "
            f"ranked by {metric.name} ({metric.mode})",
        )
    say(out, f"Report: {run.dir.path / 'report.md'}")
    return exit_code(record)
