"""Scheduling time per round of every cluster policy at 64 GPUs and at 1000 servers × 8 GPUs.

FaPES §7.5's scale: 1000 servers of 8 GPUs, 10 servers per rack switch. Active jobs are
drawn from the Pollux workloads (applications and requests) with random progress; each
policy allocates once from scratch (``first``: every job queued), then ``--rounds`` more
rounds with the previous allocation (and FaPES's plans) in force: wall-clock median, p90
and max, and the median CPU time of this process (``cpu med``, less disturbed by other
work on a shared machine).

``churn`` rounds (the default) are what a busy cluster sees: between rounds every job that
holds GPUs advances 1–3 % of its work, and 5 % of the jobs (and any that finished) are
replaced by newly arrived ones. ``idle`` rounds (``--mode idle``) change nothing between
rounds: they measure a policy re-deciding an unchanged state, a lower bound.

    .venv/bin/python benchmarks/bench_cluster_scale.py [--rounds 5] [--mode churn|idle|both]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import numpy as np

from faasml.cluster import (
    Cluster,
    JobView,
    load_models,
    load_workload,
    make_policy,
    resolve_workload,
)
from faasml.cluster.policies import GPU_POOL, POLICIES
from faasml.cluster.records import Job


def views(count: int, seed: int) -> list[JobView]:
    rng = np.random.default_rng(seed)
    return [new_job(i, rng, float(rng.uniform(0.0, 0.9))) for i in range(count)]


_MODELS: dict[str, Any] = {}
_ROWS: list[Job] = []


def new_job(i: int, rng: np.random.Generator, done: float) -> JobView:
    """Job ``i`` (a workload-6 row), with ``done`` of its work already done."""
    if not _ROWS:
        _MODELS.update(load_models())
        _ROWS.extend(load_workload(resolve_workload("workload-6")))
    row = _ROWS[i % len(_ROWS)]
    job = Job(f"{row.name}#{i}", row.application, float(i), row.gpus, row.batch_size)
    model = _MODELS[job.application]
    work = model.work(job)
    return JobView(job, model, done * work, work)


def measure(
    policy_name: str, cluster: Cluster, jobs: list[JobView], rounds: int, churn: bool, seed: int
) -> tuple[float, list[float], list[float]]:
    policy = make_policy(policy_name)
    rng = np.random.default_rng(seed)
    current: dict[str, tuple[int, ...]] = {}
    times, cpu = [], []
    serial = len(jobs)
    for r in range(rounds + 1):
        tic, cpu_tic = time.perf_counter(), time.process_time()
        decision = policy.allocate(jobs, cluster, current, 60.0 * r)
        times.append(time.perf_counter() - tic)
        cpu.append(time.process_time() - cpu_tic)
        current = {k: v for k, v in decision.allocation.items() if v}
        following = []
        for v in jobs:
            placement = current.get(v.name, ())
            progress = v.progress
            if churn and placement:
                progress += float(rng.uniform(0.01, 0.03)) * v.work
            if churn and (progress >= v.work or rng.random() < 0.05):
                current.pop(v.name, None)
                following.append(new_job(serial, rng, 0.0))
                serial += 1
                continue
            following.append(
                JobView(
                    v.job,
                    v.model,
                    progress,
                    v.work,
                    placement,
                    started=v.started or bool(placement),
                    waiting_rounds=0 if placement else v.waiting_rounds + 1,
                    plan=decision.plans.get(v.name, v.plan),
                )
            )
        jobs = following
    return times[0], times[1:], cpu[1:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--policies", default=",".join(POLICIES.names(GPU_POOL)))
    parser.add_argument("--mode", choices=("churn", "idle", "both"), default="churn")
    parser.add_argument("--large-only", action="store_true", help="only 1000 servers × 8")
    args = parser.parse_args()
    setups = [
        ("64 GPUs (16 × 4), 40 jobs", Cluster.uniform(16, 4), 40),
        ("8000 GPUs (1000 × 8, 10 per switch), 800 jobs", Cluster.uniform(1000, 8, 10), 800),
    ]
    if args.large_only:
        setups = setups[1:]
    modes = ("churn", "idle") if args.mode == "both" else (args.mode,)
    for title, cluster, count in setups:
        for mode in modes:
            what = (
                "churn: running jobs advance 1-3 %, 5 % replaced per round"
                if mode == "churn"
                else "idle: nothing changes between rounds"
            )
            print(f"\n== {title}: seconds per scheduling round over {args.rounds} rounds ({what})")
            print(f"{'policy':12} {'first':>8} {'median':>8} {'p90':>8} {'max':>8} {'cpu med':>8}")
            for name in args.policies.split(","):
                jobs = views(count, 0)
                first, t, cpu = measure(name, cluster, jobs, args.rounds, mode == "churn", 1)
                p90 = float(np.percentile(t, 90))
                print(
                    f"{name:12} {first:8.3f} {statistics.median(t):8.3f} {p90:8.3f} "
                    f"{max(t):8.3f} {statistics.median(cpu):8.3f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
