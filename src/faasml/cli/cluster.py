"""`faasml cluster simulate TRACE`: replay a job trace under cluster policies and compare them."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from rich.table import Table

from faasml.cli._common import console, print_json
from faasml.exceptions import ConfigError
from faasml.units import format_duration, parse_duration


def register(commands: Any) -> None:
    cluster = commands.add_parser("cluster", help="cluster mode: elastic jobs on GPU servers")
    kinds = cluster.add_subparsers(dest="cluster_kind", metavar="KIND", parser_class=type(cluster))
    kinds.required = True
    sim = kinds.add_parser(
        "simulate",
        help="replay a job trace under scheduling policies",
        description="Replay the job arrivals of TRACE on a simulated GPU cluster under a "
        "policy (and others to compare), with throughput and statistical efficiency from "
        "the measured application traces; print JCT, queuing, goodput and utilisation.",
    )
    sim.add_argument(
        "trace",
        help="a workload CSV (Pollux format or ours) or a Pollux workload name "
        "such as workload-6 or workloads-0.5/workload-3.csv",
    )
    sim.add_argument("--policy", default="fapes", help="the policy to simulate (default: fapes)")
    sim.add_argument("--compare", default="", help="comma-separated policies to compare with")
    sim.add_argument("--servers", type=int, default=16, help="servers (default: 16)")
    sim.add_argument("--gpus-per-server", type=int, default=4, help="GPUs per server (default: 4)")
    sim.add_argument(
        "--servers-per-switch",
        type=int,
        default=None,
        help="servers under each switch (default: all under one)",
    )
    sim.add_argument("--round", default="60s", help="scheduling round (default: 60s)")
    sim.add_argument(
        "--restart",
        default=None,
        help="overhead of every (re)start (default: FaPES Table 2, 5.68 s)",
    )
    sim.add_argument("--until", default=None, help="stop simulating at this time")
    sim.add_argument(
        "--deadline-factor",
        type=float,
        default=None,
        help="give each job a deadline of FACTOR × its run time alone (for ElasticFlow)",
    )
    sim.add_argument("--noise", type=float, default=0.0, help="model error (log-normal std)")
    sim.add_argument("--seed", type=int, default=0, help="seed of the model error (default 0)")
    sim.add_argument(
        "--traces",
        default=None,
        help="traces directory (default: $FAASML_TRACES, else the shipped traces)",
    )
    sim.add_argument("--json", action="store_true", help="print the results as JSON")
    sim.add_argument("--plot", default=None, metavar="DIR", help="write plots into DIR")
    sim.set_defaults(func=run_simulate)
    from faasml.cli.cluster_scavenge import register as register_scavenge

    register_scavenge(kinds)


def _seconds(text: str | None, flag: str) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return float(parse_duration(text, name=flag))
    if value < 0:
        raise ConfigError(f"the value of {flag} is {text!r}, but must be >= 0 seconds")
    return value


def run_simulate(args: argparse.Namespace) -> int:
    from faasml.cluster import Cluster, SimConfig, load_models, load_workload, resolve_workload
    from faasml.cluster.metrics import result_to_dict
    from faasml.cluster.policies import POLICIES, make_policy
    from faasml.cluster.records import TABLE2_RESTART_S
    from faasml.cluster.simulator import simulate

    names = [args.policy] + [n.strip() for n in args.compare.split(",") if n.strip()]
    names = list(dict.fromkeys(names))
    for name in names:
        POLICIES.get(name)  # unknown names fail before any work
    traces = Path(args.traces) if args.traces else None
    path = resolve_workload(args.trace, traces)
    jobs = load_workload(path)
    models = load_models(traces)
    cluster = Cluster.uniform(args.servers, args.gpus_per_server, args.servers_per_switch)
    round_s = _seconds(args.round, "--round") or 0.0
    restart = _seconds(args.restart, "--restart")
    config = SimConfig(
        round_s=round_s,
        restart_s=TABLE2_RESTART_S if restart is None else restart,
        seed=args.seed,
        noise=args.noise,
        max_time_s=_seconds(args.until, "--until"),
        deadline_factor=args.deadline_factor,
    )
    results = [
        simulate(jobs, models, cluster, make_policy(name, round_s), config) for name in names
    ]
    plots = []
    if args.plot:
        from faasml.cluster.plots import plot_results

        plots = [str(p) for p in plot_results(results, Path(args.plot))]
    if args.json:
        print_json(
            {
                "trace": str(path),
                "cluster": {
                    "servers": args.servers,
                    "gpus_per_server": args.gpus_per_server,
                    "servers_per_switch": args.servers_per_switch,
                },
                "round_s": config.round_s,
                "restart_s": config.restart_s,
                "results": [result_to_dict(r) for r in results],
                "plots": plots,
            }
        )
        return 0
    out = console()
    table = Table(
        title=f"{path.name}: {len(jobs)} jobs on {cluster.total_gpus} GPUs "
        f"({args.servers} × {args.gpus_per_server}), round {format_duration(config.round_s)}"
    )
    for column in (
        "policy",
        "avg JCT",
        "p95 JCT",
        "max JCT",
        "avg queue",
        "avg goodput",
        "speedup",
        "util",
        "restarts",
        "deadlines",
        "done",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for result in results:
        s = result.summary()

        def dur(v: float) -> str:
            return "-" if math.isnan(v) else format_duration(v)

        table.add_row(
            result.policy,
            dur(s["avg_jct_s"]),
            dur(s["p95_jct_s"]),
            dur(s["max_jct_s"]),
            dur(s["avg_queue_s"]),
            f"{s['avg_goodput']:.0f}",
            f"{s['avg_speedup']:.2f}",
            f"{100 * s['avg_utilization']:.0f}%",
            f"{s['restarts']:.0f}",
            "-" if math.isnan(s["deadline_met"]) else f"{100 * s['deadline_met']:.0f}%",
            f"{s['completed']:.0f}/{s['jobs']:.0f}",
        )
    out.print(table)
    for plot in plots:
        out.print(f"plot: {plot}")
    return 0
