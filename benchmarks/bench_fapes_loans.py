"""FaPES-Manager's loans (FaPES §7.2): dedicated partition vs one-way vs two-way loaning.

The eight Pollux workloads of job load 1.0 (or 0.5, 1.5: ``--training-loads``) on 16 × 4
GPUs, plus two inference services whose tidal load (FaPES Fig. 1 shape, seeded) needs at
most 25 % (low), 50 % (medium) or 75 % (high) of the GPUs at once. For each restart cost,
inference load and training policy, prints the mean over the workloads of training JCT
(average, p95), queuing, utilisation, inference SLO attainment (share of requests) and the
manager's events (servers loaned and reclaimed, jobs preempted by reclaims and the GPU-
seconds of restart they cost), per loaning strategy; then FaPES loaning's JCT and queuing
against the better baseline (targets: JCT at least 9 % lower at every load and 25 % at low
load, SLO >= 99 % of requests), and against one-way loaning when that is not the better
(and against ``one-way-blind``, one-way without taking idle servers first, if asked for).
``--forecasts`` chooses how the manager forecasts each round's inference load
(``faasml.cluster.forecast``: ``exact``, the coming round's true load, is the bound;
``seasonal``, the same round a day earlier, needs ``--history-days 1``; ``last``
and ``max`` see only the rounds before, times a headroom: ``max*1.1``); requests above what
was provisioned miss the SLO (``SLO req``, ``SLO time``: the lowest over the workloads),
and so do those a worker added at a round cannot serve while it starts
(``--inference-start``).
``--bound`` adds training alone on the whole pool (no inference at all), which no loaning
strategy can beat: how far below the better baseline any loaning could bring JCT.

The trace starts at 06:00 (the training arrivals span about 8 hours of a day): "search"
peaks at 14:00, "recommend" at 20:00; nights fall to a quarter of the peak.

    .venv/bin/python benchmarks/bench_fapes_loans.py [--workloads 1,2] [--policies fapes,fifo] \
        [--loanings dedicated,one-way,fapes,one-way-blind] [--forecasts exact,last,max*1.1] \
        [--inference-start 5.14] [--rate-noise 0.05] [--history-days 1] [--bound] \
        [--servers 16] [--gpus-per-server 8]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time

from faasml.cluster import (
    AppModel,
    Cluster,
    Job,
    SimConfig,
    load_models,
    load_workload,
    make_policy,
    resolve_workload,
    simulate,
)
from faasml.cluster.forecast import check_forecast
from faasml.cluster.inference import InferenceService, RateTrace, tidal_trace
from faasml.cluster.loans import LOANING
from faasml.cluster.metrics import SimResult
from faasml.exceptions import ConfigError

BASELINES = ("dedicated", "one-way", "fapes")

LEVELS = {"low": 0.25, "medium": 0.5, "high": 0.75}
TRAINING_LOADS = {"0.5": "workloads-0.5", "1.0": "workloads", "1.5": "workloads-1.5"}
CAPACITY_RPS = 25.0
DAY_S = 86400.0
START_HOUR = 6.0


def services(
    share: float, gpus: int, seed: int, noise: float = 0.05, history_days: int = 0
) -> list[InferenceService]:
    """Two services whose tides peak (bursts aside) at ``share`` of the GPUs together
    (``noise``: the std of the tidal trace's log-normal noise, 5 % by default); with
    ``history_days``, their traces start that many days before the jobs (times below 0:
    the past a day-ahead forecast reads)."""
    out = []
    for i, (name, part, peak_hour) in enumerate((("search", 0.6, 14.0), ("recommend", 0.4, 20.0))):
        peak_gpus = share * gpus * part
        trace = tidal_trace(
            peak_gpus * CAPACITY_RPS / 1.25,  # bursts (up to 1.6x) stay within max_scale
            days=3 + history_days,
            peak_hour=peak_hour - START_HOUR,
            seed=seed + i,
            noise=noise,
        )
        if history_days:
            trace = RateTrace(trace.times_s - history_days * DAY_S, trace.rates)
        low = max(math.ceil(0.1 * peak_gpus), 1)
        out.append(
            InferenceService(
                name, trace, CAPACITY_RPS, 100.0, low, math.ceil(peak_gpus * 1.6), 20.0
            )
        )
    return out


def parse_forecasts(text: str) -> list[tuple[str, float]]:
    """``NAME`` or ``NAME*HEADROOM``, comma-separated (e.g. ``exact,last,max*1.1``)."""
    out = []
    for item in text.split(","):
        name, _, room = item.partition("*")
        try:
            headroom = float(room) if room else 1.0
        except ValueError:
            raise SystemExit(f"--forecasts: the headroom of {item!r} is not a number") from None
        try:
            check_forecast(name, headroom=headroom)
        except ConfigError as err:
            raise SystemExit(f"--forecasts: {err}") from None
        out.append((name, headroom))
    return out


def run(args: argparse.Namespace) -> int:
    loanings = args.loanings.split(",")
    forecasts = parse_forecasts(args.forecasts)
    if not set(BASELINES) <= set(loanings) or not set(loanings) <= set(LOANING):
        raise SystemExit(
            f"--loanings {args.loanings!r}: {', '.join(BASELINES)} and any of {', '.join(LOANING)}"
        )
    models = load_models()
    cluster = Cluster.uniform(args.servers, args.gpus_per_server)
    workloads = [int(w) for w in args.workloads.split(",")]
    for load in args.training_loads.split(","):
        if load not in TRAINING_LOADS:
            raise SystemExit(f"training load {load!r}: choose from {', '.join(TRAINING_LOADS)}")
        jobs = {
            w: load_workload(resolve_workload(f"{TRAINING_LOADS[load]}/workload-{w}.csv"))
            for w in workloads
        }
        _run_load(args, models, cluster, workloads, jobs, load, forecasts)
    return 0


def _run_load(
    args: argparse.Namespace,
    models: dict[str, AppModel],
    cluster: Cluster,
    workloads: list[int],
    jobs: dict[int, list[Job]],
    load: str,
    forecasts: list[tuple[str, float]],
) -> None:
    alone: dict[tuple[float, str], tuple[dict[str, float], float]] = {}
    for restart in (float(r) for r in args.restarts.split(",")):
        for level in args.levels.split(","):
            svc = services(LEVELS[level], cluster.total_gpus, 7, args.rate_noise, args.history_days)
            for policy, (forecast, headroom) in itertools.product(
                args.policies.split(","), forecasts
            ):
                print(
                    f"\n== inference load {level} (peak {LEVELS[level]:.0%} of "
                    f"{cluster.total_gpus} GPUs, {args.gpus_per_server} a server), "
                    f"training policy {policy}, job load {load}, restart {restart:g} s, "
                    f"{len(workloads)} workloads, forecast {forecast} x {headroom:g}, "
                    f"worker start {args.inference_start:g} s, history {args.history_days} d"
                )
                print(
                    f"{'loaning':13} {'avg JCT s':>9} {'p95 JCT s':>9} {'queue s':>8} "
                    f"{'util':>6} {'SLO req':>8} {'SLO time':>8} {'loaned':>7} {'reclaim':>8} "
                    f"{'preempt':>8} {'lost GPU-s':>10} {'requeue s':>9} {'wall s':>7}"
                )
                means: dict[str, dict[str, float]] = {}
                for loaning in args.loanings.split(","):
                    tic = time.perf_counter()
                    config = SimConfig(
                        restart_s=restart,
                        loaning=loaning,
                        forecast=forecast,
                        headroom=headroom,
                        inference_start_s=args.inference_start,
                    )
                    results = [
                        simulate(
                            jobs[w],
                            models,
                            cluster,
                            make_policy(policy, 60.0, restart),
                            config,
                            svc,
                        )
                        for w in workloads
                    ]
                    rows = [r.summary() for r in results]
                    m = {k: statistics.mean(r[k] for r in rows) for k in rows[0]}
                    m["requeue_s"] = statistics.mean(_requeued(r) for r in results)
                    m["slo_min"] = min(r["slo_requests"] for r in rows)
                    m["slo_time_min"] = min(r["slo_time"] for r in rows)
                    means[loaning] = m
                    print(
                        f"{loaning:13} {m['avg_jct_s']:9.0f} {m['p95_jct_s']:9.0f} "
                        f"{m['avg_queue_s']:8.0f} {100 * m['avg_utilization']:5.1f}% "
                        f"{100 * m['slo_min']:7.2f}% {100 * m['slo_time_min']:7.2f}% "
                        f"{m['servers_loaned']:7.0f} "
                        f"{m['servers_reclaimed']:8.0f} {m['reclaim_preemptions']:8.0f} "
                        f"{m['reclaim_lost_gpu_s']:10.0f} {m['requeue_s']:9.0f} "
                        f"{time.perf_counter() - tic:7.1f}"
                    )
                if args.bound:
                    if (restart, policy) not in alone:
                        tic = time.perf_counter()
                        config = SimConfig(restart_s=restart)
                        rows = [
                            simulate(
                                jobs[w], models, cluster, make_policy(policy, 60.0, restart), config
                            ).summary()
                            for w in workloads
                        ]
                        m = {k: statistics.mean(r[k] for r in rows) for k in rows[0]}
                        alone[restart, policy] = m, time.perf_counter() - tic
                    m, wall = alone[restart, policy]
                    print(
                        f"{'no inference':13} {m['avg_jct_s']:9.0f} {m['p95_jct_s']:9.0f} "
                        f"{m['avg_queue_s']:8.0f} {100 * m['avg_utilization']:5.1f}% "
                        f"{'-':>8} {'-':>8} {'-':>7} {'-':>8} {'-':>8} {'-':>10} {'-':>9} "
                        f"{wall:7.1f}"
                    )
                better = min(("dedicated", "one-way"), key=lambda k: means[k]["avg_jct_s"])
                fapes, base = means["fapes"], means[better]
                cut = 1 - fapes["avg_jct_s"] / base["avg_jct_s"]
                queue = 1 - fapes["avg_queue_s"] / max(base["avg_queue_s"], 1e-9)
                target = 0.25 if level == "low" else 0.09
                print(
                    f"fapes vs {better}: JCT {-100 * cut:+.1f}% (target <= {-100 * target:.0f}%"
                    f": {'met' if cut >= target else 'missed'}), queue {-100 * queue:+.1f}%, "
                    f"SLO {100 * fapes['slo_min']:.2f}% of requests (target >= 99%: "
                    f"{'met' if fapes['slo_min'] >= 0.99 else 'missed'}), "
                    f"{100 * fapes['slo_time_min']:.2f}% of time"
                )
                if args.bound:
                    bound = 1 - alone[restart, policy][0]["avg_jct_s"] / base["avg_jct_s"]
                    print(
                        f"bound: training with no inference at all is {-100 * bound:+.1f}% "
                        f"against {better}; no loaning can do better than that"
                    )
                for name in ("one-way", "fapes"):
                    if name in means:
                        print(_preemption_share(name, means[name], restart))
                for other in ("one-way", "one-way-blind"):
                    if other in means and (other != better or other == "one-way-blind"):
                        one = means[other]
                        print(
                            f"fapes vs {other}: JCT "
                            f"{-100 * (1 - fapes['avg_jct_s'] / one['avg_jct_s']):+.1f}%, "
                            f"preemptions {fapes['reclaim_preemptions']:.0f} vs "
                            f"{one['reclaim_preemptions']:.0f}"
                        )


def _requeued(result: SimResult) -> float:
    """Per job of the run, the seconds that jobs a reclaim preempted spent queued after their
    start (waiting to be relaunched; a non-elastic job waits for all its GPUs again)."""
    wait = 0.0
    for job in result.jobs:
        if job.reclaim_preemptions and job.start_s is not None:
            wait += max(job.queued_s - (job.start_s - job.arrival_s), 0.0)
    return wait / len(result.jobs)


def _preemption_share(name: str, m: dict[str, float], restart: float) -> str:
    """What reclaims cost the average job directly: the requeuing of the jobs they preempted
    and a restart per preemption, per job, against the average JCT. No choice of servers to
    reclaim can cut the JCT by more than this (knock-on effects aside)."""
    direct = m["requeue_s"] + m["reclaim_preemptions"] * restart / m["jobs"]
    return (
        f"{name}: reclaims cost the average job {direct:.0f} s directly (requeue "
        f"{m['requeue_s']:.0f} s + restarts), {100 * direct / m['avg_jct_s']:.1f}% of its JCT"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="1,2,3,4,5,6,7,8")
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument(
        "--gpus-per-server", type=int, default=4, help="4 (default); FaPES's testbed has 8"
    )
    parser.add_argument("--levels", default="low,medium,high")
    parser.add_argument("--policies", default="fapes,fifo")
    parser.add_argument("--restarts", default="5.68,30", help="restart costs, seconds")
    parser.add_argument(
        "--loanings",
        default=",".join(BASELINES),
        help=f"loaning strategies, dedicated, one-way and fapes among them: {', '.join(LOANING)}",
    )
    parser.add_argument(
        "--training-loads", default="1.0", help="Pollux job loads: 0.5, 1.0 and/or 1.5"
    )
    parser.add_argument(
        "--forecasts",
        "--forecast",
        default="exact",
        help="how inference load is forecast each round: NAME or NAME*HEADROOM, "
        "comma-separated, NAME one of exact (the true load: a bound), last, max "
        "(over 5 rounds), seasonal (the same round a day earlier), seasonal-last; e.g. "
        "exact,last,max*1.1,seasonal (default: exact)",
    )
    parser.add_argument(
        "--inference-start",
        type=float,
        default=0.0,
        help="seconds an added inference worker takes to start serving (default 0)",
    )
    parser.add_argument(
        "--rate-noise",
        type=float,
        default=0.05,
        help="std of the tidal traces' log-normal noise (default 0.05)",
    )
    parser.add_argument(
        "--history-days",
        type=int,
        default=0,
        help="the services ran this many days before the jobs arrive (their past is "
        "known: seasonal reads it from the first round; default 0)",
    )
    parser.add_argument(
        "--bound",
        action="store_true",
        help="also run training alone on the whole pool (no inference): a bound no loaning "
        "strategy can beat",
    )
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
