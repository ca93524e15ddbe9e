"""Scheduling time per round of every cluster policy at 64 GPUs and at 1000 servers × 8 GPUs.

FaPES §7.5's scale: 1000 servers of 8 GPUs, 10 servers per rack switch. Active jobs are
drawn from the Pollux workloads (applications and requests) with random progress; each
policy allocates once from scratch (``first``: every job queued), then ``--rounds`` more
rounds with the previous allocation (and FaPES's plans) in force (median, p90, max).

    .venv/bin/python benchmarks/bench_cluster_scale.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from faasml.cluster import (
    Cluster,
    JobView,
    load_models,
    load_workload,
    make_policy,
    resolve_workload,
)
from faasml.cluster.policies import POLICIES
from faasml.cluster.records import Job


def views(count: int, seed: int) -> list[JobView]:
    models = load_models()
    rows = load_workload(resolve_workload("workload-6"))
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        row = rows[i % len(rows)]
        job = Job(f"{row.name}#{i}", row.application, float(i), row.gpus, row.batch_size)
        model = models[job.application]
        work = model.work(job)
        out.append(JobView(job, model, float(rng.uniform(0.0, 0.9)) * work, work))
    return out


def measure(
    policy_name: str, cluster: Cluster, jobs: list[JobView], rounds: int
) -> tuple[float, list[float]]:
    policy = make_policy(policy_name)
    current: dict[str, tuple[int, ...]] = {}
    times = []
    for r in range(rounds + 1):
        tic = time.perf_counter()
        decision = policy.allocate(jobs, cluster, current, 60.0 * r)
        times.append(time.perf_counter() - tic)
        current = {k: v for k, v in decision.allocation.items() if v}
        jobs = [
            JobView(
                v.job,
                v.model,
                v.progress,
                v.work,
                current.get(v.name, ()),
                started=v.started or v.name in current,
                waiting_rounds=0 if v.name in current else v.waiting_rounds + 1,
                plan=decision.plans.get(v.name, v.plan),
            )
            for v in jobs
        ]
    return times[0], times[1:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--policies", default=",".join(POLICIES.names()))
    args = parser.parse_args()
    setups = [
        ("64 GPUs (16 × 4), 40 jobs", Cluster.uniform(16, 4), 40),
        ("8000 GPUs (1000 × 8, 10 per switch), 800 jobs", Cluster.uniform(1000, 8, 10), 800),
    ]
    for title, cluster, count in setups:
        jobs = views(count, 0)
        print(f"\n== {title}: seconds per scheduling round over {args.rounds} rounds")
        print(f"{'policy':12} {'first':>8} {'median':>8} {'p90':>8} {'max':>8}")
        for name in args.policies.split(","):
            first, t = measure(name, cluster, jobs, args.rounds)
            p90 = float(np.percentile(t, 90))
            print(f"{name:12} {first:8.3f} {statistics.median(t):8.3f} {p90:8.3f} {max(t):8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
