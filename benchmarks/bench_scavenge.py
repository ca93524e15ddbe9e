"""MalleTrain on the idle nodes of a batch-scheduled cluster: every scavenging policy on an
idle-node trace with a jobs file, the allocator's time per event, and the JPA's profiling
cost (inverse order vs stepping up).

The files are not shipped (no stated licence): the Summit idle-node events and the ImageNet
jobs converted from BFTrainer / FreeTrain's public log replayer. Give their paths:

    .venv/bin/python benchmarks/bench_scavenge.py EVENTS.csv.gz JOBS.csv [--days 7]
        [--policies freetrain,malletrain,freetrain-guess,greedy,equal] [--max-running 10]
        [--processes 3]   (allocator times are then measured under each other's load)
        [--donors 1] [--profile-points 2] [--no-spare-stop]   (MalleTrain's JPA: donor jobs
        per profile, the fewest counts it measures (3 checks the Amdahl law on a third
        count), and whether it profiles down while the allocation leaves nodes idle)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from faasml.cluster.scavenge import (
    AllocJob,
    IdleTrace,
    PiecewiseCurve,
    ScavengeConfig,
    ScavengeJob,
    ScavengeResult,
    allocate_counts,
    inverse_order,
    load_idle_trace,
    load_jobs,
    make_scavenge_policy,
    schedule_cost,
    settled,
    simulate_scavenge,
    step_up_order,
)
from faasml.cluster.scavenge.policies import MalleTrainPolicy
from faasml.exceptions import FaasmlError


def _fmt_s(value: float) -> str:
    return "-" if math.isnan(value) else f"{value / 3600:.1f}h"


def _one_loaded(
    trace: IdleTrace,
    jobs: list[ScavengeJob],
    name: str,
    args: argparse.Namespace,
    config: ScavengeConfig,
) -> tuple[ScavengeResult, float]:
    started = time.perf_counter()
    policy = make_scavenge_policy(name, window_s=args.window, time_limit_s=args.time_limit)
    if isinstance(policy, MalleTrainPolicy):
        policy.donors = args.donors
        policy.profile_points = args.profile_points
        policy.stop_when_spare = not args.no_spare_stop
    return simulate_scavenge(trace, jobs, policy, config), time.perf_counter() - started


def _one(
    events: str, jobs_file: str, name: str, args: argparse.Namespace, config: ScavengeConfig
) -> tuple[ScavengeResult, float]:
    trace = load_idle_trace(events)
    jobs = load_jobs(jobs_file, checkpoint_s=args.checkpoint)
    return _one_loaded(trace, jobs, name, args, config)


def policies(args: argparse.Namespace) -> None:
    trace = load_idle_trace(args.events)
    jobs = load_jobs(args.jobs, checkpoint_s=args.checkpoint)
    end = args.days * 86400.0
    config = ScavengeConfig(
        max_running=args.max_running,
        end_s=end,
        checkpoint_s=args.checkpoint,
        measure_s=args.measure,
    )
    print(
        f"{len(jobs)} jobs, {len(trace.nodes)} nodes, first {args.days:g} days "
        f"({sum(1 for c in trace.changes if c.time_s < end)} trace instants), "
        f"P = {args.max_running}, window {args.window:g} s, checkpoint {args.checkpoint:g} s, "
        f"JPA {args.measure:g} s per count"
    )
    names = args.policies.split(",")
    results: dict[str, ScavengeResult] = {}
    if args.processes > 1:
        with ProcessPoolExecutor(args.processes) as pool:
            futures = {
                name: pool.submit(_one, args.events, args.jobs, name, args, config)
                for name in names
            }
            for name in names:
                results[name], seconds = futures[name].result()
                print(f"  ran {name} in {seconds:.0f} s", flush=True)
    else:
        for name in names:
            results[name], seconds = _one_loaded(trace, jobs, name, args, config)
            print(f"  ran {name} in {seconds:.0f} s", flush=True)
    oracle = results.get("freetrain")
    guess = results.get("freetrain-guess")
    header = (
        f"{'policy':16} {'samples':>9} {'/oracle':>8} {'/guess':>7} {'done':>5} "
        f"{'mean JCT':>9} {'idle used':>9} {'rescales':>8} {'preempt':>7} {'lost':>6}"
    )
    print(header)
    for name, r in results.items():
        s = r.summary()
        vs_oracle = r.samples / oracle.samples if oracle else math.nan
        vs_guess = r.samples / guess.samples if guess else math.nan
        lost = r.lost_samples / max(r.samples + r.lost_samples, 1.0)
        print(
            f"{name:16} {r.samples / 1e9:8.2f}G {vs_oracle:8.3f} {vs_guess:7.3f} "
            f"{r.finished:5d} {_fmt_s(s['mean_jct_s']):>9} "
            f"{100 * s['idle_used_share']:8.1f}% {r.rescales:8d} {r.preemptions:7d} "
            f"{100 * lost:5.1f}%"
        )
    print("allocator time per event (policy decision + mapping to nodes):")
    for name, r in results.items():
        s = r.summary()
        if r.solver_status:
            print(
                f"  {name:16} {int(s['allocations'])} events: mean {s['solve_mean_s']:.3f} s, "
                f"p95 {s['solve_p95_s']:.3f} s, max {s['solve_max_s']:.3f} s; "
                f"HiGHS {dict(sorted(r.solver_status.items()))}"
            )
    for name, r in results.items():
        if r.profiled_jobs:
            print(
                f"  {name}: profiled {r.profiled_jobs} jobs; {r.profiling_s / 3600:.1f} h in "
                f"profiling, {r.profiling_rescales} profiling rescales; rescale pauses "
                f"{r.paused_node_s / 3600:.0f} node-h in all"
            )


def profiling_cost(args: argparse.Namespace) -> None:
    jobs = load_jobs(args.jobs)
    totals: dict[str, np.ndarray] = {
        "inverse": np.zeros(5),
        "inverse, early stop": np.zeros(5),
        "step-up": np.zeros(5),
    }
    for job in jobs:
        full = inverse_order(job.max_nodes, job.min_nodes)
        truth = PiecewiseCurve(tuple(map(float, job.nodes)), job.samples_per_s)
        points: dict[int, float] = {}
        early: list[int] = []
        for count in full:  # what MalleTrain's JPA measures before it settles
            early.append(count)
            points[count] = float(truth(count))
            if settled(points, least=args.profile_points):
                break
        for name, order in (
            ("inverse", full),
            ("inverse, early stop", tuple(early)),
            ("step-up", step_up_order(job.max_nodes, job.min_nodes)),
        ):
            c = schedule_cost(order, args.measure, job.scale_up_s, job.scale_down_s)
            totals[name] += (c.scale_ups, c.scale_downs, c.paused_node_s, c.duration_s, c.node_s)
    print(
        f"JPA profiling of {len(jobs)} jobs at min..max nodes (powers of two), "
        f"{args.measure:g} s per count:"
    )
    print(f"{'order':20} {'ups':>6} {'downs':>6} {'paused node-h':>13} {'hours':>7} {'node-h':>8}")
    for name, t in totals.items():
        print(
            f"{name:20} {t[0]:6.0f} {t[1]:6.0f} {t[2] / 3600:13.1f} {t[3] / 3600:7.1f} "
            f"{t[4] / 3600:8.1f}"
        )
    inv, up = totals["inverse"], totals["step-up"]
    print(f"inverse / step-up: paused node-s {inv[2] / up[2]:.2f}, duration {inv[3] / up[3]:.2f}")


def stress(args: argparse.Namespace) -> None:
    """The allocator alone at P = 100 running jobs, on pool sizes drawn from the trace."""
    trace = load_idle_trace(args.events)
    jobs = load_jobs(args.jobs)
    sizes, pool = [], 0
    for change in trace.changes:
        pool += len(change.added) - len(change.removed)
        sizes.append(pool)
    rng = np.random.default_rng(0)
    instances: list[tuple[list[AllocJob], int]] = []
    for _ in range(args.stress):
        size = int(rng.choice(sizes))
        picked = rng.choice(len(jobs), size=100, replace=False)
        left = size
        views = []
        for index in picked:
            spec = jobs[int(index)]
            held = int(min(left, rng.integers(0, spec.max_nodes + 1)))
            left -= held
            views.append(
                AllocJob(
                    spec.job,
                    held,
                    spec.min_nodes,
                    spec.max_nodes,
                    spec.scale_up_s,
                    spec.scale_down_s,
                    PiecewiseCurve(tuple(map(float, spec.nodes)), spec.samples_per_s),
                )
            )
        instances.append((views, size))
    print(f"allocator alone, 100 running jobs, {args.stress} pools drawn from the trace:")
    worth: dict[bool, list[float]] = {}
    # Both formulations on the same instances, interleaved (the same load for both).
    runs: dict[bool, list[tuple[float, float, str, int]]] = {False: [], True: []}
    for views, size in instances:
        for reduce in (False, True):
            cpu = time.process_time()
            result = allocate_counts(
                views, size, window_s=args.window, time_limit_s=args.time_limit, reduce=reduce
            )
            runs[reduce].append(
                (result.solve_s, time.process_time() - cpu, result.status, result.variables)
            )
            worth.setdefault(reduce, []).append(result.objective)
    for reduce in (False, True):
        t = np.asarray([r[0] for r in runs[reduce]])
        c = np.asarray([r[1] for r in runs[reduce]])
        statuses: dict[str, int] = {}
        for r in runs[reduce]:
            statuses[r[2]] = statuses.get(r[2], 0) + 1
        label = "reduced MILP" if reduce else "full MILP"
        print(
            f"  {label:12} wall mean {t.mean():.3f} s, p95 {np.percentile(t, 95):.3f} s, "
            f"max {t.max():.3f} s; CPU p95 {np.percentile(c, 95):.3f} s, max {c.max():.3f} s; "
            f"{dict(sorted(statuses.items()))}; HiGHS binaries mean "
            f"{np.mean([r[3] for r in runs[reduce]]):.0f}"
        )
    ratio = np.asarray(worth[True]) / np.maximum(np.asarray(worth[False]), 1e-12)
    print(
        f"  objective reduced / full: min {ratio.min():.4f}, mean {ratio.mean():.4f}, "
        f"max {ratio.max():.4f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("events")
    parser.add_argument("jobs")
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--policies", default="freetrain,malletrain,freetrain-guess,greedy,equal")
    parser.add_argument("--max-running", type=int, default=10)
    parser.add_argument("--window", type=float, default=600.0)
    parser.add_argument("--checkpoint", type=float, default=60.0)
    parser.add_argument("--measure", type=float, default=60.0)
    parser.add_argument("--time-limit", type=float, default=1.0)
    parser.add_argument("--donors", type=int, default=1, help="malletrain: donors per profile")
    parser.add_argument(
        "--profile-points", type=int, default=2, help="malletrain: fewest counts profiled"
    )
    parser.add_argument(
        "--no-spare-stop", action="store_true", help="malletrain: profile down with idle nodes"
    )
    parser.add_argument("--skip-policies", action="store_true", help="JPA cost only")
    parser.add_argument(
        "--stress", type=int, default=0, help="also time the allocator alone, P = 100, N draws"
    )
    parser.add_argument(
        "--processes", type=int, default=1, help="run policies in parallel processes"
    )
    args = parser.parse_args()
    try:
        profiling_cost(args)
        if args.stress:
            stress(args)
        if not args.skip_policies:
            policies(args)
    except FaasmlError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
