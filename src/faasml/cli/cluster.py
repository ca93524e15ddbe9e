"""`faasml cluster simulate TRACE`: replay a job trace under cluster policies and compare them."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from faasml.cli._common import check_seed, console, output_folder, print_json
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
    sim.add_argument(
        "--inference",
        default=None,
        metavar="SERVICES",
        help="a services YAML file: inference services served first (FaPES §3.3)",
    )
    sim.add_argument(
        "--loaning",
        default="fapes",
        help="with --inference: dedicated, one-way, fapes or one-way-blind (default: fapes)",
    )
    _forecast_arguments(sim)
    sim.add_argument("--json", action="store_true", help="print the results as JSON")
    sim.add_argument("--plot", default=None, metavar="DIR", help="write plots into DIR")
    sim.set_defaults(func=run_simulate)
    real = kinds.add_parser(
        "run",
        help="run real small PyTorch jobs and inference services on a local Ray cluster",
        description="Start a local multi-node Ray cluster (one node per server, GPUs as "
        "logical resources), run the first JOBS jobs of TRACE as real small PyTorch "
        "training jobs under a policy (rescaling by checkpoint and restart) and the "
        "inference services of --inference (requests really served, latency measured), "
        "then shut the cluster down.",
    )
    real.add_argument("trace", help="a workload CSV or a Pollux workload name")
    real.add_argument("--policy", default="pollux", help="the policy (default: pollux)")
    real.add_argument("--jobs", type=int, default=3, help="jobs taken from TRACE (default 3)")
    real.add_argument("--servers", type=int, default=2, help="servers = Ray nodes (default 2)")
    real.add_argument("--gpus-per-server", type=int, default=2, help="logical GPUs (default 2)")
    real.add_argument("--round", default="2s", help="scheduling round (default: 2s)")
    real.add_argument("--steps", type=int, default=200, help="optimiser steps per job")
    real.add_argument(
        "--day", default="60s", help="wall time a day of traces is compressed into (60s)"
    )
    real.add_argument(
        "--rate-scale", type=float, default=0.05, help="real requests per trace request"
    )
    real.add_argument("--until", default="10m", help="stop after this wall time (10m)")
    real.add_argument("--inference", default=None, metavar="SERVICES")
    real.add_argument("--loaning", default="fapes", help="dedicated, one-way or fapes")
    real.add_argument("--traces", default=None, help="traces directory")
    _forecast_arguments(real)
    real.add_argument(
        "--predict",
        action="store_true",
        help="calibrate step and restart times first, then print the simulator's "
        "prediction of the run beside what it measured",
    )
    real.add_argument("--json", action="store_true", help="print the results as JSON")
    real.set_defaults(func=run_real)
    from faasml.cli.cluster_scavenge import register as register_scavenge

    register_scavenge(kinds)


def _forecast_arguments(parser: Any) -> None:
    """--forecast, --headroom and --inference-start (simulate and run alike)."""
    parser.add_argument(
        "--forecast",
        default="exact",
        help="with --inference, how each round's load is forecast: exact (the true load, a "
        "bound), last, max (over 5 rounds), seasonal (the same round a day earlier) or "
        "seasonal-last (the larger of seasonal and last) (default: exact)",
    )
    parser.add_argument(
        "--headroom", type=float, default=1.0, help="with --inference: forecast × this (>= 1)"
    )
    parser.add_argument(
        "--inference-start",
        default="0",
        help="with --inference: time an added inference worker takes to serve (default 0)",
    )


def _seconds(text: str | None, flag: str) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return float(parse_duration(text, name=flag))
    if not value >= 0:  # nan too
        raise ConfigError(f"the value of {flag} is {text!r}, but must be >= 0 seconds")
    return value


def run_simulate(args: argparse.Namespace) -> int:
    from faasml.cluster import Cluster, SimConfig, load_models, load_workload, resolve_workload
    from faasml.cluster.inference import load_services
    from faasml.cluster.loans import check_loaning
    from faasml.cluster.metrics import result_to_dict
    from faasml.cluster.policies import GPU_POOL, make_policy, policy_class
    from faasml.cluster.records import TABLE2_RESTART_S
    from faasml.cluster.simulator import simulate

    names = [args.policy] + [n.strip() for n in args.compare.split(",") if n.strip()]
    names = list(dict.fromkeys(names))
    for name in names:
        policy_class(name, GPU_POOL)  # unknown names fail before any work
    check_loaning(args.loaning)
    check_seed(args.seed)
    if args.plot:
        output_folder(args.plot)  # before any work: a folder faasml can write into
    services = load_services(args.inference) if args.inference else []
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
        loaning=args.loaning,
        forecast=args.forecast,
        headroom=args.headroom,
        inference_start_s=_seconds(args.inference_start, "--inference-start") or 0.0,
    )
    results = [
        simulate(
            jobs, models, cluster, make_policy(name, round_s, config.restart_s), config, services
        )
        for name in names
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
                "inference": [s.name for s in services],
                "loaning": config.loaning if services else None,
                "forecast": config.forecast if services else None,
                "headroom": config.headroom if services else None,
                "inference_start_s": config.inference_start_s if services else None,
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
    if services:
        loaning = f"{config.loaning}, forecast {config.forecast} × {config.headroom:g}"
        _print_loans(out, results, services, loaning)
    for plot in plots:
        out.print(escape(f"plot: {plot}"))
    return 0


def _print_loans(out: Any, results: list[Any], services: list[Any], loaning: str) -> None:
    table = Table(
        title=f"{len(services)} inference service(s), loaning {loaning}: SLO attainment "
        "and FaPES-Manager events"
    )
    for column in (
        "policy",
        "SLO reqs",
        "SLO time",
        "reserve",
        "loaned",
        "reclaimed",
        "preempted",
        "lost GPU-s",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for result in results:
        s = result.summary()
        table.add_row(
            result.policy,
            f"{100 * s['slo_requests']:.2f}%",
            f"{100 * s['slo_time']:.2f}%",
            f"{s['inference_reserve_servers']:.0f}",
            f"{s['servers_loaned']:.0f}",
            f"{s['servers_reclaimed']:.0f}",
            f"{s['reclaim_preemptions']:.0f}",
            f"{s['reclaim_lost_gpu_s']:.0f}",
        )
    out.print(table)


def run_real(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from faasml.cluster import Cluster, load_models, load_workload, resolve_workload
    from faasml.cluster.inference import load_services
    from faasml.cluster.loans import check_loaning
    from faasml.cluster.policies import make_policy
    from faasml.cluster.ray_predict import (
        calibration_placements,
        compare,
        compress_arrivals,
        fit_run_model,
        predict_run,
    )
    from faasml.cluster.ray_run import RunConfig, run_on_ray
    from faasml.runtime.profile_check import load_average

    check_loaning(args.loaning)
    if args.jobs < 1:
        raise ConfigError(f"the value of --jobs is {args.jobs}, but must be >= 1")
    round_s = _seconds(args.round, "--round") or 0.0
    day_s = _seconds(args.day, "--day") or 0.0
    config = RunConfig(
        round_s=round_s,
        steps=args.steps,
        day_s=day_s,
        rate_scale=args.rate_scale,
        max_time_s=_seconds(args.until, "--until") or 0.0,
        loaning=args.loaning,
        forecast=args.forecast,
        headroom=args.headroom,
        inference_start_s=_seconds(args.inference_start, "--inference-start") or 0.0,
    )
    policy = make_policy(args.policy, round_s)
    services = load_services(args.inference) if args.inference else []
    traces = Path(args.traces) if args.traces else None
    jobs = compress_arrivals(
        load_workload(resolve_workload(args.trace, traces))[: args.jobs], day_s
    )
    cluster = Cluster.uniform(args.servers, args.gpus_per_server)
    models = load_models(traces)
    load_before = load_average()
    calibrate = calibration_placements(cluster) if args.predict else []
    result = run_on_ray(jobs, models, cluster, policy, config, services, calibrate)
    load_after = load_average()
    summary = result.summary()
    prediction = None
    if result.calibration is not None:
        model = fit_run_model(result.calibration)
        predicted = predict_run(
            jobs, models, cluster, make_policy(args.policy, round_s), config, services, model
        )
        prediction = (model, compare(result, predicted))
    if args.json:
        out_json: dict[str, Any] = {
            "policy": result.policy,
            "summary": {k: (None if math.isnan(v) else v) for k, v in summary.items()},
            "jobs": [asdict(j) for j in result.jobs],
            "load_average": [load_before, load_after],
        }
        if services:
            out_json["inference"] = {
                "services": [s.name for s in services],
                "loaning": config.loaning,
                "forecast": result.forecast,
                "forecast_window": result.forecast_window,
                "headroom": result.headroom,
                "inference_start_s": result.inference_start_s,
                "slo_requests": summary["slo_requests"],
            }
        if prediction is not None and result.calibration is not None:
            out_json["calibration"] = asdict(result.calibration)
            out_json["model"] = asdict(prediction[0])
            out_json["prediction"] = asdict(prediction[1])
        print_json(out_json)
        return 0
    out = console()
    table = Table(title=f"real run on Ray: {len(jobs)} jobs, policy {result.policy}")
    for column in ("job", "JCT", "steps", "restarts", "reclaimed", "loss first", "loss last"):
        table.add_column(column, justify="left" if column == "job" else "right")
    for job in result.jobs:
        table.add_row(
            job.name,
            "-" if job.jct is None else format_duration(job.jct),
            str(job.steps),
            str(job.restarts),
            str(job.reclaim_preemptions),
            f"{job.first_loss:.3f}",
            f"{job.last_loss:.3f}",
        )
    out.print(table)
    if services:
        out.print(
            f"inference sized by forecast {result.forecast} × {result.headroom:g} "
            f"(start {result.inference_start_s:g} s), loaning {config.loaning}: "
            f"requests {summary['requests']:.0f}, within SLO "
            f"{100 * summary['slo_requests']:.1f}%, latency p50 "
            f"{summary['p50_latency_ms']:.0f} ms p99 {summary['p99_latency_ms']:.0f} ms; "
            f"servers loaned {summary['servers_loaned']:.0f}, "
            f"reclaimed {summary['servers_reclaimed']:.0f}"
        )
    if prediction is not None and result.calibration is not None:
        _print_prediction(out, prediction[0], prediction[1], result.calibration)
    out.print(f"load average (1 min) {load_before:.1f} at the start, {load_after:.1f} at the end")
    return 0


def _print_prediction(out: Any, model: Any, cmp: Any, calibration: Any) -> None:
    """The simulator's prediction beside the measured run (80 columns)."""
    from faasml.cluster.ray_predict import fit_errors

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:+.1f}%"

    def dur(v: float | None) -> str:
        return "-" if v is None else format_duration(v)

    table = Table(title="predicted (simulator) vs measured; run = time holding GPUs")
    for column in ("job", "JCT pred", "JCT meas", "error", "run pred", "run meas"):
        table.add_column(column, justify="left" if column == "job" else "right")
    for row in (*cmp.jobs, cmp.avg_jct):
        table.add_row(
            row.name,
            dur(row.predicted_s),
            dur(row.measured_s),
            pct(row.error),
            dur(row.predicted_running_s),
            dur(row.measured_running_s),
        )
    out.print(table)
    if cmp.slo_predicted is not None and cmp.slo_measured is not None:
        out.print(
            f"requests within SLO: predicted {100 * cmp.slo_predicted:.1f}%, measured "
            f"{100 * cmp.slo_measured:.1f}% (error {pct(cmp.slo_error)})"
        )
    out.print(f"restarts: predicted {cmp.restarts_predicted}, measured {cmp.restarts_measured}")
    mean_round = cmp.mean_round_measured_s
    out.print(
        f"rounds: predicted {cmp.rounds_predicted}, measured {cmp.rounds_measured}"
        + ("" if mean_round is None else f" ({mean_round:.2f} s apart on average)")
    )
    c = model.comm
    worst = max((abs(e) for e in fit_errors(model, calibration)), default=0.0)
    out.print(
        f"fitted step: {1000 * model.compute_s:.1f} ms on 1 GPU, + {1000 * c.intra0:.1f} "
        f"+ {1000 * c.intra1:.1f} ms/extra GPU on one server,\n"
        f"  + {1000 * c.inter0:.1f} + {1000 * c.inter1:.1f} ms/extra server on several "
        f"(fit error ≤ {100 * worst:.0f}%, {len(calibration.steps)} layouts)"
    )
    out.print(
        f"restart: {model.restart_s:.2f} s (median of {len(calibration.restarts_s)}: "
        f"{', '.join(f'{r:.2f}' for r in calibration.restarts_s)})"
    )
