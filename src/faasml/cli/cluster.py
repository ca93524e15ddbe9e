"""`faasml cluster simulate TRACE`: replay a job trace under cluster policies and compare them."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from rich.markup import escape

from faasml.cli._common import check_seed, console, output_folder, print_json
from faasml.cli.cluster_tables import policies_table, print_loans, print_prediction, print_real
from faasml.exceptions import ConfigError
from faasml.units import format_duration, parse_duration


def register(commands: Any) -> None:
    cluster = commands.add_parser("cluster", help="cluster mode: elastic jobs on GPU servers")
    kinds = cluster.add_subparsers(dest="cluster_kind", metavar="KIND", parser_class=type(cluster))
    kinds.required = True
    _register_simulate(kinds)
    _register_run(kinds)
    from faasml.cli.cluster_scavenge import register as register_scavenge

    register_scavenge(kinds)


def _register_simulate(kinds: Any) -> None:
    """``faasml cluster simulate``: its arguments."""
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


def _register_run(kinds: Any) -> None:
    """``faasml cluster run``: its arguments."""
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
    from faasml.cluster import Cluster, load_models, load_workload, resolve_workload
    from faasml.cluster.inference import load_services
    from faasml.cluster.loans import check_loaning
    from faasml.cluster.policies import GPU_POOL, make_policy, policy_class
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
    config = _sim_config(args)
    round_s = config.round_s
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
        print_json(_simulate_json(args, path, config, services, results, plots))
        return 0
    out = console()
    title = (
        f"{path.name}: {len(jobs)} jobs on {cluster.total_gpus} GPUs "
        f"({args.servers} × {args.gpus_per_server}), round {format_duration(config.round_s)}"
    )
    out.print(policies_table(title, results))
    if services:
        loaning = f"{config.loaning}, forecast {config.forecast} × {config.headroom:g}"
        print_loans(out, results, services, loaning)
    for plot in plots:
        out.print(escape(f"plot: {plot}"))
    return 0


def _sim_config(args: argparse.Namespace) -> Any:
    """The simulator's settings from the command line (durations parsed, checked)."""
    from faasml.cluster import SimConfig
    from faasml.cluster.records import TABLE2_RESTART_S

    round_s = _seconds(args.round, "--round") or 0.0
    restart = _seconds(args.restart, "--restart")
    return SimConfig(
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


def _simulate_json(
    args: argparse.Namespace,
    path: Path,
    config: Any,
    services: list[Any],
    results: list[Any],
    plots: list[str],
) -> dict[str, Any]:
    """The documented JSON of ``faasml cluster simulate --json``."""
    from faasml.cluster.metrics import result_to_dict

    return {
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


def run_real(args: argparse.Namespace) -> int:
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
    from faasml.cluster.ray_run import run_on_ray
    from faasml.runtime.profile.check import load_average

    check_loaning(args.loaning)
    if args.jobs < 1:
        raise ConfigError(f"the value of --jobs is {args.jobs}, but must be >= 1")
    config = _run_config(args)
    round_s, day_s = config.round_s, config.day_s
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
    prediction = None
    if result.calibration is not None:
        model = fit_run_model(result.calibration)
        predicted = predict_run(
            jobs, models, cluster, make_policy(args.policy, round_s), config, services, model
        )
        prediction = (model, compare(result, predicted))
    if args.json:
        print_json(_real_json(result, config, services, prediction, (load_before, load_after)))
        return 0
    out = console()
    print_real(out, result, len(jobs), config, services)
    if prediction is not None and result.calibration is not None:
        print_prediction(out, prediction[0], prediction[1], result.calibration)
    out.print(f"load average (1 min) {load_before:.1f} at the start, {load_after:.1f} at the end")
    return 0


def _run_config(args: argparse.Namespace) -> Any:
    """The real run's settings from the command line (durations parsed, checked)."""
    from faasml.cluster.ray_run import RunConfig

    round_s = _seconds(args.round, "--round") or 0.0
    day_s = _seconds(args.day, "--day") or 0.0
    return RunConfig(
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


def _real_json(
    result: Any,
    config: Any,
    services: list[Any],
    prediction: tuple[Any, Any] | None,
    loads: tuple[float | None, float | None],
) -> dict[str, Any]:
    """The JSON of ``faasml cluster run --json``: summary, jobs, inference, prediction."""
    from dataclasses import asdict

    summary = result.summary()
    out_json: dict[str, Any] = {
        "policy": result.policy,
        "summary": {k: (None if math.isnan(v) else v) for k, v in summary.items()},
        "jobs": [asdict(j) for j in result.jobs],
        "load_average": list(loads),
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
    return out_json
