"""`faasml cluster scavenge EVENTS JOBS`: replay an idle-node trace with a jobs file under
MalleTrain and the baselines (cluster mode II)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from rich.markup import escape
from rich.table import Table

from faasml.cli._common import console, output_folder, print_json
from faasml.exceptions import ConfigError
from faasml.units import format_duration


def register(kinds: Any) -> None:
    """Add ``scavenge`` to the ``cluster`` command's kinds."""
    cmd = kinds.add_parser(
        "scavenge",
        help="train on the idle nodes of a batch-scheduled cluster (MalleTrain)",
        description="Replay an idle-node trace (gzip CSV time_s,node,idle) with a jobs file "
        "under a policy and others to compare: the Resource Allocator's MILP (HiGHS) on "
        "profiled (malletrain), true (freetrain) or guessed (freetrain-guess) scalability, "
        "or the greedy / equal baselines.",
    )
    cmd.add_argument("events", help="idle-node events: CSV or gzip CSV time_s,node,idle")
    cmd.add_argument("jobs", help="jobs CSV (job,model,submit_s,min_nodes,max_nodes,...)")
    cmd.add_argument("--policy", default="malletrain", help="policy (default: malletrain)")
    cmd.add_argument("--compare", default="", help="comma-separated policies to compare")
    cmd.add_argument("--days", type=float, default=None, help="replay the first D days only")
    cmd.add_argument(
        "--max-running", type=int, default=10, metavar="P", help="most running jobs (10)"
    )
    cmd.add_argument(
        "--window", type=float, default=600.0, help="MILP's forward-looking window, s (600)"
    )
    cmd.add_argument(
        "--metric",
        choices=("throughput", "efficiency"),
        default="throughput",
        help="what the MILP maximises (default: throughput, samples/s)",
    )
    cmd.add_argument(
        "--checkpoint", type=float, default=60.0, help="checkpoint interval, s, of jobs (60)"
    )
    cmd.add_argument("--measure", type=float, default=60.0, help="JPA time per count, s (60)")
    cmd.add_argument(
        "--time-limit", type=float, default=1.0, help="MILP time limit per event, s (1)"
    )
    cmd.add_argument("--json", action="store_true", help="print the results as JSON")
    cmd.add_argument("--plot", default=None, metavar="DIR", help="write plots into DIR")
    cmd.set_defaults(func=run_scavenge)


def _check(args: argparse.Namespace) -> None:
    for flag, value in (
        ("--window", args.window),
        ("--checkpoint", args.checkpoint),
        ("--measure", args.measure),
        ("--time-limit", args.time_limit),
    ):
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"the value of {flag} is {value:g}, but must be > 0")
    if args.days is not None and (not math.isfinite(args.days) or args.days <= 0):
        raise ConfigError(f"the value of --days is {args.days:g}, but must be > 0")
    if args.max_running < 1:
        raise ConfigError(f"the value of --max-running is {args.max_running}, but must be >= 1")


def run_scavenge(args: argparse.Namespace) -> int:
    from faasml.cluster.policies import IDLE_NODES, policy_class
    from faasml.cluster.scavenge import (
        ScavengeConfig,
        load_idle_trace,
        load_jobs,
        make_scavenge_policy,
        simulate_scavenge,
    )

    _check(args)
    names = [args.policy] + [n.strip() for n in args.compare.split(",") if n.strip()]
    names = list(dict.fromkeys(names))
    for name in names:
        policy_class(name, IDLE_NODES)  # unknown names fail before any work
    plot_dir = output_folder(args.plot) if args.plot else None
    trace = load_idle_trace(args.events)
    jobs = load_jobs(args.jobs, checkpoint_s=args.checkpoint)
    config = ScavengeConfig(
        max_running=args.max_running,
        end_s=None if args.days is None else args.days * 86400.0,
        checkpoint_s=args.checkpoint,
        measure_s=args.measure,
    )
    results = [
        simulate_scavenge(
            trace,
            jobs,
            make_scavenge_policy(
                name, window_s=args.window, metric=args.metric, time_limit_s=args.time_limit
            ),
            config,
        )
        for name in names
    ]
    plots: list[str] = []
    if plot_dir is not None:
        from faasml.cluster.scavenge.plots import plot_scavenge

        plots = [str(p) for p in plot_scavenge(results, plot_dir)]
    reference = next((r for r in results if r.policy == "freetrain"), results[0])
    if args.json:
        print_json(_scavenge_json(args, results, reference, plots))
        return 0
    out = console()
    title = (
        f"{len(jobs)} jobs on the idle nodes of {len(trace.nodes)} nodes, "
        f"{format_duration(results[0].end_s)}, at most {args.max_running} running"
    )
    out.print(_scavenge_table(title, results, reference))
    for r in results:
        if r.profiled_jobs:
            out.print(
                f"{r.policy}: profiled {r.profiled_jobs} jobs, "
                f"{format_duration(r.profiling_s)} of profiling, {r.profiling_rescales} rescales"
            )
    for plot in plots:
        out.print(escape(f"plot: {plot}"))
    return 0


def _scavenge_json(
    args: argparse.Namespace, results: list[Any], reference: Any, plots: list[str]
) -> dict[str, Any]:
    """The JSON of ``faasml cluster scavenge --json``: every policy's result beside the
    reference's samples."""
    return {
        "events": str(args.events),
        "jobs": str(args.jobs),
        "end_s": results[0].end_s,
        "max_running": args.max_running,
        "window_s": args.window,
        "metric": args.metric,
        "reference": reference.policy,
        "results": [
            {**r.to_dict(histories=4), "samples_vs_reference": _ratio(r, reference)}
            for r in results
        ],
        "plots": plots,
    }


def _scavenge_table(title: str, results: list[Any], reference: Any) -> Table:
    """One row per policy: samples (and against the reference), JCTs, idle nodes used,
    rescales and preemptions, solver times."""
    table = Table(title=title)
    columns = (
        "policy",
        "samples",
        f"vs {reference.policy}",
        "done",
        "mean JCT",
        "p95 JCT",
        "idle used",
        "rescales",
        "preempted",
        "lost",
        "solve p95",
        "solve max",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "policy" else "right")
    for r in results:
        s = r.summary()
        table.add_row(
            r.policy,
            f"{s['samples'] / 1e9:.2f}e9",
            f"{_ratio(r, reference):.3f}",
            f"{r.finished}/{r.jobs}",
            _dur(s["mean_jct_s"]),
            _dur(s["p95_jct_s"]),
            "-" if math.isnan(s["idle_used_share"]) else f"{100 * s['idle_used_share']:.0f}%",
            f"{r.rescales}",
            f"{r.preemptions}",
            f"{100 * r.lost_samples / max(r.samples + r.lost_samples, 1):.1f}%",
            _secs(s["solve_p95_s"]),
            _secs(s["solve_max_s"]),
        )
    return table


def _ratio(result: Any, reference: Any) -> float:
    return float(result.samples / reference.samples) if reference.samples else math.nan


def _dur(value: float) -> str:
    return "-" if math.isnan(value) else format_duration(value)


def _secs(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}s"
